"""The reference agent's behaviour on the official ACP Python SDK (protocol v1).

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
reference agent's, so either runtime can resume the other's file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
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
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionResumeCapabilities,
    UserMessageChunk,
)

from agent_meta import (
    JsonObject,
    JsonRpcError,
    __version__,
)
from agent_meta.wire import (
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
)

from .._common._commands import COMMANDS
from .._common._listing import Pager, check_cwd, list_entry, listed_info
from .._common._replay import (
    Message,
    check_replayable,
    replay_updates,
    reply_id,
    reply_text,
)
from .._common._storage import HistoryStore, SessionRecord, new_session_id, utc_now
from ..reference_agent import AGENT_NAME
from ._lines import LineContext, run_line

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from agent_meta import SessionLifetime, SQLiteStore
    from agent_meta.sdk import SdkAdapter

__all__ = ["AGENT_TITLE", "SdkReferenceAgent"]

AGENT_TITLE = "agent_meta reference agent (official Python SDK)"

logger = logging.getLogger("agent_meta.sdk_agent")


@dataclasses.dataclass(slots=True)
class _Session(SessionRecord):
    # Running turns (cancelled by session/cancel) -> the SDK task answering their prompt.
    turns: dict[asyncio.Task[None], asyncio.Task[Any]] = dataclasses.field(default_factory=dict)
    # Running loads and resumes (stopped by session/close only) -> the SDK task answering them.
    restores: dict[asyncio.Task[None], asyncio.Task[Any]] = dataclasses.field(default_factory=dict)
    bursts: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(slots=True)
class _Turn:
    user_id: str | None = None
    replies: list[str] = dataclasses.field(default_factory=list)


async def _background(work: Coroutine[Any, Any, None], name: str) -> None:
    """Run a background task of the agent; the end of the connection just ends it."""
    try:
        await work
    except ConnectionError:  # the SDK refuses to send once its connection has closed
        logger.info("%s: stopped, the connection has closed", name)
    except Exception:
        logger.exception("%s failed", name)


async def _to_the_end(write: Coroutine[Any, Any, None]) -> None:
    """Run a store write to its end even if this task is cancelled meanwhile, as a trio
    shielded scope would: the cancellation is then requested again, so it arrives at the
    task's next suspension, after the caller has recorded what the write did."""
    task = asyncio.ensure_future(write)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
    task.result()  # the write's own error, if it failed


def _request_error(error: JsonRpcError) -> acp.RequestError:
    """agent_meta's JSON-RPC error as the SDK's (the pager raises the former)."""
    return acp.RequestError(error.code, error.message, error.data)


def _closed_meanwhile() -> acp.RequestError:
    return acp.RequestError(REQUEST_CANCELLED, "the session was closed meanwhile")


def _unknown(session_id: str) -> acp.RequestError:
    return acp.RequestError(
        RESOURCE_NOT_FOUND, f"unknown session {session_id!r}", {"sessionId": session_id}
    )


def _agent_text(text: str) -> AgentMessageChunk:
    """An agent message chunk of text (built from the schema: the SDK's helper for it is gone
    in 1.0)."""
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return AgentMessageChunk.model_validate(chunk)


def _replayed(update: JsonObject) -> UserMessageChunk | AgentMessageChunk:
    """A v1 replay update of the trio agent's :mod:`_replay`, as the SDK's model."""
    if update["sessionUpdate"] == "user_message_chunk":
        return UserMessageChunk.model_validate(update)
    return AgentMessageChunk.model_validate(update)


