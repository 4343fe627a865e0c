"""Section 8: the lifetime stores side by side: no store, SQLite, PostgreSQL on loopback.

Each figure runs a trio owner over a transport that drops frames (:class:`NullTransport`), so
what is measured is the owner with its store. SQLite runs with ``synchronous=FULL`` (an fsync
per batch); PostgreSQL is a throwaway server this section starts (``fsync=on``,
``synchronous_commit=on``: each batch is flushed to its WAL before it counts as stored), or the
one ``AGENT_META_POSTGRES_URL`` names.

- **Burst throughput**: ``sessions`` lifetimes, each with its own task publishing
  ``per_session`` patches as fast as ``await publish()`` returns (a publication returns once
  its batch is stored; concurrent publishers share batches). Publications per second.
- **Publish to durable latency**: publications started at a steady 1,000 per second, spread
  over 10 sessions, each timed from the call to its return (stored); p50 and p99.
- **Memory per idle lifetime**: traced allocation growth of opening ``lifetimes`` lifetimes and
  storing them, divided by their number (the store's pool and connections exist before).
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
import tracemalloc
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

import agent_meta
from tests.support.postgres_server import PostgresServer, ServerUnavailableError
from tests.support.postgres_server import start as start_server

from ._common import NullTransport, Row, verdict

SECTION = "8 stores"
RATE = 1000
"""Publications per second for the latency figure."""


class Places:
    """Where each store lives for one run: a fresh SQLite file, a fresh PostgreSQL schema."""

    def __init__(self, scratch: Path, server: PostgresServer | None) -> None:
        self._scratch = scratch
        self._server = server
        self._files = 0

    def kinds(self) -> list[str]:
        return ["none", "sqlite"] + (["postgres"] if self._server is not None else [])

    def url(self, kind: str) -> str:
        if kind == "postgres":
            assert self._server is not None
            return self._server.fresh_url("bench")
        self._files += 1
        return str(self._scratch / f"bench-{self._files}.sqlite")


async def _owner(stack: AsyncExitStack, places: Places, kind: str) -> agent_meta.MetaOwner:
    store = None
    if kind != "none":
        store = await stack.enter_async_context(agent_meta.open_store(places.url(kind)))
    return await stack.enter_async_context(agent_meta.open_owner(NullTransport(), store=store))


async def burst(places: Places, kind: str, sessions: int, per_session: int) -> float:
    """Publications per second, ``sessions`` publishers at once."""
    async with AsyncExitStack() as stack:
        owner = await _owner(stack, places, kind)
        lifetimes = [owner.open_lifetime(f"s{index}") for index in range(sessions)]
        await owner.wait_flushed()

        async def publish(lifetime: agent_meta.SessionLifetime) -> None:
            for step in range(per_session):
                await lifetime.publish(meta={"n": step})

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for lifetime in lifetimes:
                nursery.start_soon(publish, lifetime)
        elapsed = time.perf_counter() - start
    return sessions * per_session / elapsed


async def latency(places: Places, kind: str, count: int) -> list[float]:
    """Seconds from ``publish()`` to its return, ``count`` publications at :data:`RATE`/s."""
    durations: list[float] = []
    async with AsyncExitStack() as stack:
        owner = await _owner(stack, places, kind)
        lifetimes = [owner.open_lifetime(f"s{index}") for index in range(10)]
        await owner.wait_flushed()

        async def publish(lifetime: agent_meta.SessionLifetime, step: int) -> None:
            begun = time.perf_counter()
            await lifetime.publish(meta={"n": step})
            durations.append(time.perf_counter() - begun)

        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            for step in range(count):
                await trio.sleep_until(start + step / RATE)
                nursery.start_soon(publish, lifetimes[step % len(lifetimes)], step)
    return durations


async def idle_memory(places: Places, kind: str, count: int) -> float:
    """Traced bytes per stored, idle lifetime."""
    async with AsyncExitStack() as stack:
        owner = await _owner(stack, places, kind)
        warm = owner.open_lifetime("warm-up")  # the pool's connections exist before
        await warm.publish(meta={"n": 0})
        ids = [f"{index:08x}-5e55-4000-8000-000000000000" for index in range(count)]
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            lifetimes = [owner.open_lifetime(sid) for sid in ids]
            await owner.wait_flushed()
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(lifetimes) == count
    return (after - before) / count


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _server() -> tuple[PostgresServer | None, str]:
    try:
        return start_server(fsync=True), ""
    except ServerUnavailableError as exc:
        return None, str(exc).splitlines()[0]


def rows(sessions: int, per_session: int, publications: int, lifetimes: int) -> list[Row]:
    server, why = _server()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-meta-bench-stores-") as scratch:
            places = Places(Path(scratch), server)
            figures = {
                kind: _measure(places, kind, sessions, per_session, publications, lifetimes)
                for kind in places.kinds()
            }
    finally:
        if server is not None:
            server.stop()
    table = _rows(figures, sessions, per_session, publications, lifetimes)
    if server is None:
        table.append(Row(SECTION, "PostgreSQL figures", f"skipped: {why}"))
    return table


def _measure(
    places: Places, kind: str, sessions: int, per_session: int, publications: int, count: int
) -> dict[str, Any]:
    return {
        "burst": trio.run(burst, places, kind, sessions, per_session),
        "latency": trio.run(latency, places, kind, publications),
        "memory": trio.run(idle_memory, places, kind, count),
    }


def _rows(
    figures: dict[str, dict[str, Any]],
    sessions: int,
    per_session: int,
    publications: int,
    lifetimes: int,
) -> list[Row]:
    table: list[Row] = []
    sqlite_rate = figures["sqlite"]["burst"]
    for kind, figure in figures.items():
        rate = figure["burst"]
        target, ok = "", ""
        if kind == "postgres":
            target, ok = ">= 0.5 x SQLite", verdict(rate >= 0.5 * sqlite_rate)
        table.append(
            Row(
                SECTION,
                f"burst, {sessions} sessions x {per_session} publications: {kind}",
                f"{rate:,.0f} pub/s ({rate / sqlite_rate:.2f} x SQLite)",
                target,
                ok,
            )
        )
    for kind, figure in figures.items():
        durations = figure["latency"]
        p50 = _percentile(durations, 0.50) * 1000
        p99 = _percentile(durations, 0.99) * 1000
        mean = statistics.fmean(durations) * 1000
        target, ok = ("p99 <= 20 ms", verdict(p99 <= 20)) if kind == "postgres" else ("", "")
        table.append(
            Row(
                SECTION,
                f"publish -> durable at {RATE:,}/s ({publications:,} publications): {kind}",
                f"p50 {p50:.2f} ms, p99 {p99:.2f} ms (mean {mean:.2f})",
                target,
                ok,
            )
        )
    for kind, figure in figures.items():
        memory = figure["memory"]
        table.append(
            Row(
                SECTION,
                f"memory per idle stored lifetime ({lifetimes:,}): {kind}",
                f"{memory:,.0f} B",
                "<= 2 KiB",
                verdict(memory <= 2048),
            )
        )
    return table
