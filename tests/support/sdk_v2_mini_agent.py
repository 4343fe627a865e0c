"""A small ACP v2 agent on the official SDK 1.0 (``acp.experimental.v2``), for the adapter's tests.

It is written as a v2 SDK agent is: everything through ``conn.session_update``, where an
explicit ``None`` reaches the wire (``SessionInfoUpdate(field_meta=None)`` clears). Prompts are
commands (see :class:`V2Agent`). Run it as ``python -m tests.support.sdk_v2_mini_agent plain``
(``acp.experimental.v2.run_agent``, no agent_meta: for ``agent-meta run``) or ``... router``
(``AgentProtocolRouter`` with the v1 :class:`~tests.support.sdk_mini_agent.MiniAgent` beside it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp.experimental import v2
from acp.experimental.negotiation import AgentProtocolRouter
from acp.experimental.v2 import schema as s

from agent_meta.sdk import SdkAdapter, adapter_of
from tests.support.sdk_mini_agent import MiniAgent

__all__ = ["V2Agent"]


class V2Agent:
    """Prompts are commands: ``meta JSON`` (a ``_meta`` patch; ``null`` clears), ``title T``,
    ``untitle`` (``title: null``), ``late`` (a task publishes a title once some session's
    ``go`` prompt comes), anything else is echoed. ``resume_session`` replays the ``meta``
    prompts when asked to; without replay it publishes ``{"resumed": n}``, live."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.adapter: SdkAdapter | None = None
        self.prompts: dict[str, list[str]] = {}
        self.resumes = 0
        self.go = asyncio.Event()
        self.late: asyncio.Task[None] | None = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, info: Any, **_: Any) -> Any:
        try:
            self.adapter = await adapter_of(self.conn)
        except KeyError:  # served without agent_meta
            self.adapter = None
        return s.InitializeResponse(
            protocol_version=2,
            info=s.Implementation(name="v2-mini", version="0"),
            capabilities=s.AgentCapabilities(session=s.SessionCapabilities()),
        )

    async def new_session(self, cwd: str, **_: Any) -> Any:
        session_id = f"s{len(self.prompts) + 1}"
        self.prompts[session_id] = []
        return s.NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> Any:
        text = prompt[0].text
        self.prompts[session_id].append(text)
        word, _, rest = text.partition(" ")
        if word == "meta":
            await self.conn.session_update(
                session_id, s.SessionInfoUpdate(field_meta=json.loads(rest))
            )
        elif word == "title":
            await self.conn.session_update(session_id, s.SessionInfoUpdate(title=rest))
        elif word == "untitle":
            await self.conn.session_update(session_id, s.SessionInfoUpdate(title=None))
        elif word == "late":
            self.late = asyncio.create_task(self._later(session_id))
        elif word == "go":
            self.go.set()
        # The turn ends here, before its answer (ACP v2 lets idle come first): a turn left
        # running would hold the end of the input until the drain timeout.
        await self.conn.session_update(session_id, s.IdleSessionStateUpdate(stop_reason="end_turn"))
        return s.PromptResponse(message_id=f"user-{len(self.prompts[session_id])}")

    async def _later(self, session_id: str) -> None:
        await self.go.wait()
        await self.conn.session_update(session_id, s.SessionInfoUpdate(title="too late"))

    async def resume_session(
        self, session_id: str, cwd: str, replay_from: Any = None, **_: Any
    ) -> Any:
        self.resumes += 1
        if replay_from is not None:
            for text in self.prompts.get(session_id, []):
                if text.startswith("meta "):
                    patch = json.loads(text[5:])
                    await self.conn.session_update(
                        session_id, s.SessionInfoUpdate(field_meta=patch)
                    )
        else:
            live = s.SessionInfoUpdate(field_meta={"resumed": self.resumes})
            await self.conn.session_update(session_id, live)
        await self.conn.session_update(session_id, s.IdleSessionStateUpdate())
        return s.ResumeSessionResponse()

    async def close_session(self, session_id: str, **_: Any) -> None:
        return None

    async def list_sessions(self, **_: Any) -> Any:
        return s.ListSessionsResponse(sessions=[])


async def _serve_plain() -> None:
    await v2.run_agent(V2Agent())


async def _serve_router() -> None:
    await AgentProtocolRouter(v1=MiniAgent, v2=lambda _conn: V2Agent()).run()


if __name__ == "__main__":
    if sys.argv[1:] == ["plain"]:
        asyncio.run(_serve_plain())
    elif sys.argv[1:] == ["router"]:
        asyncio.run(_serve_router())
    else:
        sys.exit("usage: python -m tests.support.sdk_v2_mini_agent plain|router")