class SdkReferenceAgent:
    """The ``agent-meta agent --runtime sdk`` agent: one instance serves one connection.

    ``adapter`` is the one put under ``acp.run_agent(..., **adapter.connection_kwargs(),
    use_unstable_protocol=True)`` (``session/resume`` and ``session/close`` are unstable
    routes in the SDK 0.12). Call :meth:`aclose` once ``run_agent`` returns, to stop the
    background bursts.
    """

    def __init__(
        self, adapter: SdkAdapter, history: HistoryStore | None = None, *, list_page_size: int = 50
    ) -> None:
        self._adapter = adapter
        self._client: acp.Client | None = None
        self._sessions: dict[str, _Session] = {}
        self._tool_calls = itertools.count(1)
        self._history = history
        self._pager = Pager(list_page_size)
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    async def with_store(
        cls, adapter: SdkAdapter, store: SQLiteStore, *, list_page_size: int = 50
    ) -> SdkReferenceAgent:
        """An agent whose sessions and history live in ``store``'s file (``--store``); open
        the adapter on the same store so that a fresh process also gets its lifetimes back."""
        history = HistoryStore(store)
        agent = cls(adapter, history, list_page_size=list_page_size)
        for session in await history.load_sessions(_Session):
            agent._sessions[session.session_id] = session
        return agent

    def on_connect(self, conn: acp.Client) -> None:
        """The SDK hands over its connection to the client."""
        self._client = conn

    @property
    def client(self) -> acp.Client:
        if self._client is None:
            raise RuntimeError("the SDK has not connected this agent yet")
        return self._client

    async def aclose(self) -> None:
        """Cancel the background tasks (bursts, command lists) and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(_background(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ----------------------------------------------------------------------- storage

    async def _save_session(self, session: _Session) -> None:
        if self._history is not None:
            await self._history.save(session)

    async def _add_message(self, session: _Session, message: Message) -> None:
        """Insert ``message`` into the history as one step: stored first, then kept in memory.

        Once the store write has begun a cancellation waits for it, so the message ends up in
        both places or (the write failed, and that raises) in neither, as in the trio agent.
        """
        if self._history is not None:
            write = self._history.add_message(
                session.session_id, message.role, message.message_id, message.text
            )
            await _to_the_end(write)
        session.history.append(message)

    # ----------------------------------------------------------------------- setup

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        """v1 whatever the client asks: the SDK 0.12 speaks nothing else."""
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
        try:
            check_cwd(cwd)
        except JsonRpcError as exc:
            raise _request_error(exc) from None
        session_id = new_session_id()
        session = _Session(session_id=session_id, cwd=cwd, updated_at=utc_now())
        await self._save_session(session)
        self._sessions[session_id] = session
        # The command list follows the response, as clients expect (they learn the session id
        # from it): _advertise waits until the adapter has queued the response.
        self._spawn(self._advertise(session_id), name=f"commands of {session_id}")
        return NewSessionResponse(session_id=session_id)

    async def _advertise(self, session_id: str) -> None:
        await self._adapter.wait_opened(session_id)
        commands = [
            {"name": name, "description": description, "input": {"hint": hint}}
            for name, description, hint in COMMANDS
        ]
        update = AvailableCommandsUpdate.model_validate(
            {"sessionUpdate": "available_commands_update", "availableCommands": commands}
        )
        await self.client.session_update(session_id, update)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        try:
            start = self._pager.start(cursor, cwd)
        except JsonRpcError as exc:
            raise _request_error(exc) from None
        entries = [
            await self._entry(session)
            for session in list(self._sessions.values())
            if cwd is None or session.cwd == cwd
        ]
        max_bytes = self._adapter.owner.max_frame_bytes
        return ListSessionsResponse.model_validate(self._pager.page(entries, start, cwd, max_bytes))

    async def _entry(self, session: _Session) -> JsonObject:
        info = await listed_info(self._adapter.owner, session.session_id, session.last_info)
        max_bytes = self._adapter.owner.max_frame_bytes
        return list_entry(session.session_id, session.cwd, session.updated_at, info, max_bytes)

    # ----------------------------------------------------------------------- resume / load

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        """Replay the conversation; the adapter resyncs after it, before the response."""
        session = await self._taken_session(session_id)
        if not await self._stoppable(session.restores, self._restore(session, replay=True)):
            raise _closed_meanwhile()
        return LoadSessionResponse()

    async def resume_session(
        self, session_id: str, cwd: str, **kwargs: Any
    ) -> ResumeSessionResponse:
        """v1 resume: no replay; the adapter resyncs before the response."""
        session = await self._taken_session(session_id)
        if not await self._stoppable(session.restores, self._restore(session, replay=False)):
            raise _closed_meanwhile()
        return ResumeSessionResponse()

    async def _stoppable(
        self, registry: dict[asyncio.Task[None], asyncio.Task[Any]], work: Coroutine[Any, Any, None]
    ) -> bool:
        """Run a request's ``work`` in a task of its own, listed in ``registry`` while it runs,
        so that ``session/cancel`` or ``session/close`` can stop it while this handler still
        answers the request (cancelling the SDK's task would leave it unanswered). Returns
        whether it ran to its end (``False``: it was stopped); raises what it raised."""
        handler = asyncio.current_task()
        assert handler is not None
        running = asyncio.create_task(work)
        registry[running] = handler
        try:
            await asyncio.wait({running})
        except asyncio.CancelledError:
            running.cancel()
            raise
        finally:
            registry.pop(running, None)
        if running.cancelled():
            return False
        running.result()  # an owner that stopped ends the request with an error
        return True

    async def _restore(self, session: _Session, *, replay: bool) -> None:
        sid = session.session_id
        # Open since the request arrived: kept (R5), restored from the store, or fresh.
        lifetime = self._adapter.lifetime(sid)
        if session.closed:
            # A fresh lifetime of a closed session: its title went with the old one, and the
            # client must hear so: the resync the adapter sends before the response says it.
            session.closed = False
            lifetime.seed(title=None)
            await _to_the_end(self._save_session(session))  # the store must agree
        if replay:
            max_bytes = self._adapter.owner.max_frame_bytes
            for message in list(session.history):
                for update in replay_updates(message, False, sid, max_bytes):
                    await self.client.session_update(sid, _replayed(update))

    # ----------------------------------------------------------------------- close / cancel

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's work, keep what ``session/list`` shows of it; the adapter ends
        the lifetime before this response. Closing an unknown session succeeds."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        # Until none is left: a prompt or load that arrived behind this close is stopped too.
        while session.turns or session.restores or session.bursts:
            await self._stop_work(session)
        if not self._adapter.owner.has_lifetime(session_id):
            return
        owner = self._adapter.owner
        session.last_info = await listed_info(owner, session.session_id, session.last_info)
        session.closed = True  # kept in the store too: a restarted agent reopens it alike
        await self._save_session(session)

    async def _stop_work(self, session: _Session) -> None:
        """Cancel the session's turns, loads, resumes and bursts; wait until each request has
        been answered."""
        answering = [*session.turns.values(), *session.restores.values()]
        stopping: list[asyncio.Task[Any]] = [*session.turns, *session.restores, *session.bursts]
        for task in stopping:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        current = asyncio.current_task()
        if waiting := [task for task in answering if task is not current]:
            await asyncio.wait(waiting)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            for turn in session.turns:
                turn.cancel()

    async def _taken_session(self, session_id: str) -> _Session:
        """The session a load or resume takes over, as the store holds it now: another
        process on the same file may have created it, or added messages since."""
        if self._history is not None:
            session = self._sessions.get(session_id) or _Session(session_id, "", "")
            if await asyncio.shield(self._history.refresh(session)):
                self._sessions.setdefault(session_id, session)
        return self._session(session_id)

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise _unknown(session_id)
        return session

    # ----------------------------------------------------------------------- prompt

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """One v1 turn, answered with its stop reason. A cancellation before the user message
        is stored answers ``-32800``; after it, the turn ends with ``cancelled``."""
        session = self._session(session_id)
        if not self._adapter.owner.has_lifetime(session_id):
            raise acp.RequestError(
                RESOURCE_NOT_FOUND,
                f"session {session_id!r} is closed: resume it first",
                {"sessionId": session_id},
            )
        lifetime = self._adapter.lifetime(session_id)
        blocks: list[JsonObject] = [
            # As the client sent them: a field it set to null stays null, one it left out stays out.
            block.model_dump(mode="json", by_alias=True, exclude_unset=True)
            for block in prompt
        ]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        max_bytes = self._adapter.owner.max_frame_bytes
        try:
            check_replayable(session_id, text, blocks, False, max_bytes)
        except JsonRpcError as exc:
            raise _request_error(exc) from None
        turn = _Turn()
        ended = await self._stoppable(session.turns, self._turn(session, lifetime, text, turn))
        if turn.user_id is None:
            raise acp.RequestError(REQUEST_CANCELLED, "the prompt was cancelled before it started")
        if turn.replies:  # as the client saw it live: one chunk per line
            user = Message("user", turn.user_id, text)
            reply = Message("agent", reply_id(user), reply_text(turn.replies))
            await self._add_message(session, reply)
        return PromptResponse(stop_reason="end_turn" if ended else "cancelled")

    async def _turn(
        self, session: _Session, lifetime: SessionLifetime, text: str, turn: _Turn
    ) -> None:
        sid = session.session_id
        message_id = session.next_id("user")
        session.updated_at = utc_now()
        # The id counter is stored before the message (a cancellation between them leaves a
        # gap in the ids, never an id a restarted agent would hand out again).
        await self._save_session(session)
        await self._add_message(session, Message("user", message_id, text))
        turn.user_id = message_id
        context = LineContext(
            client=self.client,
            lifetime=lifetime,
            start_burst=lambda key, count: self._start_burst(session, lifetime, key, count),
            next_tool_call_id=lambda: f"ask-{next(self._tool_calls)}",
        )
        for line in text.splitlines():
            if not line.strip():
                continue
            reply = await run_line(context, line)
            await self.client.session_update(sid, _agent_text(reply + "\n"))
            turn.replies.append(reply)  # sent: stored as part of the reply

    # ----------------------------------------------------------------------- /burst

    def _start_burst(
        self, session: _Session, lifetime: SessionLifetime, key: str, count: int
    ) -> str:
        task = self._spawn(self._burst(lifetime, key, count), name=f"burst {key} x{count}")
        session.bursts.add(task)
        task.add_done_callback(session.bursts.discard)
        return f"ok: burst of {count} publications of {key} started"

    async def _burst(self, lifetime: SessionLifetime, key: str, count: int) -> None:
        """``{key: 1}`` .. ``{key: count}`` through the SDK, as fast as it goes, until the
        lifetime ends (checked on the handle: the SDK call cannot tell). Each publication
        yields to the loop, so the burst races the client's next requests."""
        sid = lifetime.session_id
        for value in range(1, count + 1):
            if lifetime.closed:
                return
            update = SessionInfoUpdate(
                session_update="session_info_update", field_meta={key: value}
            )
            await self.client.session_update(sid, update)
            await asyncio.sleep(0)
