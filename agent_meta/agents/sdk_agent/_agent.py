"""The reference agent's behaviour on the official ACP Python SDK, protocol v1.

:class:`SdkReferenceAgent` is an ordinary ``acp`` agent: the SDK routes each request to a
handler, and the handlers talk to the client through the SDK (``conn.session_update``,
``conn.request_permission``). The only agent_meta code in the loop is the adapter under the SDK
(``acp.run_agent(agent, **adapter.connection_kwargs())``), which owns the wire: it opens each
session's lifetime on ``session/new``, ``session/load`` and ``session/resume``, absorbs the
``session_info_update`` messages the SDK sends, resyncs before a load or resume response, and
ends the lifetime on ``session/close``. So, unlike the trio agent, these handlers never open,
resync or close a lifetime; they reach one (``adapter.lifetime(sid)``) only for what the SDK
cannot express.

Sessions, conversation history, ``session/list`` pages and the ``--store`` tables are the trio
reference agent's (:mod:`._base`), so either runtime can resume the other's file; the ACP v2
agent on the SDK 1.0 is :mod:`._agent_v2`.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any

import acp
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AvailableCommandsUpdate,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionResumeCapabilities,
    ToolCallUpdate,
    UserMessageChunk,
)

from agent_meta import ErrorCode, JsonObject, __version__

from .._common._commands import available_commands_update
from .._common._replies import ASK_OPTIONS
from ..reference_agent._agent import AGENT_NAME
from ._base import SdkAgentBase, SdkSession, closed_meanwhile
from ._prompts import permission_answer, run_line

if TYPE_CHECKING:
    from agent_meta import SessionLifetime

__all__ = ["AGENT_TITLE", "SdkReferenceAgent"]

AGENT_TITLE = "agent_meta reference agent (official Python SDK)"


@dataclasses.dataclass(slots=True)
class _Turn:
    user_id: str | None = None
    replies: list[str] = dataclasses.field(default_factory=list)


def _agent_text(text: str) -> AgentMessageChunk:
    """An agent message chunk of text (built from the schema: the SDK's helper for it is gone
    in 1.0)."""
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return AgentMessageChunk.model_validate(chunk)


class SdkReferenceAgent(SdkAgentBase[acp.Client]):
    """The ``agent-meta agent --runtime sdk`` agent for ACP v1: one instance serves one
    connection.

    ``adapter`` is the one put under ``acp.run_agent(..., **adapter.connection_kwargs(),
    use_unstable_protocol=True)`` (``session/resume`` and ``session/close`` are unstable
    routes in the SDK 0.12). Call :meth:`aclose` once ``run_agent`` returns, to stop the
    background bursts.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tool_calls = itertools.count(1)

    # ----------------------------------------------------------------------- the v1 models

    def _info_update(self, **fields: Any) -> SessionInfoUpdate:
        return SessionInfoUpdate(session_update="session_info_update", **fields)

    def _replayed(self, update: JsonObject) -> UserMessageChunk | AgentMessageChunk:
        """A v1 replay update of :func:`replay_updates` as the SDK's model."""
        if update["sessionUpdate"] == "user_message_chunk":
            return UserMessageChunk.model_validate(update)
        return AgentMessageChunk.model_validate(update)

    async def _advertise(self, session_id: str) -> None:
        await self._adapter.wait_opened(session_id)
        update = AvailableCommandsUpdate.model_validate(available_commands_update(False))
        await self.client.session_update(session_id, update)

    # ----------------------------------------------------------------------- setup

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        """v1 whatever the client asks: the SDK's v1 API speaks nothing else."""
        await self._find_adapter()
        # session/close is offered where the SDK routes it (0.9 on).
        close = (
            acp.schema.SessionCloseCapabilities() if self._adapter.release.routes_close else None
        )
        sessions = SessionCapabilities(
            resume=SessionResumeCapabilities(), close=close, list=SessionListCapabilities()
        )
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=True, session_capabilities=sessions),
            agent_info=Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=__version__),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        """A session; the adapter opens its lifetime as the response goes out."""
        return NewSessionResponse(session_id=await self._create_session(cwd))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        return ListSessionsResponse.model_validate(await self._list_page(cwd, cursor))

    # ----------------------------------------------------------------------- resume / load

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        """Replay the conversation; the adapter resyncs after it, before the response."""
        session = await self._taken_session(session_id)
        if not await self._stoppable(session.restores, self._restore(session, replay=True)):
            raise closed_meanwhile()
        return LoadSessionResponse()

    async def resume_session(
        self, session_id: str, cwd: str, **kwargs: Any
    ) -> ResumeSessionResponse:
        """v1 resume: no replay; the adapter resyncs before the response."""
        session = await self._taken_session(session_id)
        if not await self._stoppable(session.restores, self._restore(session, replay=False)):
            raise closed_meanwhile()
        return ResumeSessionResponse()

    # ----------------------------------------------------------------------- cancel

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancel_turns(session_id)

    # ----------------------------------------------------------------------- prompt

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """One v1 turn, answered with its stop reason. A cancellation before the user message
        is stored answers ``-32800``; after it, the turn ends with ``cancelled`` (a
        ``$/cancel_request`` too, on the SDK 1.0, which routes it to this handler's task)."""
        session = self._session(session_id)
        lifetime = self._open_lifetime(session_id)
        _, text = self._prompt_text(session_id, prompt)
        turn = _Turn()
        ended = await self._stoppable(
            session.turns,
            self._turn(session, lifetime, text, turn),
            keep=lambda: turn.user_id is not None,
        )
        if turn.user_id is None:
            raise acp.RequestError(
                ErrorCode.REQUEST_CANCELLED, "the prompt was cancelled before it started"
            )
        await self._store_reply(session, turn.user_id, turn.replies)
        return PromptResponse(stop_reason="end_turn" if ended else "cancelled")

    async def _turn(
        self, session: SdkSession, lifetime: SessionLifetime, text: str, turn: _Turn
    ) -> None:
        sid = session.session_id
        turn.user_id = await self._insert_user_message(session, text)
        context = self._line_context(session, lifetime, lambda question: self._ask(sid, question))
        for line in text.splitlines():
            if not line.strip():
                continue
            reply = await run_line(context, line)
            await self.client.session_update(sid, _agent_text(reply + "\n"))
            turn.replies.append(reply)  # sent: stored as part of the reply

    async def _ask(self, session_id: str, text: str) -> str:
        """``session/request_permission`` (v1: a ``toolCall``) through the SDK; the turn
        waits."""
        options = [PermissionOption.model_validate(option) for option in ASK_OPTIONS]
        tool_call_id = f"ask-{next(self._tool_calls)}"
        tool_call = ToolCallUpdate(tool_call_id=tool_call_id, title=text, kind="other")
        request = self.client.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )
        try:
            return await permission_answer(request)
        except ConnectionError:
            return "not answered: the connection closed"
