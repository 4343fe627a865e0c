"""deepagents-acp, a third-party ACP agent from PyPI, embedded with agent_meta; offline.

``python deepagents_launcher.py`` serves the agent over stdio with agent_meta under it (the
glue in :func:`serve_with_agent_meta`); ``--baseline`` serves the same agent the plain SDK way,
for comparison. Nothing here changes deepagents-acp: its ``AgentServerACP`` gets a scripted
LangChain chat model (no network, no keys) and one extra tool, ``set_status``.

deepagents-acp never sends ``session_info_update`` itself, so a status in ``_meta`` needs an
author: the ``set_status`` tool, called by the scripted model, publishes ``{"status": ...}``
for the session it runs in, and ``status: null`` clears ``_meta``. With agent_meta it publishes
on the session's lifetime; in the baseline it can only use the SDK's own ``session_update``,
which drops a ``None`` ``_meta`` before it reaches the wire.

The model's script, one entry per model call (the test's prompts follow it):

1. prompt 1: ``set_status("drafting")``, then a long reply streamed word by word;
2. prompt 2: ``set_status(null)`` (the clear), then a short reply;
3. prompt 3: ``set_status("reviewing")``, then a short reply.
"""

# No ``from __future__ import annotations``: LangChain reads ``set_status``'s annotations at run
# time (``RunnableConfig`` is what marks the parameter it injects), so they stay real objects.
import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import acp
from acp.schema import SessionInfoUpdate
from deepagents import create_deep_agent  # type: ignore[import-not-found]
from deepagents_acp.server import AgentServerACP  # type: ignore[import-not-found]
from langchain_core.language_models.fake_chat_models import (  # type: ignore[import-not-found]
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, AIMessageChunk  # type: ignore[import-not-found]
from langchain_core.outputs import ChatGenerationChunk  # type: ignore[import-not-found]
from langchain_core.runnables import RunnableConfig  # type: ignore[import-not-found]
from langchain_core.tools import tool  # type: ignore[import-not-found]
from langgraph.checkpoint.memory import MemorySaver  # type: ignore[import-not-found]

if TYPE_CHECKING:
    from agent_meta.sdk import SdkAdapter

#: Words in prompt 1's streamed reply: one ``agent_message_chunk`` per word and per space.
LONG_REPLY_WORDS = 2000

#: Publishes ``_meta`` for a session: an object, or ``None`` to clear it.
Publish = Callable[[str, Mapping[str, object] | None], Awaitable[object]]


def long_reply(words: int = LONG_REPLY_WORDS) -> str:
    """Prompt 1's reply: numbered words, so a lost or doubled chunk shows."""
    return " ".join(f"w{i:05d}" for i in range(words))


def _status_call(call_id: str, status: str | None) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": "set_status", "args": {"status": status}, "id": call_id}],
    )


def script() -> Iterator[AIMessage]:
    """The model's replies, in call order (see the module docstring)."""
    yield _status_call("call-1", "drafting")
    yield AIMessage(content=long_reply())
    yield _status_call("call-2", None)
    yield AIMessage(content="Status cleared.")
    yield _status_call("call-3", "reviewing")
    yield AIMessage(content="Reviewing.")


class ScriptedModel(GenericFakeChatModel):  # type: ignore[misc]
    """LangChain's fake chat model, made to stream tool calls too.

    ``GenericFakeChatModel`` streams text word by word but drops a message's tool calls when
    streaming, and deepagents binds tools, which the fake does not implement.
    """

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    async def _astream(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        message = next(self.messages)
        if message.tool_calls:
            chunks = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(message.tool_calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(content="", tool_call_chunks=chunks, chunk_position="last")
            )
            return
        for token in re.split(r"(\s)", message.content):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))


def make_server(publish: Publish) -> Any:
    """deepagents-acp's own ACP agent, with the scripted model and the ``set_status`` tool."""

    @tool  # type: ignore[untyped-decorator]
    async def set_status(status: str | None, config: RunnableConfig) -> str:
        """Show ``status`` to the client in this session's ``_meta``; null clears ``_meta``."""
        session_id = config["configurable"]["thread_id"]  # deepagents-acp: thread = session
        await publish(session_id, None if status is None else {"status": status})
        return "published"

    model = ScriptedModel(messages=script())
    checkpointer = MemorySaver()  # one for all graphs, so that session/load finds the history

    def build(context: Any) -> Any:
        return create_deep_agent(model=model, tools=[set_status], checkpointer=checkpointer)

    return AgentServerACP(agent=build, load_sessions=True)


async def serve_with_agent_meta() -> None:
    """The embedding: the four lines between the markers are all the glue agent_meta needs.

    The ``make_server`` line hands ``set_status`` the session's lifetime, the only way to clear
    ``_meta``; an agent with nothing to publish needs three lines: the import, the ``async
    with`` and the ``run_agent`` call.
    """
    # --- agent_meta glue (4 lines) ---
    import agent_meta.sdk

    async with agent_meta.sdk.open_stdio_adapter() as meta:
        server = make_server(lambda sid, m: meta.lifetime(sid).publish(meta=m))
        await acp.run_agent(server, input_stream=meta, use_unstable_protocol=True)
    # --- end of the glue ---
    # Not glue: the test reads the adapter's counters from stderr.
    print(json.dumps({"adapter": _statistics(meta)}), file=sys.stderr)


async def serve_baseline() -> None:
    """The same agent without agent_meta: the SDK's stdio, the SDK's ``session_update``."""
    server: Any = None

    async def publish(session_id: str, meta: Mapping[str, object] | None) -> None:
        update = SessionInfoUpdate(session_update="session_info_update", field_meta=meta)
        await server._conn.session_update(session_id=session_id, update=update)

    server = make_server(publish)
    await acp.run_agent(server, use_unstable_protocol=True)


def _statistics(meta: "SdkAdapter") -> dict[str, int]:
    stats = meta.statistics()
    owner = stats.owner
    return {
        "frames_written": owner.frames_written,
        "bytes_written": owner.bytes_written,
        "publications": owner.publications,
        "coalesced": owner.coalesced,
        "resyncs": owner.resyncs,
        "peak_queued_frames": owner.peak_queued_frames,
        "absorbed_updates": stats.absorbed_updates,
        "passed_through_updates": stats.passed_through_updates,
    }


if __name__ == "__main__":
    asyncio.run(serve_baseline() if "--baseline" in sys.argv[1:] else serve_with_agent_meta())
