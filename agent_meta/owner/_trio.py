"""The owner: one serialized send boundary per agent connection (trio).

:func:`open_owner` starts a :class:`MetaOwner` and its writer task. Everything -- session-info
publications, resyncs, responses, other notifications -- is *enqueued* through it, in FIFO
order (R2). The decisions (coalescing, fencing, repair, rendering) are made by the sans-IO
:class:`SendQueue`; this module only moves frames to the transport, retries what the transport
proves unsent, and wakes waiters.

One writer at a time: the writer task, or, over a pipe while that task is parked with nothing
queued, the call that queued the frame (a *direct write*, see ``docs/owner.md``): it saves a task
switch per frame. Whatever a direct write cannot finish at once, the writer task finishes before
anything else.

Cancellation: every ``async`` method here either completes its whole effect or, if cancelled
before it could, has no effect at all. Methods that must wait (for queue room, with coalescing
off, or for frames that count against capacity) can be cancelled while waiting: nothing is then
stored or queued. Once an operation has taken effect, a later cancellation does not undo it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal, final

import tenacity
import trio

from ..core._errors import (
    AgentMetaError,
    MetaValueError,
    OwnerClosedError,
    TransportBrokenError,
    UnknownSessionError,
)
from ..core._json import json_copy, json_object_copy
from ..sansio._frames import encode_json, notification_frame, response_frame
from ..sansio._queue import Outgoing, SendQueue, V1MetaMode
from ..sansio._state import (
    NO_CHANGE,
    EncodedUpdate,
    LifetimeState,
    check_path,
    encode_update,
)
from ._lifetime import SessionLifetime
from ._store import LifetimeStore, StoredLifetime, StoreError, record_of, restore_state
from ._transport import FrameLostError, FrameNotSentError, StreamTransport, Transport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from ..core._session_info import SessionInfo, SessionInfoPatch

__all__ = ["MetaOwner", "OwnerStatistics", "default_retry", "open_owner"]

logger = logging.getLogger("agent_meta")

DEFAULT_FAILURE_PATH: tuple[str, ...] = ("agent-meta", "failure")


def default_retry() -> tenacity.AsyncRetrying:
    """The default retry policy: 4 retries after the first failed write, backoff 50 ms to 1 s.

    The owner writes a frame once directly; only if the transport raises
    :class:`~agent_meta.FrameNotSentError` is the frame handed to this policy.
    """
    return tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(4),
        wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
    )


@final
@dataclasses.dataclass(frozen=True, slots=True)
class OwnerStatistics:
    """A snapshot of a :class:`MetaOwner`'s counters (see :meth:`MetaOwner.statistics`)."""

    open_sessions: int
    """Lifetimes currently open."""
    queued: int
    """Entries waiting to be written (including the one being written)."""
    queued_frames: int
    """Frames still queued, at most (a frame being written is no longer counted)."""
    peak_queued_frames: int
    """The most frames ever queued at once."""
    publications: int
    """Session-info publications accepted (publish, domain edits, failure changes)."""
    coalesced: int
    """Publications and resyncs merged into an entry already queued (R3)."""
    frames_written: int
    bytes_written: int
    fenced: int
    """Calls refused and queued frames dropped because their lifetime had ended (R6)."""
    write_failures: int
    """Frames the transport did not (or may not have) delivered (R11)."""
    retried_writes: int
    """Retries of frames the transport proved unsent."""
    resyncs: int
    """Resyncs written (requested ones and repairs)."""
    repairs: int
    """Resyncs written to repair a client view after a lost frame."""
    waiting_producers: int
    """Tasks blocked waiting for queue room."""
    store_writes: int = 0
    """Batches written to the lifetime store (0 without a store)."""
    direct_writes: int = 0
    """Frames written whole by the call that queued them, the writer task being idle (only
    over a pipe, without a store; see :class:`~agent_meta.StreamTransport`)."""


