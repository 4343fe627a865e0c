"""What the two SDK reference agents share, whichever ACP version they speak.

:class:`~agent_meta.agents.sdk_agent._agent.SdkReferenceAgent` speaks ACP v1 on the SDK's
``acp`` API, :class:`~agent_meta.agents.sdk_agent._agent_v2.SdkReferenceAgentV2` ACP v2 on
``acp.experimental.v2`` (SDK 1.0). Both are asyncio agents whose handlers run in tasks the SDK
starts, with the adapter under the SDK; they keep sessions, history, ``session/list`` pages and
``--store`` tables the same way (those of :mod:`agent_meta.agents._common`, as the trio agent
does), and stop a session's work the same way on ``session/cancel`` and ``session/close``. What
differs is the models each SDK API takes and how a turn is answered; that is in each agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import acp

from agent_meta import ErrorCode, JsonObject, JsonRpcError, LifetimeTakenOverError
from agent_meta.sdk import adapter_of

from ...core._errors import shown_id
from .._common._foreground import SessionForeground
from .._common._lifecycle import close_record, restore_record
from .._common._listing import Pager, check_cwd, list_entry, listed_info
from .._common._replay import Message, check_replayable, reply_id, reply_text
from .._common._storage import (
    HistoryStore,
    SessionRecord,
    new_session_id,
    taken_over_text,
    utc_now,
)
from ._prompts import LineContext

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Sequence
    from typing import Self

    from agent_meta import PostgresStore, SessionLifetime, SQLiteStore
    from agent_meta.sdk import SdkAdapter

__all__ = [
    "SdkAgentBase",
    "SdkSession",
    "background",
    "closed_meanwhile",
    "request_error",
    "stop_once",
    "to_the_end",
    "unknown",
]

logger = logging.getLogger("agent_meta.sdk_agent")

ClientT = TypeVar("ClientT")

CANCELS_HANDLERS: Final = "cancel_request" in getattr(acp.meta, "PROTOCOL_METHODS", {})
"""The SDK routes a client's ``$/cancel_request`` to the handler of its request, cancelling the
handler's task (1.0 on; it sends the response from another task). Before, a handler is
cancelled only when the connection ends, and its own task would send the response."""


@dataclasses.dataclass(slots=True)
class SdkSession(SessionRecord):
    # Running turns (cancelled by session/cancel) -> the SDK task answering their prompt.
    turns: dict[asyncio.Task[None], asyncio.Task[Any]] = dataclasses.field(default_factory=dict)
    # Running loads and resumes (stopped by session/close only) -> the SDK task answering them.
    restores: dict[asyncio.Task[None], asyncio.Task[Any]] = dataclasses.field(default_factory=dict)
    bursts: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    # ACP v2: the state_update of the session, from all its turns.
    foreground: SessionForeground = dataclasses.field(default_factory=SessionForeground)


async def background(work: Coroutine[Any, Any, None], name: str) -> None:
    """Run a background task of the agent; the end of the connection just ends it."""
    try:
        await work
    except ConnectionError:  # the SDK refuses to send once its connection has closed
        logger.info("%s: stopped, the connection has closed", name)
    except Exception:
        logger.exception("%s failed", name)


async def to_the_end(write: Coroutine[Any, Any, None]) -> None:
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


def stop_once(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` once: a turn that is already stopping sends its final updates (a
    ``session/cancel`` arriving meanwhile, or the close that follows it, must not cut them)."""
    if not task.cancelling():
        task.cancel()


def request_error(error: JsonRpcError) -> acp.RequestError:
    """agent_meta's JSON-RPC error as the SDK's (the pager and the checks raise the former)."""
    return acp.RequestError(error.code, error.message, error.data)


def closed_meanwhile() -> acp.RequestError:
    return acp.RequestError(ErrorCode.REQUEST_CANCELLED, "the session was closed meanwhile")


def unknown(session_id: str) -> acp.RequestError:
    return acp.RequestError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"unknown session {shown_id(session_id)}",
        {"sessionId": session_id},
    )


