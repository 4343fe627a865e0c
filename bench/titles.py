"""Client-set titles (R13): what ``session/set_title`` and the ``session/list`` rewrite cost.

``python -m bench.titles [--smoke]`` prints, for no store, SQLite (``synchronous=FULL``)
and a throwaway PostgreSQL server on loopback (``fsync=on``):

- **set_title**: :meth:`LifetimePolicy.set_title` on an open lifetime, from the call to its
  return (the confirmation queued and, with a store, stored): p50 and p99;
- **list rewrite**: :meth:`LifetimePolicy.rewrite` of a ``session/list`` page of ``page``
  sessions that are not open on the connection, half of them with a client-set title (one
  store read per session listed): per page, and per session.

Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import trio

import agent_meta
from agent_meta.owner._policy import LifetimePolicy

from ._common import NullTransport
from .stores import Places, _percentile, _server


async def set_title(places: Places, kind: str, count: int) -> list[float]:
    async with AsyncExitStack() as stack:
        store = None
        if kind != "none":
            store = await stack.enter_async_context(agent_meta.open_store(places.url(kind)))
        owner = await stack.enter_async_context(agent_meta.open_owner(NullTransport(), store=store))
        policy = LifetimePolicy(owner)
        owner.open_lifetime("s")
        durations = []
        for step in range(count):
            start = time.perf_counter()
            await policy.set_title({"sessionId": "s", "title": f"title {step}"})
            durations.append(time.perf_counter() - start)
        return durations


async def list_rewrite(places: Places, kind: str, page: int, repeats: int) -> list[float]:
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(agent_meta.open_store(places.url(kind)))
        async with agent_meta.open_owner(NullTransport(), store=store) as writer:
            for index in range(page):
                lifetime = writer.open_lifetime(f"s{index}")
                await lifetime.publish(title="agent's")
                if index % 2 == 0:
                    await lifetime.set_client_title(f"client's {index}")
        owner = await stack.enter_async_context(agent_meta.open_owner(NullTransport(), store=store))
        policy = LifetimePolicy(owner)
        sessions = [{"sessionId": f"s{i}", "cwd": "/", "title": "agent's"} for i in range(page)]
        durations = []
        for step in range(repeats):
            await policy.request({"jsonrpc": "2.0", "id": step, "method": "session/list"})
            answer = {"jsonrpc": "2.0", "id": step, "result": {"sessions": sessions}}
            start = time.perf_counter()
            rewritten = await policy.rewrite(answer)
            durations.append(time.perf_counter() - start)
            policy.response(rewritten)
        return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny counts (a check it runs)")
    args = parser.parse_args()
    count, page, repeats = (20, 10, 3) if args.smoke else (300, 50, 30)
    server, why = _server()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-meta-bench-titles-") as scratch:
            places = Places(Path(scratch), server)
            for kind in places.kinds():
                durations = trio.run(set_title, places, kind, count)
                p50 = _percentile(durations, 0.5) * 1000
                p99 = _percentile(durations, 0.99) * 1000
                print(f"set_title, {kind}: p50 {p50:.3f} ms, p99 {p99:.3f} ms ({count} calls)")
            for kind in places.kinds():
                if kind == "none":
                    continue
                pages = trio.run(list_rewrite, places, kind, page, repeats)
                mean = statistics.fmean(pages) * 1000
                print(
                    f"session/list rewrite, {kind}: {mean:.2f} ms per page of {page} sessions "
                    f"not open ({mean / page * 1000:.0f} us per session)"
                )
    finally:
        if server is not None:
            server.stop()
    if server is None:
        print(f"PostgreSQL figures skipped: {why}")


if __name__ == "__main__":
    main()
