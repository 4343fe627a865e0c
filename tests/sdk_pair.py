"""A real official-SDK agent behind the adapter, and a raw NDJSON client, over OS pipes.

The agent side is exactly what an SDK agent runs: ``acp.run_agent(agent,
**adapter.connection_kwargs(), use_unstable_protocol=True)`` with the adapter of
:func:`agent_meta.sdk.open_stream_adapter` over asyncio pipe streams. The client side writes
lines and reads every line the agent writes, so tests see the wire itself. Both run on one
asyncio loop in the test process; :func:`run` bounds every scenario (a hang guard only).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

import acp

from agent_meta.sdk import SdkAdapter, open_stream_adapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine

    from agent_meta import OwnerOptions
    from agent_meta.stores._store import LifetimeStore

GUARD = 30.0
"""Seconds a scenario may take; reached only when something hangs."""

Message = dict[str, Any]


async def pipe_reader(fd: int, opened: list[asyncio.BaseTransport]) -> asyncio.StreamReader:
    """A reader on the read end ``fd``; its transport is added to ``opened`` (to close)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    opened.append(transport)
    return reader


async def pipe_writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), pipe
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


class RawClient:
    """Writes JSON-RPC lines to the agent and keeps every line the agent wrote, parsed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.lines: list[bytes] = []
        self.messages: list[Message] = []
        self.opened: list[asyncio.BaseTransport] = []
        self._next_id = 100

    async def send_line(self, line: bytes) -> None:
        self._writer.write(line + b"\n")
        await self._writer.drain()

    async def send(self, message: Message) -> None:
        await self.send_line(json.dumps({"jsonrpc": "2.0", **message}).encode())

    async def call(self, method: str, params: Message) -> Message:
        """Send a request and read until its response; answer the agent's own requests with
        ``answer`` on the way (see :meth:`read_until`)."""
        self._next_id += 1
        request_id = self._next_id
        await self.send({"id": request_id, "method": method, "params": params})
        return await self.read_until(lambda m: m.get("id") == request_id and "method" not in m)

    async def read_one(self) -> Message | None:
        line = await self._reader.readline()
        if not line:
            return None
        assert line.endswith(b"\n"), line
        self.lines.append(line)
        message: Message = json.loads(line)
        self.messages.append(message)
        return message

    async def read_until(self, done: Callable[[Message], bool]) -> Message:
        while True:
            message = await self.read_one()
            assert message is not None, "the agent's output ended"
            if done(message):
                return message

    async def close_input(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

    def info_updates(self, session_id: str) -> list[Message]:
        """The ``session_info_update`` bodies received for a session, in order."""
        found = []
        for message in self.messages:
            params = message.get("params")
            if message.get("method") != "session/update" or not isinstance(params, dict):
                continue
            update = params.get("update", {})
            if params.get("sessionId") == session_id and (
                update.get("sessionUpdate") == "session_info_update"
            ):
                found.append(update)
        return found


async def run(
    make_agent: Callable[[SdkAdapter], Any],
    scenario: Callable[[RawClient, SdkAdapter], Awaitable[None]],
    options: OwnerOptions | None = None,
    *,
    max_line_bytes: int = 1 << 20,
    store: LifetimeStore | None = None,
) -> tuple[RawClient, SdkAdapter]:
    """Run ``scenario`` against an SDK agent (built by ``make_agent``) behind an adapter; when
    it returns, close the client's output and wait for the agent to finish."""
    guard = asyncio.timeout(GUARD)
    async with guard, _pair(options, max_line_bytes, store) as (client, adapter):
        agent = make_agent(adapter)
        served = asyncio.create_task(
            acp.run_agent(agent, **adapter.connection_kwargs(), use_unstable_protocol=True)
        )
        await scenario(client, adapter)
        await client.close_input()
        await served
    assert not guard.expired(), f"the scenario did not end within {GUARD} s"  # see run_entry
    while await client.read_one() is not None:  # what the owner wrote while draining
        pass
    for transport in client.opened:
        transport.close()
    return client, adapter


@contextlib.asynccontextmanager
async def _pair(
    options: OwnerOptions | None, max_line_bytes: int, store: LifetimeStore | None = None
) -> AsyncIterator[tuple[RawClient, SdkAdapter]]:
    opened: list[asyncio.BaseTransport] = []
    to_agent_r, to_agent_w = os.pipe()
    to_client_r, to_client_w = os.pipe()
    agent_reader = await pipe_reader(to_agent_r, opened)
    agent_writer = await pipe_writer(to_client_w)
    client = RawClient(await pipe_reader(to_client_r, opened), await pipe_writer(to_agent_w))
    try:
        async with open_stream_adapter(
            agent_reader, agent_writer, options, max_line_bytes=max_line_bytes, store=store
        ) as adapter:
            yield client, adapter
    finally:
        agent_writer.close()
        client.opened = opened  # closed once the client has read to the end (see run)


async def run_entry(
    serve: Callable[[asyncio.StreamWriter, asyncio.StreamReader], Coroutine[Any, Any, None]],
    scenario: Callable[[RawClient], Awaitable[None]],
) -> RawClient:
    """Run ``scenario`` against an agent that one of ``agent_meta.sdk``'s entry points serves
    (``serve(writer, reader)`` opens its own adapter over the agent's ends of the pipes); when
    it returns, close the client's output and wait for the agent to finish."""
    opened: list[asyncio.BaseTransport] = []
    to_agent_r, to_agent_w = os.pipe()
    to_client_r, to_client_w = os.pipe()
    agent_reader = await pipe_reader(to_agent_r, opened)
    agent_writer = await pipe_writer(to_client_w)
    client = RawClient(await pipe_reader(to_client_r, opened), await pipe_writer(to_agent_w))
    async with asyncio.timeout(GUARD) as guard:
        try:
            served = asyncio.create_task(serve(agent_writer, agent_reader))
            await scenario(client)
            await client.close_input()
            await served
        finally:
            agent_writer.close()
        while await client.read_one() is not None:
            pass
    # The SDK's connection swallows a cancellation (acp/connection.py), so the guard's can end
    # the agent as if it had returned: an expired guard is a hang all the same.
    assert not guard.expired(), f"the scenario did not end within {GUARD} s"
    for transport in opened:
        transport.close()
    return client
