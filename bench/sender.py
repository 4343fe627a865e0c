"""The agent end of a throughput pipe: one process that sends ``count`` session-info updates.

``python -m bench.sender KIND COUNT --report PATH`` writes the frames to stdout
(a pipe to :mod:`.reader`) and reports, as JSON, when it started sending (``t0``, taken after
all set-up, just before the first update) and what it wrote. Every kind sends the same update
per step, ``{"_meta": {"progress": {"step": i, "of": COUNT}}}`` for session ``bench-session``:

- ``owner``: agent_meta's owner, ``coalesce=False`` (one frame per update, like for like);
- ``owner-coalesce``: the same with coalescing on (fewer frames while the pipe is behind);
- ``sdk``: the official Python SDK (asyncio), ``AgentSideConnection.session_update``;
- ``raw``: pre-encoded NDJSON lines, one trio ``send_all`` per frame (the floor of any trio
  agent);
- ``raw-os``: pre-encoded lines, one blocking ``os.write`` per frame (no event loop at all);
- ``owner-asyncio``: agent_meta's asyncio owner, ``coalesce=False``, over an
  ``asyncio.StreamWriter`` on stdout;
- ``owner-asyncio-coalesce``: the same with coalescing on;
- ``raw-asyncio``: pre-encoded lines, ``write()`` then ``await drain()`` per frame on the same
  kind of ``StreamWriter`` (the floor of any asyncio agent);
- ``sdk-adapter``: the official SDK's ``session_update``, as in ``sdk``, with agent_meta's
  adapter as its transport (``coalesce=False``): what an SDK agent pays for adopting it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from typing import Any

import trio

SESSION_ID = "bench-session"
KINDS = (
    "owner",
    "owner-coalesce",
    "sdk",
    "raw",
    "raw-os",
    "owner-asyncio",
    "owner-asyncio-coalesce",
    "raw-asyncio",
    "sdk-adapter",
)


def patch(step: int, count: int) -> dict[str, Any]:
    """The ``_meta`` patch of update ``step``: one top-level key holding a small object."""
    return {"progress": {"step": step, "of": count}}


def wire_line(step: int, count: int) -> bytes:
    """The NDJSON frame every kind sends for ``step`` (what the raw baselines pre-encode)."""
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": SESSION_ID,
            "update": {"sessionUpdate": "session_info_update", "_meta": patch(step, count)},
        },
    }
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


async def run_owner(count: int, coalesce: bool) -> dict[str, Any]:
    import agent_meta

    stream = trio.lowlevel.FdStream(os.dup(1))
    options = agent_meta.OwnerOptions(coalesce=coalesce)
    async with agent_meta.open_owner(stream, options) as owner:
        lifetime = owner.open_lifetime(SESSION_ID)
        t0 = time.monotonic()
        for step in range(count):
            await lifetime.publish(meta=patch(step, count))
        await owner.wait_flushed()
        t1 = time.monotonic()
        stats = owner.statistics()
    await stream.aclose()
    return {"t0": t0, "t1": t1, "frames": stats.frames_written, "coalesced": stats.coalesced}


async def run_raw(count: int) -> dict[str, Any]:
    lines = [wire_line(step, count) for step in range(count)]
    stream = trio.lowlevel.FdStream(os.dup(1))
    t0 = time.monotonic()
    for line in lines:
        await stream.send_all(line)
    t1 = time.monotonic()
    await stream.aclose()
    return {"t0": t0, "t1": t1, "frames": count}


def run_raw_os(count: int) -> dict[str, Any]:
    lines = [wire_line(step, count) for step in range(count)]
    t0 = time.monotonic()
    for line in lines:
        view = memoryview(line)
        while view:
            view = view[os.write(1, view) :]
    return {"t0": t0, "t1": time.monotonic(), "frames": count}


async def _asyncio_stdout() -> asyncio.StreamWriter:
    """An ``asyncio.StreamWriter`` on a copy of stdout (a pipe), as an asyncio agent has."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(os.dup(1), "wb", buffering=0),
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()  # flushes what the writer still buffers
    await writer.wait_closed()


