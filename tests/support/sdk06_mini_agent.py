"""A small agent on the official SDK 0.6's API generation, for the adapter's tests on 0.6.

SDK 0.6 has no ``run_agent`` and its handlers and client calls are camelCase: agents build
``AgentSideConnection(factory, writer, reader)`` on their stdio (its constructor starts reading)
and keep the loop alive themselves; the SDK's own examples, and box-agent, wait forever. Its
schema has no ``SessionInfoUpdate``, so this agent publishes through the adapter's lifetime
handle (found with :func:`agent_meta.sdk.adapter_of`). Prompts are commands:

- ``meta K V``: ``lifetime.publish(meta={K: V})`` (V is JSON);
- ``clear``: ``lifetime.publish(meta=None)``;
- ``wait``: a turn that runs until ``session/cancel`` (then ``stopReason: cancelled``);
- anything else: echoed as an agent message chunk (``conn.sessionUpdate``), kept for replay.

``session/load`` replays the session's chunks. Run it as ``python -m
tests.support.sdk06_mini_agent MODE``:

- ``own``: what 0.6 agents do, without a line of agent_meta (for ``agent-meta run``, which owns
  the connection; alone, ``meta`` and ``clear`` are answered with an error): the SDK's
  ``stdio_streams()``, the connection, then wait forever;
- ``own-pipes``: the same connection built on pipes of its own, not its stdio (``agent-meta
  run`` refuses it);
- ``one-line``: ``agent_meta.sdk.run_agent(factory)`` in place of the connection and the wait;
  returns when the client's input ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import acp
from acp import schema as _schema

schema: Any = _schema  # 0.6's schema: camelCase fields (type checkers see the installed one)

__all__ = ["Agent06"]


class Agent06:
    """See the module docstring: the agent a 0.6 connection's factory builds."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.history: dict[str, list[str]] = {}
        self.cancelled: dict[str, asyncio.Event] = {}

    async def initialize(self, params: Any) -> Any:
        capabilities = schema.AgentCapabilities(loadSession=True)
        return schema.InitializeResponse(protocolVersion=1, agentCapabilities=capabilities)

    async def newSession(self, params: Any) -> Any:  # 0.6
        session_id = f"s{len(self.history) + 1}"
        self.history[session_id] = []
        return schema.NewSessionResponse(sessionId=session_id)

    async def loadSession(self, params: Any) -> None:  # 0.6's name
        for text in self.history.get(params.sessionId, []):
            await self._say(params.sessionId, text)

    async def prompt(self, params: Any) -> Any:
        text = params.prompt[0].text
        words = text.split(" ", 2)
        if words[0] in ("meta", "clear"):
            from agent_meta.sdk import adapter_of

            lifetime = (await adapter_of(self.conn)).lifetime(params.sessionId)
            meta = None if words[0] == "clear" else {words[1]: json.loads(words[2])}
            await lifetime.publish(meta=meta)
        elif words[0] == "wait":
            await self.cancelled.setdefault(params.sessionId, asyncio.Event()).wait()
            return schema.PromptResponse(stopReason="cancelled")
        else:
            self.history.setdefault(params.sessionId, []).append(text)
            await self._say(params.sessionId, text)
        return schema.PromptResponse(stopReason="end_turn")

    async def cancel(self, params: Any) -> None:
        self.cancelled.setdefault(params.sessionId, asyncio.Event()).set()

    async def _say(self, session_id: str, text: str) -> None:
        content = schema.TextContentBlock(type="text", text=text)
        chunk = schema.AgentMessageChunk(sessionUpdate="agent_message_chunk", content=content)
        await self.conn.sessionUpdate(
            schema.SessionNotification(sessionId=session_id, update=chunk)
        )


async def _own() -> None:
    reader, writer = await acp.stdio_streams()
    acp.AgentSideConnection(Agent06, writer, reader)
    await asyncio.Event().wait()


async def _own_pipes() -> None:
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    await loop.connect_read_pipe(lambda: protocol, os.fdopen(read_fd, "rb"))
    transport, writing = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(write_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, writing, None, loop)
    acp.AgentSideConnection(Agent06, writer, reader)
    await asyncio.Event().wait()


async def _one_line() -> None:
    from agent_meta.sdk import run_agent

    await run_agent(Agent06)


if __name__ == "__main__":
    modes = {"own": _own, "own-pipes": _own_pipes, "one-line": _one_line}
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        sys.exit(f"usage: python -m tests.support.sdk06_mini_agent {'|'.join(modes)}")
    asyncio.run(modes[sys.argv[1]]())
