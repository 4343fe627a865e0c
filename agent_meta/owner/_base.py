"""What every owner driver shares, whatever its runtime: no trio, no asyncio.

:class:`OwnerBase` is the owner: it holds the sans-IO
:class:`~agent_meta.sansio.queue._queue.SendQueue` and the handles of the open lifetimes, claims
stored lifetimes from the store, turns public calls into queue events (validating them first),
and runs the writer task: ask the queue what to do next, have its
:class:`~agent_meta.owner._writer.Writer` write or store it, wake the tasks that wait, park
when there is nothing to do (whether to wake it, or write directly instead, is
:class:`~agent_meta.owner._idle.IdleWriter`'s to decide). A driver subclass adds only what
needs a runtime: how tasks park and are rescheduled (the waiting producers and flushers it
passes in, the idle writer), its sleep and its cancellation. The handles agents hold
(:class:`~agent_meta.SessionLifetime`) talk to this interface, so they serve every driver.
"""

from __future__ import annotations

import abc
import logging
import secrets
from typing import TYPE_CHECKING, ClassVar, NoReturn, Protocol

from ..core._errors import (
    MetaValueError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
    UnknownSessionError,
    shown_id,
)
from ..core._jsonrpc import session_of
from ..sansio._frames import (
    build_notification,
    build_request,
    build_response,
    build_response_batch,
)
from ..sansio._options import OwnerOptions
from ..sansio.queue._durability import claim_again, still_held
from ..sansio.queue._edits import ACCEPTED, FULL, Edit, Outcome
from ..sansio.queue._entries import StoreBatch
from ..sansio.queue._queue import SendQueue
from ..sansio.queue._records import restore_state
from ..sansio.queue._state import LifetimeState
from ._direct import DirectWriter
from ._failures import store_failed, taken_over_error
from ._idle import IdleWriter
from ._lifetime import SessionLifetime
from ._writer import Writer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ..core._session_info import SessionInfo, SessionInfoPatch
    from ..sansio._encode import EncodedUpdate
    from ..sansio.queue._records import StoredLifetime
    from ..stores._store import LifetimeStore
    from ._direct import NowaitStream
    from ._statistics import OwnerStatistics
    from ._transport import Transport

__all__ = ["OwnerBase", "WaitingTasks", "check_options"]

logger = logging.getLogger("agent_meta")


class WaitingTasks(Protocol):
    """Tasks parked until woken all at once: a ``trio.lowlevel.ParkingLot``, or the asyncio
    driver's equivalent. True while any task waits; its length is how many."""

    def __bool__(self) -> bool: ...

    def __len__(self) -> int: ...

    async def park(self) -> None: ...

    def unpark_all(self) -> object: ...