class SdkAgentBase(Generic[ClientT]):
    """Sessions, history, pages, replay and stopping work, for an SDK agent of either ACP
    version; ``ClientT`` is the SDK connection's type. One instance serves one connection.
    Call :meth:`aclose` once the SDK's ``run_agent`` returns, to stop the background tasks."""

    PROTOCOL_VERSION = 1
    """The ACP version the agent speaks (its updates' shapes follow it)."""

    def __init__(
        self,
        adapter: SdkAdapter | None,
        history: HistoryStore | None = None,
        *,
        list_page_size: int = 50,
    ) -> None:
        # None: a connection of the SDK's HTTP / WebSocket server, whose adapter is looked up
        # from the connection at initialize (the first request: the adapter refuses others).
        self._adapter_or_none = adapter
        self._client: ClientT | None = None
        self._sessions: dict[str, SdkSession] = {}
        self._history = history
        self._pager = Pager(list_page_size)
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    async def with_store(
        cls, adapter: SdkAdapter, store: SQLiteStore | PostgresStore, *, list_page_size: int = 50
    ) -> Self:
        """An agent whose sessions and history live in ``store``'s file or database
        (``--store``); open
        the adapter on the same store so that a fresh process also gets its lifetimes back."""
        history = HistoryStore(store)
        agent = cls(adapter, history, list_page_size=list_page_size)
        for session in await history.load_sessions(SdkSession):
            agent._sessions[session.session_id] = session
        return agent

    @property
    def _adapter(self) -> SdkAdapter:
        adapter = self._adapter_or_none
        if adapter is None:
            raise RuntimeError("the agent's adapter is found at initialize")
        return adapter

    async def _find_adapter(self) -> None:
        """Look the adapter up from the connection, for an agent made without one."""
        if self._adapter_or_none is None:
            self._adapter_or_none = await adapter_of(self.client)

    def on_connect(self, conn: ClientT) -> None:
        """The SDK hands over its connection to the client."""
        self._client = conn

    @property
    def client(self) -> ClientT:
        if self._client is None:
            raise RuntimeError("the SDK has not connected this agent yet")
        return self._client

    async def aclose(self) -> None:
        """Cancel the background tasks (turns, bursts, command lists) and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(background(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- what each ACP version says its own way ---------------------------------------------

    def _info_update(self, **fields: Any) -> Any:
        """The SDK's ``SessionInfoUpdate`` with these fields (``field_meta``, ``title``)."""
        raise NotImplementedError

    def _replayed(self, update: JsonObject) -> Any:
        """A replay update of :func:`replay_updates` as the SDK's model."""
        raise NotImplementedError

    async def _advertise(self, session_id: str) -> None:
        """Send the command list of a new session, after its ``session/new`` response."""
        raise NotImplementedError

    async def _restored(self, session: SdkSession) -> None:
        """What a load or resume sends after any replay, before the adapter's resync."""

    # -- storage -----------------------------------------------------------------------------

    async def _save_session(self, session: SdkSession, *, held: bool = False) -> None:
        """Store the session's row; ``held``: only while this connection holds the session's
        lifetime (:class:`~agent_meta.LifetimeTakenOverError` otherwise, nothing stored)."""
        if self._history is not None:
            await self._history.save(session, holder=self._holder(held))

    def _holder(self, held: bool) -> str | None:
        return self._adapter.owner.holder if held else None

    async def _add_message(self, session: SdkSession, message: Message) -> None:
        """Insert ``message`` into the history as one step: stored first, then kept in memory,
        only while this connection holds the session's lifetime (a former holder's messages
        must not reach the history the new holder replays).

        Once the store write has begun a cancellation waits for it, so the message ends up in
        both places or (the write failed, and that raises) in neither, as in the trio agent.
        """
        if self._history is not None:
            write = self._history.add_message(
                session.session_id,
                message.role,
                message.message_id,
                message.text,
                holder=self._holder(True),
            )
            await to_the_end(write)
        session.history.append(message)

    async def _insert_user_message(self, session: SdkSession, text: str) -> str:
        """Store the user message of a turn; return its id. Refused (``-32002``,
        nothing stored) when another connection has taken the session over."""
        message_id = session.next_id("user")
        session.updated_at = utc_now()
        # The id counter is stored before the message (a cancellation between them leaves a
        # gap in the ids, never an id a restarted agent would hand out again).
        try:
            await self._save_session(session, held=True)
            await self._add_message(session, Message("user", message_id, text))
        except LifetimeTakenOverError:
            sid = session.session_id
            raise acp.RequestError(
                ErrorCode.RESOURCE_NOT_FOUND, taken_over_text(sid), {"sessionId": sid}
            ) from None
        return message_id

    async def _store_reply(self, session: SdkSession, user_id: str, replies: list[str]) -> None:
        """Keep the agent's reply to a turn as the client saw it live (its message id, and
        one chunk per line); not when the session was taken over during the turn (the new
        holder's client never saw it)."""
        if replies:
            user = Message("user", user_id, "")
            reply = Message("agent", reply_id(user), reply_text(replies))
            with contextlib.suppress(LifetimeTakenOverError):
                await self._add_message(session, reply)

    # -- sessions ----------------------------------------------------------------------------

    async def _create_session(self, cwd: str) -> str:
        """A new session; the adapter opens its lifetime as the response goes out."""
        try:
            check_cwd(cwd)
        except JsonRpcError as exc:
            raise request_error(exc) from None
        session_id = new_session_id()
        session = SdkSession(session_id=session_id, cwd=cwd, updated_at=utc_now())
        await self._save_session(session)
        self._sessions[session_id] = session
        # The command list follows the response, as clients expect (they learn the session id
        # from it): _advertise waits until the adapter has queued the response.
        self._spawn(self._advertise(session_id), name=f"commands of {session_id}")
        return session_id

    async def _list_page(self, cwd: str | None, cursor: str | None) -> JsonObject:
        """One ``session/list`` page, as JSON (each agent validates it with its SDK's model).
        With a store, the sessions other connections and processes stored are listed too."""
        try:
            start = self._pager.start(cursor, cwd)
        except JsonRpcError as exc:
            raise request_error(exc) from None
        if self._history is not None:
            for stored in await self._history.load_sessions(SdkSession):
                self._sessions.setdefault(stored.session_id, stored)
        entries = [
            await self._entry(session)
            for session in list(self._sessions.values())
            if cwd is None or session.cwd == cwd
        ]
        return self._pager.page(entries, start, cwd, self._adapter.owner.max_frame_bytes)

    async def _entry(self, session: SdkSession) -> JsonObject:
        info = await self._info(session)
        max_bytes = self._adapter.owner.max_frame_bytes
        return list_entry(session.session_id, session.cwd, session.updated_at, info, max_bytes)

    async def _info(self, session: SdkSession) -> JsonObject:
        return await listed_info(self._adapter.owner, session.session_id, session.last_info)

    async def _taken_session(self, session_id: str) -> SdkSession:
        """The session a load or resume takes over, as the store holds it now: another
        process on the same file may have created it, or added messages since."""
        if self._history is not None:
            session = self._sessions.get(session_id) or SdkSession(session_id, "", "")
            if await asyncio.shield(self._history.refresh(session)):
                self._sessions.setdefault(session_id, session)
        return self._session(session_id)

    def _session(self, session_id: str) -> SdkSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise unknown(session_id)
        return session

    def _open_lifetime(self, session_id: str) -> SessionLifetime:
        """The lifetime of a session a prompt is for; a closed one must be resumed first."""
        if not self._adapter.owner.has_lifetime(session_id):
            raise acp.RequestError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"session {shown_id(session_id)} is not open here (closed, or taken over by "
                "another connection): resume it first",
                {"sessionId": session_id},
            )
        return self._adapter.lifetime(session_id)

    def _prompt_text(self, session_id: str, prompt: Sequence[Any]) -> tuple[list[JsonObject], str]:
        """The prompt's blocks as the client sent them, and its text; refuses (``-32602``) a
        prompt whose message could not be sent back in one frame (echo and replay)."""
        blocks: list[JsonObject] = [
            # As the client sent them: a field it set to null stays null, one it left out stays out.
            block.model_dump(mode="json", by_alias=True, exclude_unset=True)
            for block in prompt
        ]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        v2 = self.PROTOCOL_VERSION >= 2
        try:
            check_replayable(session_id, text, blocks, v2, self._adapter.owner.max_frame_bytes)
        except JsonRpcError as exc:
            raise request_error(exc) from None
        return blocks, text

    # -- loads and resumes -------------------------------------------------------------------

    async def _stoppable(
        self,
        registry: dict[asyncio.Task[None], asyncio.Task[Any]],
        work: Coroutine[Any, Any, None],
        *,
        keep: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Run a request's ``work`` in a task of its own, listed in ``registry`` while it runs,
        so that ``session/cancel`` or ``session/close`` can stop it while this handler still
        answers the request (cancelling the SDK's task would leave it unanswered). Returns
        whether it ran to its end (``False``: it was stopped); raises what it raised.

        If this handler is cancelled itself, the work is stopped and waited for. Then, where
        that can be a client's ``$/cancel_request`` (:data:`CANCELS_HANDLERS`), the request is
        answered as stopped if ``keep()`` (a prompt whose message was inserted: ACP says it
        must not be answered with an error); otherwise the cancellation goes on (``-32800``,
        or the end of the connection)."""
        handler = asyncio.current_task()
        assert handler is not None
        running = asyncio.create_task(work)
        registry[running] = handler
        try:
            try:
                await asyncio.wait({running})
            except asyncio.CancelledError:
                running.cancel()
                await asyncio.wait({running})
                if not (CANCELS_HANDLERS and keep()):
                    raise
                handler.uncancel()
        finally:
            registry.pop(running, None)
        if running.cancelled():
            return False
        running.result()  # an owner that stopped ends the request with an error
        return True

    async def _restore(self, session: SdkSession, *, replay: bool) -> None:
        sid = session.session_id

        async def send(update: JsonObject) -> None:
            await self._send(sid, self._replayed(update))

        await restore_record(
            session,
            self._adapter.lifetime(sid),  # open since the request arrived
            replay=replay,
            v2=self.PROTOCOL_VERSION >= 2,
            max_frame_bytes=self._adapter.owner.max_frame_bytes,
            save=lambda: to_the_end(self._save_session(session)),
            send=send,
        )
        await self._restored(session)

    async def _send(self, session_id: str, update: Any, **notification_meta: str) -> None:
        """``session/update`` through the SDK."""
        client: Any = self.client
        await client.session_update(session_id, update, **notification_meta)

    # -- close / cancel ----------------------------------------------------------------------

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
        await close_record(
            session, self._adapter.owner, lambda: self._save_session(session, held=True)
        )

    async def _stop_work(self, session: SdkSession) -> None:
        """Cancel the session's turns, loads, resumes and bursts; wait until each of them has
        ended and each request has been answered."""
        answering = [*session.turns.values(), *session.restores.values()]
        stopping: list[asyncio.Task[Any]] = [*session.turns, *session.restores, *session.bursts]
        for task in stopping:
            stop_once(task)
        await asyncio.gather(*stopping, return_exceptions=True)
        current = asyncio.current_task()
        if waiting := [task for task in answering if task is not current]:
            await asyncio.wait(waiting)

    def _cancel_turns(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            for turn in session.turns:
                stop_once(turn)

    # -- prompt lines ------------------------------------------------------------------------

    def _line_context(
        self,
        session: SdkSession,
        lifetime: SessionLifetime,
        ask: Callable[[str], Awaitable[str]],
    ) -> LineContext:
        return LineContext(
            send=self._send,
            lifetime=lifetime,
            info_update=self._info_update,
            clears_through_sdk=self.PROTOCOL_VERSION >= 2,
            start_burst=lambda key, count: self._start_burst(session, lifetime, key, count),
            ask=ask,
        )

    def _start_burst(
        self, session: SdkSession, lifetime: SessionLifetime, key: str, count: int
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
            await self._send(sid, self._info_update(field_meta={key: value}))
            await asyncio.sleep(0)
