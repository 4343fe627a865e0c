"""The reference agent: a real ACP agent whose prompts drive the session-info owner.

It is built only on the public API (a :class:`~agent_meta.MetaOwner` reached through the
connection) and shows the intended embedding, above all in :meth:`ReferenceAgent.resume_session`:
replay history and report the foreground state (v2); the connection resyncs, then responds.
Because every frame goes through the owner's FIFO, "replay, then ``_meta: null`` and the
snapshot, then the response" holds by construction, even while a ``/burst`` is publishing.

Sessions (id, cwd, conversation, foreground state) live in this object; session-info state lives
in the owner's lifetimes. A closed session can be resumed: it gets a fresh lifetime (R5), seeded
with what the agent knows of it (no title), and keeps its history.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

import trio

from agent_meta import (
    BaseAgent,
    ErrorCode,
    JsonRpcError,
    LifetimeTakenOverError,
    RequestContext,
    __version__,
)
from agent_meta.core._jsonrpc import optional_str, require_object_list, require_str

from ...core._errors import shown_id
from .._common._commands import available_commands_update
from .._common._foreground import SessionForeground
from .._common._lifecycle import close_record, restore_record
from .._common._listing import MAX_CWD, Pager, check_cwd, list_entry, listed_info
from .._common._replay import (
    Message,
    check_replayable,
    replay_requested,
    reply_id,
    reply_text,
    user_update,
)
from .._common._storage import (
    HistoryStore,
    SessionRecord,
    new_session_id,
    taken_over_text,
    utc_now,
)
from ._prompts import run_line

if TYPE_CHECKING:
    from agent_meta import AgentConnection, JsonObject, PostgresStore, SessionLifetime, SQLiteStore

__all__ = ["AGENT_NAME", "MAX_CWD", "ReferenceAgent"]

AGENT_NAME = "agent-meta-reference"


@dataclasses.dataclass(slots=True)
class _Session(SessionRecord):
    prompts: set[trio.CancelScope] = dataclasses.field(default_factory=set)
    foreground: SessionForeground = dataclasses.field(default_factory=SessionForeground)


@dataclasses.dataclass(slots=True)
class _Turn:
    """One prompt's turn: its cancel scope and how far it got."""

    scope: trio.CancelScope
    blocks: list[JsonObject]
    foreground: _Foreground
    message: Message | None = None  # the user message, once inserted
    echoed: bool = False
    replies: list[str] = dataclasses.field(default_factory=list)  # sent to the client


class _Foreground:
    """One turn's foreground state, reported to the client as the session's (v2
    ``state_update``, see :class:`SessionForeground`)."""

    def __init__(self, ctx: RequestContext, session: _Session) -> None:
        self._ctx = ctx
        self._session = session

    async def report(self, state: str, stop_reason: str | None = None) -> None:
        session = self._session
        update = session.foreground.change(self, state, stop_reason)
        if update is None or self._ctx.protocol_version < 2:
            return
        await self._ctx.connection.session_update(session.session_id, update)