class OwnerBase(abc.ABC):
    """The runtime-independent part of an owner. Drivers subclass it.

    A driver passes what its runtime provides: its ``sleep`` (for the retry backoff), where
    producers wait for queue room (``room``) and where ``wait_flushed`` waits (``progress``),
    and its stream transport when direct writes apply (``stream``); and it names its
    cancellation and "would block" exceptions.
    """

    _cancelled: ClassVar[type[BaseException]]
    """The runtime's cancellation exception (``trio.Cancelled``, ``asyncio.CancelledError``)."""
    _would_block_error: ClassVar[type[Exception]]
    """What a ``*_nowait`` call raises where the ``async`` one would wait (``trio.WouldBlock``,
    ``asyncio.QueueFull``)."""

    def __init__(
        self,
        options: OwnerOptions,
        store: LifetimeStore | None,
        transport: Transport,
        *,
        sleep: Callable[[float], Awaitable[None]],
        room: WaitingTasks,
        progress: WaitingTasks,
        stream: NowaitStream | None,
    ) -> None:
        self._options = options
        self._queue = SendQueue(options, durable=store is not None)
        self._store = store
        self.holder = secrets.token_hex(16)
        """This owner's name in the store: a claim records it, so that a second claim by the
        same owner takes nothing over (128 random bits)."""
        self._writer = Writer(
            self._queue,
            transport,
            options.retry,
            sleep=sleep,
            cancelled=self._cancelled,
            store=store,
            holder=self.holder,
        )
        self._direct = DirectWriter.for_stream(self._queue, stream, store)
        self._idle = IdleWriter(self._direct)  # the parked writer, and the direct-write rule
        self._room = room  # producers wait here for capacity
        self._progress = progress  # wait_flushed waits here
        self._lifetimes: dict[str, SessionLifetime] = {}
        self._opened_any = False
        self._stopped: BaseException | None = None
        self._closing = False

    # -- configuration -------------------------------------------------------------------
    @property
    def options(self) -> OwnerOptions:
        """The options this owner was opened with (the protocol version may differ since,
        see :attr:`protocol_version`)."""
        return self._options

    @property
    def protocol_version(self) -> int:
        """The ACP protocol version frames are rendered for (1 or 2)."""
        return self._queue.protocol_version

    def set_protocol_version(self, version: int) -> None:
        """Set the version negotiated by ``initialize``; only before the first lifetime opens."""
        if version not in (1, 2) or isinstance(version, bool):
            raise ValueError(f"protocol_version must be 1 or 2, not {version!r}")
        if self._opened_any and version != self._queue.protocol_version:
            raise RuntimeError("the protocol version cannot change once a session lifetime opened")
        self._queue.set_protocol_version(version)

    @property
    def failure_path(self) -> tuple[str, ...]:
        """Where failure records live in ``_meta``: a top-level key, then keys inside it."""
        return tuple(self._options.failure_path)

    @property
    def max_frame_bytes(self) -> int:
        return self._options.max_frame_bytes

    # -- lifetimes (R5, R6) --------------------------------------------------------------
    def open_lifetime(
        self, session_id: str, *, seed: SessionInfoPatch | None = None
    ) -> SessionLifetime:
        """Start a new lifetime of ``session_id``, with nothing known. ``seed`` is known state
        applied without sending (say, a title the agent knows a reopened session has, or
        ``title=None`` when it knows there is none): it shows up in the next resync.

        Raises :class:`~agent_meta.SessionExistsError` if one is open already (use
        :meth:`lifetime` to get it, e.g. on an active resume: its state is kept, R5). With a
        store, the new lifetime is stored before the next frame; to resume what the store
        holds for a session, :meth:`claim_lifetime` it instead.
        """
        self._check_running()
        _check_session_id(session_id)
        return self._open(session_id, self._seed(seed), None)

    async def claim_lifetime(
        self, session_id: str, *, seed: SessionInfoPatch | None = None
    ) -> SessionLifetime | None:
        """The lifetime of ``session_id``, taken over from the store: its known state, failure
        incident and repair flag come back (``seed`` is applied on top). ``None`` when the
        store holds nothing for it (or there is no store): nothing is opened then.

        An open lifetime this owner still holds is returned as it is (R5); one that another
        holder took over since (unknown here: nothing of it was written since) ends as taken
        over. Otherwise the store's epoch for the session goes up, so whichever owner held it
        before (another connection, process or machine) is fenced from its next store write
        on: its writes change nothing, its client hears nothing more of the session, and its
        publishers get :class:`~agent_meta.LifetimeTakenOverError` (see
        ``docs/durability.md``). A store round trip; cancelled, it may still have taken the
        lifetime over in the store (a later claim by this owner takes nothing more).
        """
        self._check_running()
        _check_session_id(session_id)
        encoded = self._seed(seed)
        held = self._lifetimes.get(session_id)
        if self._store is None:
            return held
        record = await self._claim(session_id)
        current = self._lifetimes.get(session_id)
        if held is not None and current is held and claim_again(held._state, record):
            record = await self._claim(session_id)
            current = self._lifetimes.get(session_id)
        if current is not None and (current is not held or still_held(current._state, record)):
            return current  # this owner's (or claimed by another task of it meanwhile)
        if current is not None:  # another holder's since: it ends here, the claim opens anew
            self._queue.take_over(current._state)
            self._taken_over([current._state])
        if record is None:
            return None
        return self._open(session_id, encoded, record)

    async def _claim(self, session_id: str) -> StoredLifetime | None:
        """This owner's claim of ``session_id`` from its store (a failure stops the owner)."""
        assert self._store is not None
        try:
            record = await self._store.claim(session_id, self.holder)
        except Exception as exc:
            raise store_failed(exc, self._store.location) from exc
        self._check_running()
        return record

    def _seed(self, seed: SessionInfoPatch | None) -> EncodedUpdate | None:
        if seed is None:
            return None
        return self._queue.encode(title=seed.title, updated_at=seed.updated_at, meta=seed.meta)

    def _open(
        self, session_id: str, seed: EncodedUpdate | None, record: StoredLifetime | None
    ) -> SessionLifetime:
        location = "" if self._store is None else self._store.location
        state = self._queue.open_lifetime(session_id, seed, record, location)
        lifetime = SessionLifetime._create(self, state)
        self._lifetimes[session_id] = lifetime
        self._opened_any = True
        if self._store is not None:
            self._wake_writer()  # a new lifetime is stored even if no frame follows
        return lifetime

    def lifetime(self, session_id: str) -> SessionLifetime:
        """The open lifetime of ``session_id``; :class:`~agent_meta.UnknownSessionError` if none."""
        _check_session_id(session_id)
        try:
            return self._lifetimes[session_id]
        except KeyError:
            raise UnknownSessionError(f"no open lifetime: session {shown_id(session_id)}") from None

    def has_lifetime(self, session_id: str) -> bool:
        """Whether ``session_id`` has an open lifetime."""
        _check_session_id(session_id)
        return session_id in self._lifetimes

    def lifetime_ids(self) -> list[str]:
        """The session ids of all open lifetimes."""
        return list(self._lifetimes)

    async def stored_snapshot(self, session_id: str) -> SessionInfo | None:
        """The known state the store holds for ``session_id``, without taking it over; ``None``
        when it holds none (or there is no store). A store round trip."""
        _check_session_id(session_id)
        if self._store is None:
            return None
        try:
            record = await self._store.read(session_id)
        except Exception as exc:
            raise store_failed(exc, self._store.location) from exc
        if record is None:
            return None
        state = LifetimeState(session_id)
        restore_state(state, record, self._store.location)
        return state.snapshot()

    def _taken_over(self, states: list[LifetimeState]) -> None:
        """Another holder took these lifetimes over (a store write found them stale)."""
        for state in states:
            lifetime = self._lifetimes.get(state.session_id)
            if lifetime is not None and lifetime._state is state:
                del self._lifetimes[state.session_id]
            logger.warning(
                "agent_meta: session %r was taken over by another holder; nothing more of it "
                "is stored or written here",
                state.session_id,
            )
        self._wake_waiters()

    async def _wait_durable(self, state: LifetimeState, target: int) -> None:
        """Wait until the store batch ``target`` is stored; raise
        :class:`~agent_meta.LifetimeTakenOverError` if ``state`` was taken over instead."""
        queue = self._queue
        while not queue.is_durable(target):
            self._check_stopped()
            await self._progress.park()
        if state.books.taken_over:
            raise taken_over_error(state.session_id)

    def close_lifetime(self, session_id: str) -> None:
        """End the lifetime of ``session_id`` (R6): the fence begins here.

        What it queued before this call is still written, in order (R2): its publications, a
        resync pending or in flight (its snapshot is the state at the close), a repair it
        owed. Nothing of it is queued after this call: every later call on its handles is
        refused quietly and counted as fenced, and a frame of it lost from now on is not
        repaired. With a store, its record is deleted before any frame queued after this call
        is written.
        """
        lifetime = self.lifetime(session_id)
        del self._lifetimes[session_id]
        self._queue.close_lifetime(lifetime._state)
        self._wake_writer()
        self._wake_waiters()

    # -- statistics ----------------------------------------------------------------------
    def statistics(self) -> OwnerStatistics:
        """Counters and queue sizes, for monitoring and tests."""
        from ._statistics import OwnerStatistics  # here: not on every owner's start

        queue = self._queue
        c = queue.statistics()
        return OwnerStatistics(
            open_lifetimes=len(self._lifetimes),
            queued=queue.queued_entries,
            queued_frames=queue.queued_frames,
            peak_queued_frames=c.peak_queued_frames,
            publications=c.publications,
            coalesced=c.coalesced,
            frames_written=c.frames_written,
            bytes_written=c.bytes_written,
            fenced=c.fenced,
            write_failures=c.write_failures,
            retried_writes=self._writer.retried,
            resyncs=c.resyncs,
            repairs=c.repairs,
            waiting_producers=len(self._room),
            store_writes=queue.store_batches,
            taken_over=c.taken_over,
            direct_writes=0 if self._direct is None else self._direct.frames,
            suppressed_titles=c.suppressed_titles,
        )

    # -- other frames --------------------------------------------------------------------
    async def send_notification(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Queue any notification (a message chunk, a ``state_update`` ...) in the same FIFO.

        ``params`` must be a JSON object (or ``None`` to omit it); bad input raises
        :class:`~agent_meta.MetaValueError` before anything is queued. Returns ``False``, having
        written nothing, when ``params.sessionId`` names a session whose lifetime has ended
        (R6: nothing more of it is written). May wait for queue room; if cancelled while
        waiting, nothing is sent.
        """
        frame = build_notification(method, params)
        return await self.send_encoded(frame, session_of(params))

    def send_notification_nowait(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Like :meth:`send_notification`; raises the driver's "would block" exception
        (``trio.WouldBlock``, ``asyncio.QueueFull``) instead of waiting."""
        return self._raw_nowait(build_notification(method, params), session_of(params))

    async def send_response(
        self, request_id: int | str | None, *, result: object = None, error: object = None
    ) -> None:
        """Queue the response to a request, after everything queued before it (R2).

        Pass ``error`` (``{"code": int, "message": str, "data"?: ...}``) for an error response,
        otherwise ``result`` (any JSON value; ``None`` is sent as ``null``). Bad input raises
        :class:`~agent_meta.MetaValueError` before anything is queued. May wait for queue room;
        if cancelled while waiting, nothing is sent.
        """
        await self.send_encoded(build_response(request_id, result=result, error=error), None)

    def send_response_nowait(
        self, request_id: int | str | None, *, result: object = None, error: object = None
    ) -> None:
        """Like :meth:`send_response`; raises the driver's "would block" exception instead of
        waiting."""
        self._raw_nowait(build_response(request_id, result=result, error=error))

    async def send_response_batch(self, responses: Sequence[Mapping[str, object]]) -> None:
        """Queue the answer to a JSON-RPC batch: one line holding every response given
        (``{"id": ..., "result": ...}`` or ``{"id": ..., "error": {...}}``), validated like
        :meth:`send_response`."""
        await self.send_encoded(build_response_batch(responses), None)

    async def send_request(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Queue a request to the client (``session/request_permission``, ``fs/*`` ...).

        The owner only writes it, in FIFO order; matching the client's response to
        ``request_id`` is the caller's job (:meth:`~agent_meta.AgentConnection.request` does it
        on the trio connection; the official SDK does it behind the SDK adapter). Returns
        ``False`` (nothing written) if its session's lifetime has ended.
        """
        return await self.send_encoded(
            build_request(request_id, method, params), session_of(params)
        )

    def send_request_nowait(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Like :meth:`send_request`; raises the driver's "would block" exception instead of
        waiting."""
        return self._raw_nowait(build_request(request_id, method, params), session_of(params))

    # -- what the handles call (LifetimeOwner) --------------------------------------------
    @property
    def offset_timestamps(self) -> bool:
        """``updatedAt`` must be RFC 3339 with an offset in the version rendered now (v2)."""
        return self._queue.mode.requires_offset_timestamps

    def _try_submit(self, state: LifetimeState, edit: Edit) -> Outcome:
        """Submit one edit to the queue now; wake the writer if anything was accepted."""
        if state.books.closed:
            if state.books.taken_over:
                raise taken_over_error(state.session_id)
        elif self._stopped is not None or self._closing:
            self._check_running()
        idle = self._idle
        outcome = self._queue.submit(state, edit, express=idle.express)
        if outcome is ACCEPTED and idle.wake():
            self._reschedule_writer()
        return outcome

    def submit_edit_nowait(self, state: LifetimeState, edit: Edit) -> bool:
        """Submit one edit without waiting: the driver's "would block" error when it needs
        queue room and there is none."""
        outcome = self._try_submit(state, edit)
        if outcome is FULL:
            self._would_block()
        return outcome is ACCEPTED

    def seed_lifetime(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Make ``update`` known state of ``state`` without a frame; ``False`` if it has
        ended."""
        if not state.books.closed:
            self._check_running()
        return self._queue.seed(state, update) is ACCEPTED

    def resync_lifetime(self, state: LifetimeState) -> bool:
        """Queue a resync of ``state`` (R4; never waits); ``False`` if it has ended."""
        if not state.books.closed:
            self._check_running()
        accepted = self._queue.resync(state) is ACCEPTED
        self._wake_writer()
        return accepted

    def _try_raw(self, frame: bytes, session_id: str | None) -> Outcome:
        """Queue a raw frame now if there is room (and its session has not ended); wake the
        writer if it was queued."""
        self._check_running()
        outcome = self._queue.submit_raw(frame, session_id)
        if outcome is ACCEPTED and self._idle.wake():
            self._reschedule_writer()
        return outcome

    def _raw_nowait(self, frame: bytes, session_id: str | None = None) -> bool:
        outcome = self._try_raw(frame, session_id)
        if outcome is FULL:
            self._would_block()
        return outcome is ACCEPTED

    @abc.abstractmethod
    async def submit_edit(self, state: LifetimeState, edit: Edit) -> bool:
        """Submit one edit, waiting for queue room as long as needed (the driver's way)."""

    @abc.abstractmethod
    async def send_encoded(self, frame: bytes, session_id: str | None) -> bool:
        """Queue a raw frame, waiting for queue room as long as needed (the driver's way);
        ``False`` if it was fenced (its session's lifetime has ended)."""

    # -- the writer task -----------------------------------------------------------------
    async def _writer_loop(self) -> None:
        """The writer task: ask the queue what to do next, have the writer do it, wake the
        tasks it may concern; park when idle.

        Runs until the owner closes (and the queue is empty) or fails; a failure stops the
        owner and propagates.
        """
        queue = self._queue
        writer = self._writer
        room = self._room
        progress = self._progress
        try:
            while True:
                action = queue.next_action()
                if room and queue.has_room():  # taking an entry may have freed room
                    room.unpark_all()
                if action is None:
                    progress.unpark_all()
                    if self._closing:
                        return
                    self._idle.park()
                    await self._park_writer()
                elif isinstance(action, StoreBatch):
                    taken = await writer.store(action)
                    if taken:
                        self._taken_over(taken)
                    progress.unpark_all()
                else:
                    await writer.write(action)
                    if progress:
                        progress.unpark_all()
        except BaseException as exc:
            self._stop(exc)
            raise

    def _wake_writer(self) -> None:
        """Something was queued or changed: the writer has work (written here directly, or
        the parked writer is rescheduled)."""
        if self._idle.wake():
            self._reschedule_writer()

    # -- driver hooks --------------------------------------------------------------------
    @abc.abstractmethod
    async def _park_writer(self) -> None:
        """Park the writer task until :meth:`_reschedule_writer`. A cancellation of the parked
        task must call ``self._idle.unpark()`` the moment it is requested, before the task
        runs again."""

    @abc.abstractmethod
    def _reschedule_writer(self) -> None:
        """Reschedule the writer task parked in :meth:`_park_writer` (``IdleWriter.wake`` said
        so; it is not cancelled)."""

    def _wake_waiters(self) -> None:
        """Queue room or flush progress may have changed: wake every waiting task."""
        self._room.unpark_all()
        self._progress.unpark_all()

    def _would_block(self) -> NoReturn:
        """Raise the runtime's "would block" exception (for the ``*_nowait`` calls)."""
        raise self._would_block_error

    # -- stopping ------------------------------------------------------------------------
    def _check_running(self) -> None:
        self._check_stopped()
        if self._closing:
            raise OwnerClosedError("the owner is closing and accepts no more frames")

    def _check_stopped(self) -> None:
        stopped = self._stopped
        if stopped is None:
            return
        if isinstance(stopped, TransportBrokenError):
            raise OwnerClosedError("the owner stopped: its transport broke") from stopped
        if isinstance(stopped, StoreError):
            raise OwnerClosedError(f"the owner stopped: {stopped}") from stopped
        raise OwnerClosedError("the owner has stopped") from stopped

    def _stop(self, exc: BaseException) -> None:
        if self._stopped is None:
            self._stopped = exc
            self._idle.stop()
        self._wake_waiters()
        self._wake_writer()

    def _begin_closing(self) -> None:
        """Refuse new frames; the writer returns once the queue is empty."""
        self._closing = True
        self._wake_writer()


def check_options(options: OwnerOptions | None) -> OwnerOptions:
    """The options an ``open_*owner`` call was given, or the defaults; a ``TypeError`` for
    anything else (a mapping of the old keyword options, say)."""
    if options is None:
        return OwnerOptions()
    if not isinstance(options, OwnerOptions):
        raise TypeError(f"options must be an OwnerOptions, not {type(options).__name__}")
    return options


def _check_session_id(session_id: object) -> None:
    """A session id is a str (R12: a typed error, not a ``TypeError`` from a dict lookup)."""
    if not isinstance(session_id, str):
        raise MetaValueError(f"must be a str, not a {type(session_id).__name__}", path="session_id")
