"""Section 9: how long a replica takes to take a session over from a holder that died.

Two replicas of ``agent-meta agent`` share one store (``integration/replicas.py``): a SQLite
file, and a PostgreSQL schema on a throwaway loopback server (``fsync=on``) that this section
starts (or the one ``AGENT_META_POSTGRES_URL`` names). A
client makes a session on A, publishes a title and a key, and starts a ``/burst``; once the
burst has published 20 values, A is killed (``kill -9``) and a client already connected to B
resumes the session there (``session/resume``, no replay). Each takeover is timed from B's
request being sent to its response being read: B's claim (a store transaction), the restore,
B's history read and the resync. It is repeated ``repeats`` times per transport, each with a
fresh A (B stays up); p50 and max are reported against 0.5 s, per store and transport. Each
resync is checked against the stored row (a mismatch is a correctness failure, not a timing).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from integration.replicas import (
    HANG,
    Client,
    PostgresDatabase,
    SQLiteFile,
    StoreUnderTest,
    fleet,
    resync_of,
)
from tests.support.postgres_server import PostgresServer, ServerUnavailableError
from tests.support.postgres_server import start as start_server

from ._common import Row, verdict

SECTION = "9 takeover"
TARGET = 0.5
"""Seconds from B's resume request to its response."""
TRANSPORTS = {
    "ws": "WebSocket, --runtime sdk --listen",
    "stdio-trio": "stdio, trio runtime",
    "stdio-sdk": "stdio, --runtime sdk",
}


async def publishing(client: Client, sid: str) -> None:
    """Wait until the burst on ``sid`` has published 20 values."""
    await client.wire.until(lambda: (client.value(sid, "n") or 0) >= 20, HANG)


async def takeovers(kind: str, repeats: int, store: StoreUnderTest) -> tuple[list[float], bool]:
    """``repeats`` takeovers on ``kind`` replicas; their durations, and whether every resync
    equalled the stored state."""
    durations: list[float] = []
    exact = True
    async with fleet(store) as running:
        b = await running.start(kind, "B")
        on_b = await running.connect(b, "client@B")
        for n in range(repeats):
            a = await running.start(kind, f"A{n}")
            on_a = await running.connect(a, f"client@A{n}")
            sid = await on_a.new_session()
            await on_a.prompt(sid, "/title Takeover")
            await on_a.prompt(sid, "/meta set k 1")
            await on_a.prompt(sid, "/burst 100000 n")
            await publishing(on_a, sid)
            await a.kill()
            started = time.perf_counter()
            segment = await on_b.resume(sid, replay=False)
            durations.append(time.perf_counter() - started)
            row = store.row(sid)
            exact &= row is not None and resync_of(segment, sid)["_meta"] == row.meta
            exact &= row is not None and on_b.state(sid) == row.state
    return durations, exact


def rows(repeats: int) -> list[Row]:
    try:
        server: PostgresServer | None = start_server(fsync=True)
        skipped = ""
    except ServerUnavailableError as exc:
        server, skipped = None, str(exc).splitlines()[0]
    out: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="agent-meta-bench-") as tmp:
            for kind, label in TRANSPORTS.items():
                stores: dict[str, StoreUnderTest] = {
                    "SQLite": SQLiteFile(Path(tmp) / f"takeover-{kind}.sqlite")
                }
                if server is not None:
                    stores["PostgreSQL"] = PostgresDatabase(server.fresh_url("takeover"))
                for name, store in stores.items():
                    durations, exact = asyncio.run(takeovers(kind, repeats, store))
                    out += _rows(f"{name}, {label}", repeats, durations, exact)
    finally:
        if server is not None:
            server.stop()
    if server is None:
        out.append(Row(SECTION, "PostgreSQL figures", f"skipped: {skipped}"))
    return out


def _rows(label: str, repeats: int, durations: list[float], exact: bool) -> list[Row]:
    p50, worst = statistics.median(durations), max(durations)
    target = f"<= {TARGET * 1000:.0f} ms"
    return [
        Row(
            SECTION,
            f"resume on B after kill -9 of A ({label}): p50 of {repeats}",
            f"{p50 * 1000:.1f} ms",
            target,
            verdict(p50 <= TARGET),
        ),
        Row(SECTION, "  max", f"{worst * 1000:.1f} ms", target, verdict(worst <= TARGET)),
        Row(SECTION, "  B's resync equals the store", "yes" if exact else "NO", "", verdict(exact)),
    ]