class ReferenceAgent(BaseAgent):
    """The ``agent-meta agent`` agent. One instance serves one connection.

    Prompt lines are commands (see :mod:`agent_meta.agents.reference_agent`) or are echoed. A
    command error becomes an agent message explaining it; it never fails the request.
    ``list_page_size`` bounds ``session/list`` pages.
    """

    def __init__(self, history: HistoryStore | None = None, *, list_page_size: int = 50) -> None:
        self._sessions: dict[str, _Session] = {}
        self._history = history
        self._pager = Pager(list_page_size)

    @classmethod
    async def with_store(
        cls, store: SQLiteStore | PostgresStore, *, list_page_size: int = 50
    ) -> ReferenceAgent:
        """An agent that keeps sessions and history in ``store``'s file or database
        (``--store``).

        Pass the same store to the owner (``open_owner(..., store=store)``) so that a fresh
        process resumes both the conversation and the session-info lifetimes.
        """
        history = HistoryStore(store)
        agent = cls(history, list_page_size=list_page_size)
        for session in await history.load_sessions(_Session):
            agent._sessions[session.session_id] = session
        return agent

    async def _save_session(self, session: _Session, *, holder: str | None = None) -> None:
        """Store the session's row; with ``holder`` (the connection's owner's), only while it
        holds the session's lifetime (:class:`~agent_meta.LifetimeTakenOverError` otherwise,
        nothing stored)."""
        if self._history is not None:
            await self._history.save(session, holder=holder)

    async def _add_message(self, session: _Session, message: Message, holder: str) -> None:
        """Insert ``message`` into the history as one step: stored first, then kept in memory,
        only while ``holder`` holds the session's lifetime (a former holder's messages must
        not reach the history the new holder replays).

        A cancellation before it starts inserts nothing. Once the store write has begun it is
        shielded from cancellation, so the message ends up in both places, or (the write
        failed, and that raises) in neither: an error answer to a prompt then always means that
        its message was not inserted (ACP v2, ``session/prompt``).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._history is not None:
            with trio.CancelScope(shield=True):
                await self._history.add_message(
                    session.session_id,
                    message.role,
                    message.message_id,
                    message.text,
                    holder=holder,
                )
        session.history.append(message)

    # ----------------------------------------------------------------------- setup

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        info: JsonObject = {"name": AGENT_NAME, "title": "agent_meta reference agent"}
        info["version"] = __version__
        if ctx.protocol_version >= 2:
            return {"info": info, "capabilities": {"session": {}}, "authMethods": []}
        return {
            "agentInfo": info,
            "agentCapabilities": {
                "loadSession": True,
                "sessionCapabilities": {"resume": {}, "close": {}, "list": {}},
            },
            "authMethods": [],
        }

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        cwd = require_str(params, "cwd")
        check_cwd(cwd)
        session_id = new_session_id()
        session = _Session(session_id=session_id, cwd=cwd, updated_at=utc_now())
        await self._save_session(session)
        self._sessions[session_id] = session  # its lifetime opens as the response is queued

        async def advertise() -> None:
            await ctx.connection.session_update(session_id, self._commands_update(ctx))

        ctx.after_response(advertise)
        return {"sessionId": session_id}

    def _commands_update(self, ctx: RequestContext) -> JsonObject:
        return available_commands_update(ctx.protocol_version >= 2)

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        cwd = optional_str(params, "cwd")
        start = self._pager.start(params.get("cursor"), cwd)
        entries = [
            await self._entry(ctx, session)
            for session in list(self._sessions.values())
            if cwd is None or session.cwd == cwd
        ]
        return self._pager.page(entries, start, cwd, ctx.owner.max_frame_bytes)

    async def _entry(self, ctx: RequestContext, session: _Session) -> JsonObject:
        info = await listed_info(ctx.owner, session.session_id, session.last_info)
        max_bytes = ctx.owner.max_frame_bytes
        return list_entry(session.session_id, session.cwd, session.updated_at, info, max_bytes)

    # ----------------------------------------------------------------------- resume / load

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session = await self._taken_session(params)
        require_str(params, "cwd")
        replay = replay_requested(ctx.method, params, ctx.protocol_version)
        await self._restore(ctx, session, replay=replay)
        return {}

    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        if ctx.protocol_version >= 2:
            raise JsonRpcError(
                ErrorCode.METHOD_NOT_FOUND, "session/load is not part of ACP v2: use session/resume"
            )
        session = await self._taken_session(params)
        require_str(params, "cwd")
        await self._restore(ctx, session, replay=True)
        return {}

    async def _restore(self, ctx: RequestContext, session: _Session, *, replay: bool) -> None:
        """Replay, and report the foreground state (v2). The connection has opened the
        session's lifetime (kept if open, R5; from the store if kept) and resyncs it after
        this, before the response; each step here only queues, so any ``/burst`` frame queued
        meanwhile lands either before the ``_meta: null`` (and the snapshot carries it) or
        after the snapshot."""
        sid = session.session_id

        async def save() -> None:
            with trio.CancelScope(shield=True):  # a short write; the store must agree
                await self._save_session(session)

        async def send(update: JsonObject) -> None:
            await ctx.connection.session_update(sid, update)

        await restore_record(
            session,
            ctx.owner.lifetime(sid),
            replay=replay,
            v2=ctx.protocol_version >= 2,
            max_frame_bytes=ctx.owner.max_frame_bytes,
            save=save,
            send=send,
        )
        if ctx.protocol_version >= 2:  # the foreground state, even without replay (v2 schema)
            await ctx.connection.session_update(sid, session.foreground.snapshot())

    # ----------------------------------------------------------------------- close / cancel

    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        """The connection has stopped the session's work already and ends its lifetime as the
        response is queued; this keeps what ``session/list`` shows of it. Closing a session
        that does not exist succeeds (ACP v2: it SHOULD)."""
        session = self._sessions.get(require_str(params, "sessionId"))
        if session is None or not ctx.owner.has_lifetime(session.session_id):
            return {}
        holder = ctx.owner.holder
        await close_record(session, ctx.owner, lambda: self._save_session(session, holder=holder))
        return {}

    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        session_id = params.get("sessionId")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None:
            for scope in session.prompts:
                scope.cancel()

    async def _taken_session(self, params: JsonObject) -> _Session:
        """The session a load or resume takes over, as the store holds it now: another
        process on the same file may have created it, or added messages since."""
        session_id = require_str(params, "sessionId")
        if self._history is None:
            return self._session(params)
        session = self._sessions.get(session_id) or _Session(session_id, "", "")
        with trio.CancelScope(shield=True):  # a short read; the session must be whole
            found = await self._history.refresh(session)
        if found:
            self._sessions.setdefault(session_id, session)
        return self._session(params)

    def _session(self, params: JsonObject) -> _Session:
        session_id = require_str(params, "sessionId")
        session = self._sessions.get(session_id)
        if session is None:
            raise JsonRpcError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"unknown session {shown_id(session_id)}",
                {"sessionId": session_id},
            )
        return session

    # ----------------------------------------------------------------------- prompt

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        """One turn. v2 answers as soon as the user message is inserted, then reports
        ``running``, the replies, and ``idle`` with the stop reason; v1 answers with the stop
        reason at the end. A cancellation (``session/cancel``, ``$/cancel_request``) before
        insertion answers ``-32800`` and inserts nothing; after it, the turn ends with
        ``stopReason: "cancelled"`` and the request succeeds (ACP v2: "Once it is inserted,
        the Agent MUST NOT answer with an error"; v1 keeps the same rule)."""
        session = self._session(params)
        blocks = require_object_list(params, "prompt")
        if not ctx.owner.has_lifetime(session.session_id):
            raise JsonRpcError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"session {shown_id(session.session_id)} is not open here (closed, or taken "
                "over by another connection): resume it first",
                {"sessionId": session.session_id},
            )
        lifetime = ctx.owner.lifetime(session.session_id)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        v2 = ctx.protocol_version >= 2
        check_replayable(session.session_id, text, blocks, v2, ctx.owner.max_frame_bytes)
        # Registered before the first checkpoint: a session/cancel, $/cancel_request or
        # session/close read right after this request is guaranteed to see it. Both stop the
        # turn, never the request: whether that is an error depends on the insertion.
        turn = _Turn(trio.CancelScope(), blocks, _Foreground(ctx, session))
        ctx.on_cancel_request(turn.scope.cancel)
        session.prompts.add(turn.scope)
        try:
            await self._turn(ctx, session, lifetime, turn, text)
        finally:
            session.prompts.discard(turn.scope)
        if turn.message is None:
            raise JsonRpcError(
                ErrorCode.REQUEST_CANCELLED, "the prompt was cancelled before it started"
            )
        await self._acknowledge(ctx, session, turn)  # if a cancellation cut it short
        stop_reason = "cancelled" if turn.scope.cancelled_caught else "end_turn"
        if turn.replies:  # as the client saw it live: its message id, and its chunks' text
            reply = Message("agent", reply_id(turn.message), reply_text(turn.replies))
            # Taken over during the turn: the new holder's client never saw it, so it is not kept.
            with contextlib.suppress(LifetimeTakenOverError):
                await self._add_message(session, reply, ctx.owner.holder)
        await turn.foreground.report("idle", stop_reason)
        if ctx.protocol_version >= 2:
            return {"messageId": turn.message.message_id}
        return {"stopReason": stop_reason}

    async def _turn(
        self,
        ctx: RequestContext,
        session: _Session,
        lifetime: SessionLifetime,
        turn: _Turn,
        text: str,
    ) -> None:
        """Insert the user message, acknowledge it (v2), then run its lines, until done or
        cancelled (``turn.scope``)."""
        sid = session.session_id
        foreground = turn.foreground
        with turn.scope:
            message = Message("user", session.next_id("user"), text)
            session.updated_at = utc_now()
            # The id counter is stored before the message: a cancellation between the two
            # leaves a gap in the ids, never an id a restarted agent would hand out again.
            try:
                await self._save_session(session, holder=ctx.owner.holder)
                await self._add_message(session, message, ctx.owner.holder)
            except LifetimeTakenOverError:
                raise JsonRpcError(
                    ErrorCode.RESOURCE_NOT_FOUND, taken_over_text(sid), {"sessionId": sid}
                ) from None
            turn.message = message
            await self._acknowledge(ctx, session, turn)
            await foreground.report("running")
            for line in text.splitlines():
                if not line.strip():
                    continue
                reply = await run_line(ctx, lifetime, foreground, line)
                chunk: JsonObject = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": reply + "\n"},
                }
                if ctx.protocol_version >= 2:
                    chunk["messageId"] = reply_id(message)
                await ctx.connection.session_update(sid, chunk)
                turn.replies.append(reply)

    async def _acknowledge(self, ctx: RequestContext, session: _Session, turn: _Turn) -> None:
        """v2: answer the prompt with the inserted message's id and echo the message, each
        once (a cancellation may have stopped the turn before either was queued)."""
        message = turn.message
        if ctx.protocol_version < 2 or message is None:
            return
        if not ctx.responded:
            await ctx.respond({"messageId": message.message_id})  # v2: answered once inserted
        if not turn.echoed:
            echo = user_update(message, True, turn.blocks)
            await ctx.connection.session_update(session.session_id, echo)
            turn.echoed = True
