"""A small agent on the official Python SDK, with agent_meta's adapter under it.

It is written the way SDK agents are: everything through ``conn`` (``session_update``,
``request_permission``), plus the adapter's lifetime handle where the SDK cannot express a
change. Prompts are commands:

- ``meta K V``: ``session_update`` with ``_meta: {K: V}`` (V is JSON);
- ``title T``: ``session_update`` with ``title``;
- ``clear``: ``adapter.lifetime(sid).publish(meta=None)`` (the SDK drops ``field_meta=None``);
- ``ask``: ``session/request_permission``; the chosen option is echoed as a chunk;
- ``many N``: N concurrent ``session_update``s (``asyncio.gather``);
- anything else: echoed as an agent message chunk (kept for replay).

``session/load`` replays the session's history. Run it as ``python -m
tests.support.sdk_mini_agent stdio``, or ``... plain`` (no agent_meta: for ``agent-meta run``),
or ``... asgi`` to serve streamable HTTP and WebSocket on 127.0.0.1 (the port it got is the
first line it prints). Two more start it without agent_meta on streams of its own:
``own-stdio``, as gptme-acp 0.35.1 does (duplicates of fd 0 and fd 1, fd 1 then pointed at
stderr), and ``own-pipes`` (a pipe pair that is not its stdio, which ``agent-meta run``
refuses).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from typing import TYPE_CHECKING, Any, cast

import acp
from acp import schema

if TYPE_CHECKING:
    from agent_meta.sdk import SdkAdapter

# agent_meta is imported where it is used: ``plain`` stands for an agent without it, so the
# start-up bench (``bench/startup.py``) must not pay for its import there.

__all__ = ["MiniAgent", "info", "text_chunk"]


def info(**fields: Any) -> schema.SessionInfoUpdate:
    """A ``session_info_update`` built the way an SDK agent builds one."""
    return schema.SessionInfoUpdate(session_update="session_info_update", **fields)


def text_chunk(text: str) -> schema.AgentMessageChunk:
    content = schema.TextContentBlock(type="text", text=text)
    return schema.AgentMessageChunk(session_update="agent_message_chunk", content=content)


class MiniAgent:
    """See the module docstring. ``adapter`` is ``None`` under the ASGI app, where it is looked
    up from the connection (:func:`agent_meta.sdk.adapter_of`)."""

    def __init__(self, adapter: SdkAdapter | None) -> None:
        self._adapter = adapter
        self.conn: Any = None
        self.history: dict[str, list[Any]] = {}
        self.failures: list[BaseException] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def adapter(self) -> SdkAdapter:
        if self._adapter is None:
            from agent_meta.sdk import adapter_of

            self._adapter = await adapter_of(self.conn)
        return self._adapter

    async def initialize(self, protocol_version: int, **_: Any) -> schema.InitializeResponse:
        capabilities = schema.AgentCapabilities(load_session=True)
        return schema.InitializeResponse(protocol_version=1, agent_capabilities=capabilities)

    async def new_session(self, cwd: str, **_: Any) -> schema.NewSessionResponse:
        session_id = f"s{len(self.history) + 1}"
        self.history[session_id] = []
        return schema.NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> None:
        for update in self.history.get(session_id, []):
            await self.conn.session_update(session_id, update)

    async def resume_session(
        self, cwd: str, session_id: str, **_: Any
    ) -> schema.ResumeSessionResponse:
        return schema.ResumeSessionResponse()

    async def close_session(self, session_id: str, **_: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> schema.PromptResponse:
        words = prompt[0].text.split(" ", 2)
        update: Any = None
        if words[0] == "meta":
            update = info(field_meta={words[1]: json.loads(words[2])})
        elif words[0] == "title":
            update = info(title=words[1])
        elif words[0] == "clear":
            await (await self.adapter()).lifetime(session_id).publish(meta=None)
        elif words[0] == "ask":
            await self._ask(session_id)
        elif words[0] == "many":
            updates = [info(field_meta={f"k{i}": i}) for i in range(int(words[1]))]
            await asyncio.gather(*(self.conn.session_update(session_id, u) for u in updates))
        else:
            update = text_chunk(prompt[0].text)
        if update is not None:
            self.history.setdefault(session_id, []).append(update)
            await self.conn.session_update(session_id, update)
        return schema.PromptResponse(stop_reason="end_turn")

    async def _ask(self, session_id: str) -> None:
        options = [schema.PermissionOption(option_id="ok", name="OK", kind="allow_once")]
        tool_call = schema.ToolCallUpdate(tool_call_id="t1", title="ask")
        try:
            answer = await self.conn.request_permission(
                options=options, session_id=session_id, tool_call=tool_call
            )
        except Exception as exc:  # what the agent saw: tests look at it
            self.failures.append(exc)
            return
        chosen = getattr(answer.outcome, "option_id", None)
        await self.conn.session_update(session_id, text_chunk(f"{answer.outcome.outcome} {chosen}"))


async def _serve_stdio() -> None:
    from agent_meta.sdk import open_stdio_adapter

    async with open_stdio_adapter() as adapter:
        agent = cast("acp.Agent", MiniAgent(adapter))  # duck-typed, as the SDK allows
        await acp.run_agent(agent, **adapter.connection_kwargs(), use_unstable_protocol=True)


def _serve_asgi() -> None:
    import uvicorn

    from agent_meta.sdk import create_asgi_app

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # connections wait in the backlog until uvicorn accepts them
    print(listener.getsockname()[1], flush=True)
    app = create_asgi_app(lambda _conn: MiniAgent(None))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets"))
    asyncio.run(server.serve(sockets=[listener]))


async def _serve_plain() -> None:
    """The agent as any SDK agent starts, without a line of agent_meta: for ``agent-meta run``,
    which puts the adapter under it (``clear`` then finds it with ``adapter_of``)."""
    agent = cast("acp.Agent", MiniAgent(None))
    await acp.run_agent(agent, use_unstable_protocol=True)


def _capture_stdio() -> tuple[int, int]:
    """As gptme-acp 0.35.1 starts, before its loop: duplicate fd 0 and fd 1, point fd 1 at
    stderr (so that a stray print cannot reach the client); the duplicates carry the protocol."""
    stdin, stdout = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115  # as gptme does
    print("a stray print after the redirect")  # on stderr now
    return stdout, stdin


async def _serve_on(write_fd: int, read_fd: int) -> None:
    """``run_agent`` on asyncio streams over the two descriptors, without agent_meta."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    await loop.connect_read_pipe(lambda: protocol, os.fdopen(read_fd, "rb", buffering=0))
    transport, writing = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(write_fd, "wb", buffering=0),
    )
    writer = asyncio.StreamWriter(transport, writing, None, loop)
    agent = cast("acp.Agent", MiniAgent(None))
    await acp.run_agent(agent, input_stream=writer, output_stream=reader)


MODES = {"stdio": _serve_stdio, "plain": _serve_plain}


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    if mode == "asgi":
        _serve_asgi()
    elif mode == "own-stdio":
        asyncio.run(_serve_on(*_capture_stdio()))
    elif mode == "own-pipes":  # a pipe pair of its own: not this process's stdio
        to_agent, from_agent = os.pipe()
        asyncio.run(_serve_on(from_agent, to_agent))
    elif mode in MODES:
        asyncio.run(MODES[mode]())
    else:
        sys.exit(
            "usage: python -m tests.support.sdk_mini_agent stdio|plain|asgi|own-stdio|own-pipes"
        )