@final
class MetaOwner:
    """The single writer of one agent connection. Create it with :func:`open_owner`."""

    def __init__(
        self,
        transport: Transport,
        *,
        protocol_version: int,
        v1_meta_mode: V1MetaMode,
        failure_path: Sequence[str],
        max_frame_bytes: int,
        coalesce: bool,
        capacity: int,
        retry: tenacity.AsyncRetrying,
        store: LifetimeStore | None = None,
    ) -> None:
        _check_version(protocol_version)
        if v1_meta_mode not in ("merged", "passthrough"):
            raise ValueError(
                f"v1_meta_mode must be 'merged' or 'passthrough', not {v1_meta_mode!r}"
            )
        path = check_path(failure_path, "failure_path")
        if not path:
            raise ValueError("failure_path needs at least one key")
        self._transport = transport
        self._queue = SendQueue(
            protocol_version=protocol_version,
            v1_meta_mode=v1_meta_mode,
            coalesce=coalesce,
            capacity=capacity,
            max_frame_bytes=max_frame_bytes,
        )
        self._failure_path = path
        self._retry = retry.copy(
            retry=tenacity.retry_if_exception_type(FrameNotSentError),
            reraise=True,
            sleep=trio.sleep,
        )
        self._lifetimes: dict[str, SessionLifetime] = {}
        self._idle_writer: trio.lowlevel.Task | None = None  # the writer, parked with no work
        self._room = trio.lowlevel.ParkingLot()  # producers wait here for capacity
        self._progress = trio.lowlevel.ParkingLot()  # wait_flushed waits here
        self._stopped: BaseException | None = None
        self._closing = False
        self._retried = 0
        self._opened_any = False
        # Durability (see docs/durability.md): lifetimes loaded from the store and not yet
        # reopened, ids whose records must be deleted, and store write counters.
        self._store = store
        self._stored: dict[str, StoredLifetime] = {}
        self._deletes: list[str] = []
        self._store_started = 0
        self._store_done = 0
        if store is not None:
            self._queue.dirty = {}
        # Direct writes (see _wake_writer): while the writer task is parked with nothing to do,
        # the call that queues a frame writes it itself if the pipe takes it at once. Not with a
        # store, whose persist-before-write must wait for the store; and only through exactly a
        # StreamTransport, as a subclass may send frames its own way, or fail in ways that allow
        # a retry, which a frame already begun by a direct write could never take.
        self._send_nowait: Callable[[bytes], int] | None = None
        if store is None and type(transport) is StreamTransport and transport.can_send_nowait:
            self._send_nowait = transport.send_nowait
        self._carry: Outgoing | None = None  # written in part directly; the writer finishes it
        self._direct_writes = 0

    # -- configuration ---------------------------------------------------------------------
    @property
    def protocol_version(self) -> int:
        """The ACP protocol version frames are rendered for (1 or 2)."""
        return self._queue.protocol_version

    def set_protocol_version(self, version: int) -> None:
        """Set the version negotiated by ``initialize``; only before the first lifetime opens."""
        _check_version(version)
        if self._opened_any and version != self._queue.protocol_version:
            raise RuntimeError("the protocol version cannot change once a session lifetime opened")
        self._queue.protocol_version = version

    @property
    def failure_path(self) -> tuple[str, ...]:
        """Where failure records live in ``_meta``: a top-level key, then keys inside it."""
        return self._failure_path

    @property
    def max_frame_bytes(self) -> int:
        return self._queue.max_frame_bytes

    # -- lifetimes ---------------------------------------------------------------------------
    def open_session(
        self, session_id: str, *, seed: SessionInfoPatch | None = None
    ) -> SessionLifetime:
        """Start the lifetime of ``session_id``. ``seed`` is known state applied without sending.

        Raises :class:`~agent_meta.SessionExistsError` if one is open already (use
        :meth:`lifetime` to get it, e.g. on an active resume: its state is kept, R5). With a
        store, a lifetime the store holds for ``session_id`` is resumed: its known state,
        failure incident and repair flag come back (``seed`` is then applied on top).
        """
        self._check_running()
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, not a {type(session_id).__name__}")
        encoded = None
        if seed is not None:
            encoded = encode_update(
                title=seed.title,
                updated_at=seed.updated_at,
                meta=seed.meta,
                protocol_version=self.protocol_version,
            )
        record = self._stored.get(session_id)
        restore = None
        if record is not None and self._store is not None:
            location = self._store.location

            def restore(state: LifetimeState) -> None:
                restore_state(state, record, location)

        state = self._queue.open_lifetime(session_id, encoded, restore)
        self._stored.pop(session_id, None)
        lifetime = SessionLifetime._create(self, state)
        self._lifetimes[session_id] = lifetime
        self._opened_any = True
        return lifetime

    def lifetime(self, session_id: str) -> SessionLifetime:
        """The open lifetime of ``session_id``; :class:`~agent_meta.UnknownSessionError` if none."""
        try:
            return self._lifetimes[session_id]
        except KeyError:
            raise UnknownSessionError(f"no open lifetime for session {session_id!r}") from None

    def has_stored_session(self, session_id: str) -> bool:
        """Whether the store holds a lifetime of ``session_id`` that is not open yet."""
        return session_id in self._stored

    def stored_snapshot(self, session_id: str) -> SessionInfo | None:
        """The known state the store holds for ``session_id`` (not open yet), else ``None``."""
        record = self._stored.get(session_id)
        if record is None or self._store is None:
            return None
        state = LifetimeState(session_id)
        restore_state(state, record, self._store.location)
        return state.snapshot()

    def has_session(self, session_id: str) -> bool:
        """Whether ``session_id`` has an open lifetime."""
        return session_id in self._lifetimes

    def session_ids(self) -> list[str]:
        """The ids of all open lifetimes."""
        return list(self._lifetimes)

    def close_session(self, session_id: str) -> None:
        """End the lifetime of ``session_id`` (R6): nothing more of it is ever written.

        Its queued frames are dropped, a resync in flight stops after the frame being written,
        and every later call on its handles is refused quietly and counted as fenced.
        """
        lifetime = self.lifetime(session_id)
        del self._lifetimes[session_id]
        self._queue.close_lifetime(lifetime._state)
        if self._store is not None:
            # Deleted from the store before any frame enqueued from now on is written (the
            # session/close response included).
            self._deletes.append(session_id)
            self._unpark_writer()
        self._room.unpark_all()
        self._progress.unpark_all()

    # -- other frames --------------------------------------------------------------------
    async def send_notification(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> None:
        """Enqueue any notification (e.g. a replayed message chunk) in the same FIFO.

        ``params`` is validated as a JSON object; bad input raises before anything is queued.
        May wait for queue room; if cancelled while waiting, nothing is sent.
        """
        params_text = (
            None if params is None else encode_json(json_object_copy(params, path="params"))
        )
        frame = notification_frame(method, params_text)
        await self._enqueue_raw(frame)

    async def send_response(
        self,
        request_id: int | str | None,
        *,
        result: object = None,
        error: Mapping[str, object] | None = None,
    ) -> None:
        """Enqueue the response to a request, after everything enqueued before it (R2).

        Pass ``error`` (``{"code": int, "message": str, "data"?: ...}``) for an error response,
        otherwise ``result`` (any JSON value; ``None`` is sent as ``null``). May wait for queue
        room; if cancelled while waiting, nothing is sent.
        """
        valid_id = request_id is None or isinstance(request_id, int | str)
        if not valid_id or isinstance(request_id, bool):
            raise MetaValueError("a request id must be an int, a str or None", path="request_id")
        id_text = encode_json(request_id)
        if error is not None:
            err = json_object_copy(error, path="error")
            if not isinstance(err.get("code"), int) or not isinstance(err.get("message"), str):
                raise MetaValueError("needs an int 'code' and a str 'message'", path="error")
            frame = response_frame(id_text, result=None, error=encode_json(err))
        else:
            frame = response_frame(
                id_text, result=encode_json(json_copy(result, path="result")), error=None
            )
        await self._enqueue_raw(frame)

    async def _enqueue_raw(self, frame: bytes) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        self._queue.check_frame_size(frame)
        while True:
            self._check_running()
            if self._queue.has_room():
                break
            await self._room.park()
        self._queue.raw(frame)
        self._wake_writer()
        await trio.lowlevel.cancel_shielded_checkpoint()

    # -- flushing and statistics ---------------------------------------------------------
    async def wait_flushed(self) -> None:
        """Wait until everything enqueued before this call has been written (or dropped).

        With a store, it also waits until every change accepted before the call is stored.
        Cancelling the wait changes nothing. Raises if the owner stops first.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        target = self._queue.position
        stored = self._store_done
        if self._queue.dirty or self._deletes:
            stored = self._store_started + 1  # a store write that starts after this call
        while not self._queue.is_flushed(target) or self._store_done < stored:
            self._check_stopped()
            await self._progress.park()
        await trio.lowlevel.cancel_shielded_checkpoint()

    def statistics(self) -> OwnerStatistics:
        """Counters and queue sizes, for monitoring and tests."""
        c = self._queue.counters
        return OwnerStatistics(
            open_sessions=len(self._lifetimes),
            queued=self._queue.queued_entries,
            queued_frames=self._queue.queued_frames,
            peak_queued_frames=c.peak_queued_frames,
            publications=c.publications,
            coalesced=c.coalesced,
            frames_written=c.frames_written,
            bytes_written=c.bytes_written,
            fenced=c.fenced,
            write_failures=c.write_failures,
            retried_writes=self._retried,
            resyncs=c.resyncs,
            repairs=c.repairs,
            waiting_producers=self._room.statistics().tasks_waiting,
            store_writes=self._store_done,
            direct_writes=self._direct_writes,
        )

    # -- internals used by SessionLifetime -----------------------------------------------
    def _check_running(self) -> None:
        self._check_stopped()
        if self._closing:
            raise OwnerClosedError("the owner is closing and accepts no more frames")

    def _check_stopped(self) -> None:
        if self._stopped is not None:
            if isinstance(self._stopped, TransportBrokenError):
                raise OwnerClosedError("the owner stopped: its transport broke") from self._stopped
            if isinstance(self._stopped, StoreError):
                raise OwnerClosedError(f"the owner stopped: {self._stopped}") from self._stopped
            raise OwnerClosedError("the owner has stopped") from self._stopped

    def _publish_nowait(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        queue = self._queue
        if state.closed:
            return queue.publish(state, update)  # counts it as fenced
        if self._stopped is not None or self._closing:
            self._check_running()
        send_nowait = self._direct_write()
        if send_nowait is not None:
            frame = queue.publish_now(state, update)
            if frame is not None:
                self._send_directly(send_nowait, Outgoing(frame, state))
                return True
        needs_room = queue.publication_needs_room(state, update)
        if needs_room and not queue.has_room():
            raise trio.WouldBlock
        accepted = queue.publish(state, update, needs_room)
        self._wake_writer()
        return accepted

    async def _publish(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        # Fast path: nothing to wait for, so no closure and no retry loop.
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            accepted = self._publish_nowait(state, update)
        except trio.WouldBlock:
            return await self._publish_edit(state, lambda: update)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return accepted

    async def _publish_edit(
        self,
        state: LifetimeState,
        make: Callable[[], EncodedUpdate | bool],
        on_success: Callable[[], None] | None = None,
    ) -> bool:
        """Publish what ``make()`` computes from the known state at the moment it is queued.

        ``make`` returns the update, ``True`` when nothing needs sending (success), or ``False``
        to refuse. It is called again after every wait for room, so a read-modify-write never
        publishes a value computed from a state that changed while it waited (R8).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            if state.closed:
                accepted = self._queue.publish(state, NO_CHANGE)  # refused and counted as fenced
                break
            edit = make()
            if isinstance(edit, bool):
                accepted = edit
                break
            try:
                accepted = self._publish_nowait(state, edit)
            except trio.WouldBlock:
                await self._room.park()
                continue
            break
        if accepted and on_success is not None:
            on_success()
            if self._store is not None:
                self._queue.mark_dirty(state)  # a failure change may carry no frame of its own
                self._unpark_writer()
        await trio.lowlevel.cancel_shielded_checkpoint()
        return accepted

    def _resync_nowait(self, state: LifetimeState) -> bool:
        if not state.closed:
            self._check_running()
        accepted = self._queue.resync(state)
        self._wake_writer()
        return accepted

    def _direct_write(self) -> Callable[[bytes], int] | None:
        """The transport's non-blocking write if a frame may be written directly now: over a
        pipe, without a store, while the writer task is parked with nothing to do."""
        if self._idle_writer is None or self._stopped is not None:
            return None
        return self._send_nowait

    def _wake_writer(self) -> None:
        """Something was queued: write it now if the writer is idle, else wake the writer."""
        send_nowait = self._direct_write()
        if send_nowait is not None:
            self._write_directly(send_nowait)
        else:
            self._unpark_writer()

    def _write_directly(self, send_nowait: Callable[[bytes], int]) -> None:
        """Write queued frames in this call, while the pipe takes them whole at once.

        The writer task is parked, so this is the only code writing (R2 holds: one FIFO, one
        writer at a time). A frame the pipe takes only in part, or not at all, is handed to the
        writer task, which finishes it before anything else and reports any error.
        """
        # No task can be waiting for room or for a flush now: the writer parks only with the
        # queue empty, after waking every such task.
        queue = self._queue
        while True:
            out = queue.next_frame()
            if out is None or not self._send_directly(send_nowait, out):
                break

    def _send_directly(self, send_nowait: Callable[[bytes], int], out: Outgoing) -> bool:
        """Write one frame now if the pipe takes all of it; otherwise hand the rest to the
        writer task (which then writes it before anything else) and return ``False``."""
        sent = send_nowait(out.frame)
        if sent == len(out.frame):
            self._queue.written(out)
            self._direct_writes += 1
            return True
        out.sent = sent
        self._carry = out
        self._unpark_writer()
        return False

    def _unpark_writer(self) -> None:
        task = self._idle_writer
        if task is not None:
            self._idle_writer = None
            trio.lowlevel.reschedule(task)

    async def _wait_for_work(self) -> None:
        """Park the writer task until :meth:`_unpark_writer` (or a cancellation).

        Not a ParkingLot: the writer must stop counting as idle the moment it is woken *or
        cancelled* (the abort callback runs inside ``cancel()``), so that no direct write
        begins a frame that the writer might not live to finish.
        """
        self._idle_writer = trio.lowlevel.current_task()

        def abort(_: Callable[[], object]) -> trio.lowlevel.Abort:
            self._idle_writer = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    # -- the writer ----------------------------------------------------------------------
    async def _run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        queue = self._queue
        try:
            while True:
                out = self._carry
                if out is not None:
                    self._carry = None  # begun by a direct write (no store, so write it now)
                else:
                    out = queue.next_frame()
                if self._room:  # taking an entry may have freed room
                    self._room.unpark_all()
                if out is None:
                    if await self._persist():  # changes that carry no frame (yet)
                        continue
                    self._progress.unpark_all()
                    if self._closing:
                        return
                    await self._wait_for_work()
                    continue
                if self._store is not None:
                    # Persist before write: the frame's state (and every change accepted before
                    # it) is stored before the frame can reach the client.
                    await self._persist()
                    lifetime = out.lifetime
                    if lifetime is not None and lifetime.closed:
                        queue.dropped(out)  # ended while its state was being stored
                        continue
                await self._write(out)
                if self._progress:
                    self._progress.unpark_all()
        except BaseException as exc:
            self._stop(exc)
            raise

    async def _persist(self) -> bool:
        """Store pending deletes and every changed lifetime in one batch; False if none."""
        store = self._store
        dirty = self._queue.dirty
        if store is None or dirty is None or not (dirty or self._deletes):
            return False
        saves = [record_of(state) for state in dirty]
        deletes = self._deletes
        dirty.clear()
        self._deletes = []
        self._store_started += 1
        try:
            await store.write(saves, deletes)
        except (StoreError, trio.Cancelled):
            raise
        except Exception as exc:
            raise StoreError(
                store.location, f"saving lifetimes failed: {type(exc).__name__}: {exc}"
            ) from exc
        self._store_done += 1
        self._progress.unpark_all()
        return True

    async def _write(self, out: Outgoing) -> None:
        """Write one frame: retried while the transport proves it unsent, a loss reported (and
        repaired), any other failure turned into :class:`TransportBrokenError`."""
        try:
            try:
                await self._transport.send_frame(out.unsent())
            except FrameNotSentError:
                if not await self._retry_unsent(out):
                    return  # its lifetime ended during the backoff
        except (FrameNotSentError, FrameLostError) as exc:
            self._report_loss(out, exc)
            return
        except trio.Cancelled:
            raise
        except BaseException as exc:
            raise TransportBrokenError(
                f"writing a frame failed part-way ({type(exc).__name__}: {exc}); the stream can "
                "no longer be trusted"
            ) from exc
        self._queue.written(out)

    async def _retry_unsent(self, out: Outgoing) -> bool:
        """Retry a frame the transport proved unsent, with the retry policy.

        Returns ``False`` if its lifetime ended meanwhile (the frame is dropped, R6). When the
        policy gives up, its last :class:`FrameNotSentError` propagates.
        """
        lifetime = out.lifetime
        async for attempt in self._retry:
            with attempt:
                if lifetime is not None and lifetime.closed:
                    self._queue.dropped(out)  # ended during the backoff (R6)
                    return False
                self._retried += 1  # the direct attempt failed: each attempt here is a retry
                await self._transport.send_frame(out.unsent())
        return True

    def _report_loss(self, out: Outgoing, exc: AgentMetaError) -> None:
        lifetime = out.lifetime
        logger.warning(
            "agent_meta: a frame%s was not delivered (%s); %s",
            f" of session {lifetime.session_id!r}" if lifetime is not None else "",
            exc,
            "its session will be resynced" if lifetime is not None else "it is dropped",
        )
        self._queue.lost(out)

    def _stop(self, exc: BaseException) -> None:
        if self._stopped is None:
            self._stopped = exc
        self._room.unpark_all()
        self._progress.unpark_all()
        self._unpark_writer()

    def _begin_closing(self) -> None:
        """Refuse new frames; the writer returns once the queue is empty."""
        self._closing = True
        self._unpark_writer()


def _check_version(version: object) -> None:
    if version not in (1, 2) or isinstance(version, bool):
        raise ValueError(f"protocol_version must be 1 or 2, not {version!r}")


@asynccontextmanager
async def open_owner(
    stream: trio.abc.SendStream | Transport,
    *,
    protocol_version: Literal[1, 2] = 2,
    v1_meta_mode: V1MetaMode = "merged",
    failure_path: Sequence[str] = DEFAULT_FAILURE_PATH,
    max_frame_bytes: int = 1 << 20,
    coalesce: bool = True,
    capacity: int = 256,
    retry: tenacity.AsyncRetrying | None = None,
    drain_timeout: float = math.inf,
    store: LifetimeStore | None = None,
) -> AsyncIterator[MetaOwner]:
    """Run a :class:`MetaOwner` writing to ``stream`` for the duration of the block.

    ``stream`` is any :class:`trio.abc.SendStream` (wrapped in a
    :class:`~agent_meta.StreamTransport`) or a :class:`~agent_meta.Transport`; the owner never
    closes it. Options:

    - ``protocol_version``: 1 or 2 (changeable until the first lifetime opens, for
      ``initialize``); ``v1_meta_mode``: on v1, ``"merged"`` sends the complete merged object on
      every frame, ``"passthrough"`` sends patches as published and no resync frames (R10).
    - ``failure_path``: where failure records live (default ``("agent-meta", "failure")``).
    - ``max_frame_bytes``: the largest frame, and the largest session info a lifetime may hold.
    - ``coalesce``: merge queued updates of a session while the writer is behind (R3);
      ``False`` makes every update its own frame, with producers waiting for room.
    - ``capacity``: how many frames that cannot be merged may wait before producers block.
    - ``retry``: a :class:`tenacity.AsyncRetrying` used only for frames the transport proves
      unsent (:class:`~agent_meta.FrameNotSentError`); see :func:`default_retry`.
    - ``store``: a :class:`~agent_meta.LifetimeStore` (e.g. :class:`~agent_meta.SQLiteStore`)
      that keeps lifetimes across restarts. Every stored lifetime is loaded now; opening one of
      those session ids resumes it. Each change is stored before any frame carrying it is
      written; a store failure stops the owner with :class:`~agent_meta.StoreError` (raised
      from this block) before that frame. The owner never closes the store.

    On normal exit the block waits (up to ``drain_timeout`` seconds) for queued frames to be
    written (and stored), then stops. If the transport breaks for good or the store fails, the
    owner stops, the block is cancelled, and :class:`~agent_meta.TransportBrokenError` (or
    :class:`~agent_meta.StoreError`) is raised from it.
    """
    transport: Transport
    if isinstance(stream, trio.abc.SendStream):
        transport = StreamTransport(stream)
    elif isinstance(stream, Transport):
        transport = stream
    else:
        raise TypeError("stream must be a trio.abc.SendStream or an agent_meta.Transport")
    owner = MetaOwner(
        transport,
        protocol_version=protocol_version,
        v1_meta_mode=v1_meta_mode,
        failure_path=failure_path,
        max_frame_bytes=max_frame_bytes,
        coalesce=coalesce,
        capacity=capacity,
        retry=retry if retry is not None else default_retry(),
        store=store,
    )
    if store is not None:
        owner._stored = await store.load_lifetimes()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(owner._run_writer)
            yield owner
            owner._begin_closing()
            with trio.move_on_after(drain_timeout):
                await owner.wait_flushed()
            owner._stop(OwnerClosedError("the owner was closed"))
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        broken = _only_broken(group)
        if broken is None:
            raise
        raise broken from None
    finally:
        owner._closing = True
        owner._stop(OwnerClosedError("the owner was closed"))


def _only_broken(
    group: BaseExceptionGroup[BaseException],
) -> TransportBrokenError | StoreError | None:
    """The TransportBrokenError or StoreError, if it is all the group holds (besides
    cancellations)."""
    found: list[TransportBrokenError | StoreError] = []
    leaves: list[BaseException] = [group]
    while leaves:
        exc = leaves.pop()
        if isinstance(exc, BaseExceptionGroup):
            leaves.extend(exc.exceptions)
        elif isinstance(exc, TransportBrokenError | StoreError):
            found.append(exc)
        elif isinstance(exc, OwnerClosedError) and isinstance(
            exc.__cause__, TransportBrokenError | StoreError
        ):
            found.append(exc.__cause__)  # a waiter that learned of the break first
        elif not isinstance(exc, trio.Cancelled):
            return None
    return found[0] if found else None
