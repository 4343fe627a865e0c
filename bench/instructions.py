"""Publish N one-key patches to ``/dev/null``, for instruction counts: ``python -m
bench.instructions KIND N [PATH]`` with KIND one of

- ``trio``: the trio owner (``coalesce=False``, one frame per update);
- ``asyncio``: the asyncio owner, the same way;
- ``floor``: the same frame built as a dict, ``json.dumps`` and one ``os.write``: what any
  agent pays to put the update on the wire, with no rule kept (the floor of the asyncio owner,
  whose publication needs no event-loop pass either);
- ``trio-floor``: the floor and one ``await trio.lowlevel.checkpoint()`` per update, what any
  trio ``send_all`` pays too (the floor of the trio owner, whose ``publish`` is a checkpoint).

``PATH`` (default ``/dev/null``) is where the frames go; the tests write all four kinds to
files and compare them, so every kind puts the same bytes on the wire.

Run it under ``valgrind --tool=callgrind`` with two counts and take the difference, which
leaves out start-up and imports (``python -m bench --only instructions`` does it
for every kind in one run)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.instructions trio 2000
    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.instructions trio 6000

(instructions per update = difference of the two totals / 4000). Instruction counts do not
depend on what else the machine is doing, so they compare two versions of the code where
throughput runs are too noisy to.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import trio

import agent_meta

SESSION_ID = "bench-session"
KINDS = ("trio", "asyncio", "floor", "trio-floor")


def patch(step: int, count: int) -> dict[str, object]:
    return {"progress": {"step": step, "of": count}, "pad": "x" * 40}


def open_output(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


async def publish_trio(count: int, path: str) -> None:
    stream = trio.lowlevel.FdStream(open_output(path))
    options = agent_meta.OwnerOptions(coalesce=False)
    async with agent_meta.open_owner(stream, options) as owner:
        lifetime = owner.open_lifetime(SESSION_ID)
        for step in range(count):
            await lifetime.publish(meta=patch(step, count))
    await stream.aclose()


async def publish_asyncio(count: int, path: str) -> None:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(open_output(path), "wb", buffering=0),
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    options = agent_meta.OwnerOptions(coalesce=False)
    async with agent_meta.open_asyncio_owner(writer, options) as owner:
        lifetime = owner.open_lifetime(SESSION_ID)
        for step in range(count):
            await lifetime.publish(meta=patch(step, count))
    transport.close()


def publish_floor(count: int, path: str) -> None:
    fd = open_output(path)
    for step in range(count):
        message = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SESSION_ID,
                "update": {"sessionUpdate": "session_info_update", "_meta": patch(step, count)},
            },
        }
        os.write(fd, (json.dumps(message, separators=(",", ":")) + "\n").encode())
    os.close(fd)


async def publish_trio_floor(count: int, path: str) -> None:
    fd = open_output(path)
    for step in range(count):
        message = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SESSION_ID,
                "update": {"sessionUpdate": "session_info_update", "_meta": patch(step, count)},
            },
        }
        os.write(fd, (json.dumps(message, separators=(",", ":")) + "\n").encode())
        await trio.lowlevel.checkpoint()
    os.close(fd)


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "trio"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    path = sys.argv[3] if len(sys.argv) > 3 else os.devnull
    if kind == "trio":
        trio.run(publish_trio, count, path)
    elif kind == "asyncio":
        asyncio.run(publish_asyncio(count, path))
    elif kind == "floor":
        publish_floor(count, path)
    elif kind == "trio-floor":
        trio.run(publish_trio_floor, count, path)
    else:
        sys.exit(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


if __name__ == "__main__":
    main()
