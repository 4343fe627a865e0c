"""A test-side ACP client peer over memory streams (a helper for the connection tests).

It holds no tests.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

from agent_meta import Agent, OwnerOptions, serve_agent
from agent_meta.testing import ClientMirror

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection, Mapping

    from agent_meta.stores._store import LifetimeStore


class Peer:
    """The client end: sends lines to the agent, reads and folds every frame it writes."""

    def __init__(
        self,
        to_agent: trio.abc.SendStream,
        from_agent: trio.abc.ReceiveStream,
        mirror: ClientMirror,
    ) -> None:
        self.to_agent = to_agent
        self.from_agent = from_agent
        self.mirror = mirror
        self.frames: list[dict[str, Any]] = []
        self._buffer = b""
        self._pending: list[dict[str, Any]] = []
        self.lines: list[bytes] = []
        """Every line received, as bytes (a batch answer is one line)."""
        self._ids = 1000

    async def send_raw(self, data: bytes) -> None:
        await self.to_agent.send_all(data)

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        await self.send({"method": method, "params": params})

    async def receive(self) -> dict[str, Any] | None:
        """The next message the agent wrote (the responses of a batch answer one by one);
        ``None`` once its output has ended."""
        if self._pending:
            return self._pending.pop(0)
        while b"\n" not in self._buffer:
            chunk = await self.from_agent.receive_some()
            if not chunk:
                assert not self._buffer, f"partial frame at the end: {self._buffer!r}"
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.lines.append(line)
        messages = self.mirror.feed_line(line)
        self.frames.extend(messages)
        self._pending = list(messages[1:])
        return messages[0]

    async def until_response(self, request_id: int | str | None) -> list[dict[str, Any]]:
        """Frames up to and including the response to ``request_id`` (``None``: id null)."""
        out: list[dict[str, Any]] = []
        while True:
            frame = await self.receive()
            assert frame is not None, f"the agent's output ended before response {request_id!r}"
            out.append(frame)
            if "method" not in frame and frame.get("id") == request_id:
                return out

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its response (frames before it stay in :attr:`frames`)."""
        self._ids += 1
        request_id = self._ids
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return (await self.until_response(request_id))[-1]

    async def call(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Send a request; return the frames before its response, and its response."""
        self._ids += 1
        request_id = self._ids
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        frames = await self.until_response(request_id)
        return frames[:-1], frames[-1]


@asynccontextmanager
async def serve(
    agent: Agent,
    *,
    protocol_versions: Collection[int] = (1, 2),
    mirror_version: int = 2,
    max_line_bytes: int = 1 << 20,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
) -> AsyncIterator[Peer]:
    """Run ``serve_agent`` over memory streams; on exit send EOF and wait for it to return."""
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    peer = Peer(to_agent, from_agent, ClientMirror(protocol_version=mirror_version))
    with trio.fail_after(10):  # a hang guard, not a timing assertion
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                async with agent_out:  # the caller owns the output stream; EOF for the peer
                    await serve_agent(
                        agent,
                        agent_in,
                        agent_out,
                        protocol_versions=protocol_versions,
                        max_line_bytes=max_line_bytes,
                        options=options,
                        store=store,
                    )

            nursery.start_soon(run)
            yield peer
            await to_agent.aclose()