async def run_owner_asyncio(count: int, coalesce: bool) -> dict[str, Any]:
    import agent_meta

    writer = await _asyncio_stdout()
    options = agent_meta.OwnerOptions(coalesce=coalesce)
    async with agent_meta.open_asyncio_owner(writer, options) as owner:
        lifetime = owner.open_lifetime(SESSION_ID)
        t0 = time.monotonic()
        for step in range(count):
            await lifetime.publish(meta=patch(step, count))
        await owner.wait_flushed()
        t1 = time.monotonic()
        stats = owner.statistics()
    await _close(writer)
    return {"t0": t0, "t1": t1, "frames": stats.frames_written, "coalesced": stats.coalesced}


async def run_raw_asyncio(count: int) -> dict[str, Any]:
    lines = [wire_line(step, count) for step in range(count)]
    writer = await _asyncio_stdout()
    t0 = time.monotonic()
    for line in lines:
        writer.write(line)
        await writer.drain()
    t1 = time.monotonic()
    await _close(writer)
    return {"t0": t0, "t1": t1, "frames": count}


async def run_sdk(count: int) -> dict[str, Any]:
    from acp.agent.connection import AgentSideConnection
    from acp.schema import SessionInfoUpdate
    from acp.stdio import stdio_streams

    # What acp.run_agent does, minus the read loop (this agent never receives a request).
    reader, writer = await stdio_streams()
    conn = AgentSideConnection(_IdleAgent(), writer, reader, listening=False)  # type: ignore[arg-type]
    t0 = time.monotonic()
    for step in range(count):
        update = SessionInfoUpdate(
            session_update="session_info_update", field_meta=patch(step, count)
        )
        await conn.session_update(SESSION_ID, update)
    await writer.drain()
    t1 = time.monotonic()
    return {"t0": t0, "t1": t1, "frames": count}


async def run_sdk_adapter(count: int) -> dict[str, Any]:
    from acp.agent.connection import AgentSideConnection
    from acp.schema import SessionInfoUpdate
    from acp.stdio import stdio_streams

    import agent_meta
    from agent_meta.sdk import open_stream_adapter

    # This sender only sends (no receive loop), so the adapter's warning that the SDK never
    # read through it is expected here.
    logging.getLogger("agent_meta.sdk").setLevel(logging.ERROR)
    reader, _ = await stdio_streams()
    writer = await _asyncio_stdout()
    options = agent_meta.OwnerOptions(coalesce=False, protocol_version=1)
    async with open_stream_adapter(reader, writer, options) as adapter:
        adapter.owner.open_lifetime(SESSION_ID)  # as session/new would
        # On every SDK release: the message transport from 0.12, the stream seam before.
        conn = AgentSideConnection(_IdleAgent(), **adapter.connection_kwargs(), listening=False)  # type: ignore[arg-type]
        t0 = time.monotonic()
        for step in range(count):
            update = SessionInfoUpdate(
                session_update="session_info_update", field_meta=patch(step, count)
            )
            await conn.session_update(SESSION_ID, update)
        await adapter.owner.wait_flushed()
        t1 = time.monotonic()
        stats = adapter.statistics()
    await _close(writer)
    return {"t0": t0, "t1": t1, "frames": stats.owner.frames_written}


class _IdleAgent:
    """The SDK wants an agent object; this benchmark never receives a request."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("count", type=int)
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    kind: str = args.kind
    count: int = args.count
    if kind == "sdk":
        report = asyncio.run(run_sdk(count))
    elif kind == "sdk-adapter":
        report = asyncio.run(run_sdk_adapter(count))
    elif kind in ("owner-asyncio", "owner-asyncio-coalesce"):
        report = asyncio.run(run_owner_asyncio(count, kind == "owner-asyncio-coalesce"))
    elif kind == "raw-asyncio":
        report = asyncio.run(run_raw_asyncio(count))
    elif kind == "raw-os":
        report = run_raw_os(count)
    elif kind == "raw":
        report = trio.run(run_raw, count)
    else:
        report = trio.run(run_owner, count, kind == "owner-coalesce")
    with open(args.report, "w") as file:
        json.dump(report, file)


if __name__ == "__main__":
    main()
