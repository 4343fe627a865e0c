"""The trio driver: :func:`open_owner` and :class:`MetaOwner`, the flagship runtime.

Everything -- session-info publications, resyncs, responses, requests, other notifications --
is *queued* through the owner, in FIFO order (R2); the sans-IO send queue decides what goes on
the wire. This module only runs the writer task (frames to the transport, batches to the store),
retries what the transport proves unsent, and parks and wakes tasks. Over a pipe, while the
writer task idles, the call that queued a frame may write it itself (:mod:`._direct`).

Cancellation: every ``async`` method either completes its whole effect or, if cancelled before
it could, has no effect at all. Methods that must wait (for queue room, with coalescing off, or
for frames that count against capacity) can be cancelled while waiting: nothing is then stored
or queued. Once an operation has taken effect, a later cancellation does not undo it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn, final

import tenacity
import trio

from ..core._errors import (
    FrameLostError,
    FrameNotSentError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
)
from ..sansio._edits import Outcome
from ..sansio._entries import StoreBatch
from ..sansio._frames import (
    build_notification,
    build_request,
    build_response,
    build_response_batch,
    session_of,
)
from ..sansio._options import OwnerOptions, RetryPolicy
from ._base import OwnerBase, broken_transport
from ._direct import DirectWriter
from ._transport import StreamTransport, Transport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from ..sansio._edits import Edit
    from ..sansio._entries import Outgoing
    from ..sansio._state import LifetimeState
    from ._store import LifetimeStore

__all__ = ["MetaOwner", "open_owner", "tenacity_retry"]


def tenacity_retry(policy: RetryPolicy) -> tenacity.AsyncRetrying:
    """The tenacity policy behind a :class:`~agent_meta.RetryPolicy` (retries only
    :class:`~agent_meta.FrameNotSentError`; the caller sets the runtime's ``sleep``)."""
    return tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.retries),
        wait=tenacity.wait_exponential(multiplier=policy.initial_backoff, max=policy.max_backoff),
        retry=tenacity.retry_if_exception_type(FrameNotSentError),
        reraise=True,
    )


@final
class MetaOwner(OwnerBase):
    """The single writer of one agent connection, on trio. Create it with :func:`open_owner`."""

    def __init__(
        self, transport: Transport, options: OwnerOptions, store: LifetimeStore | None
    ) -> None:
        super().__init__(options, store)
        self._transport = transport
        self._retry = tenacity_retry(options.retry).copy(sleep=trio.sleep)
        self._room = trio.lowlevel.ParkingLot()  # producers wait here for capacity
        self._progress = trio.lowlevel.ParkingLot()  # wait_flushed waits here
        self._idle_writer: trio.lowlevel.Task | None = None  # the writer, parked with no work
        self._direct = DirectWriter.for_transport(self._queue, transport, store)

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
        return await self._send_raw(frame, session_of(params))

    def send_notification_nowait(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Like :meth:`send_notification`; raises ``trio.WouldBlock`` instead of waiting."""
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
        await self._send_raw(build_response(request_id, result=result, error=error), None)

    def send_response_nowait(
        self, request_id: int | str | None, *, result: object = None, error: object = None
    ) -> None:
        """Like :meth:`send_response`; raises ``trio.WouldBlock`` instead of waiting."""
        self._raw_nowait(build_response(request_id, result=result, error=error))

    async def send_response_batch(self, responses: Sequence[Mapping[str, object]]) -> None:
        """Queue the answer to a JSON-RPC batch: one line holding every response given
        (``{"id": ..., "result": ...}`` or ``{"id": ..., "error": {...}}``), validated like
        :meth:`send_response`."""
        await self._send_raw(build_response_batch(responses), None)

    async def send_request(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Queue a request to the client (``session/request_permission``, ``fs/*`` ...).

        The owner only writes it, in FIFO order; matching the client's response to
        ``request_id`` is the connection's job (:meth:`~agent_meta.AgentConnection.request`).
        Returns ``False`` (nothing written) if its session's lifetime has ended.
        """
        return await self._send_raw(build_request(request_id, method, params), session_of(params))

    def send_request_nowait(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Like :meth:`send_request`; raises ``trio.WouldBlock`` instead of waiting."""
        return self._raw_nowait(build_request(request_id, method, params), session_of(params))

    # -- waiting -------------------------------------------------------------------------
    async def wait_flushed(self) -> None:
        """Wait until everything queued before this call has been written (or dropped).

        With a store, it also waits until every change accepted before the call is stored.
        Cancelling the wait changes nothing. Raises if the owner stops first.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        target = self._queue.flush_target()
        while not self._queue.is_flushed(target):
            self._check_stopped()
            await self._progress.park()
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def _submit(self, state: LifetimeState, edit: Edit) -> bool:
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self._try_submit(state, edit)
        while outcome is Outcome.FULL:
            await self._room.park()
            outcome = self._try_submit(state, edit)  # computed afresh from the state now (R8)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome is Outcome.ACCEPTED

    async def _send_raw(self, frame: bytes, session_id: str | None) -> bool:
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self._try_raw(frame, session_id)
        while outcome is Outcome.FULL:
            await self._room.park()
            outcome = self._try_raw(frame, session_id)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome is Outcome.ACCEPTED

    # -- driver hooks --------------------------------------------------------------------
    def _wake_writer(self) -> None:
        """Something was queued: write it now if the writer idles over a pipe, else wake it."""
        if self._idle_writer is None:
            return  # busy: it takes the new work before it parks again
        direct = self._direct
        if direct is not None and self._stopped is None and not direct.write_queued():
            return
        task = self._idle_writer
        self._idle_writer = None
        self._express = False
        trio.lowlevel.reschedule(task)

    def _wake_waiters(self) -> None:
        self._room.unpark_all()
        self._progress.unpark_all()

    def _would_block(self) -> NoReturn:
        raise trio.WouldBlock

    def _waiting_producers(self) -> int:
        return self._room.statistics().tasks_waiting

    def _direct_writes(self) -> int:
        return 0 if self._direct is None else self._direct.frames

    # -- the writer task -----------------------------------------------------------------
    async def _run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        queue = self._queue
        try:
            while True:
                action = queue.next_action()
                if self._room and queue.has_room():  # taking an entry may have freed room
                    self._room.unpark_all()
                if action is None:
                    self._progress.unpark_all()
                    if self._closing:
                        return
                    await self._park_writer()
                elif isinstance(action, StoreBatch):
                    await self._store_batch(action)
                else:
                    await self._write(action)
                    if self._progress:
                        self._progress.unpark_all()
        except BaseException as exc:
            self._stop(exc)
            raise

    async def _park_writer(self) -> None:
        """Park until :meth:`_wake_writer` (or a cancellation).

        Not a ParkingLot: the writer must stop counting as idle the moment it is woken *or
        cancelled* (the abort callback runs inside ``cancel()``), so that no direct write
        begins a frame that the writer might not live to finish.
        """
        self._idle_writer = trio.lowlevel.current_task()
        self._express = self._direct is not None  # calls now write their frames themselves

        def abort(_: Callable[[], object]) -> trio.lowlevel.Abort:
            self._idle_writer = None
            self._express = False
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def _store_batch(self, batch: StoreBatch) -> None:
        """Store one batch (persist before write); a failure stops the owner with StoreError."""
        assert self._store is not None
        try:
            await self._store.write(batch.saves, batch.deletes)
        except Exception as exc:
            raise self._store_failed(exc) from exc
        self._queue.stored(batch)
        self._progress.unpark_all()

    async def _write(self, out: Outgoing) -> None:
        """Write one frame: retried while the transport proves it unsent, a loss reported (and
        repaired), any other failure turned into :class:`~agent_meta.TransportBrokenError`."""
        try:
            try:
                await self._transport.send_frame(out.unsent())
            except FrameNotSentError:
                if not self._options.retry.retries:
                    raise  # no retries: reported as a loss below
                if not await self._retry_unsent(out):
                    return  # its lifetime ended during the backoff
        except (FrameNotSentError, FrameLostError) as exc:
            self._report_loss(out, exc)
            return
        except trio.Cancelled:
            raise
        except BaseException as exc:
            raise broken_transport(exc) from exc
        self._queue.written(out)

    async def _retry_unsent(self, out: Outgoing) -> bool:
        """Retry a frame the transport proved unsent. ``False`` if its lifetime ended meanwhile
        (the frame is dropped, R6); when the policy gives up, its last error propagates."""
        async for attempt in self._retry:
            with attempt:
                if not self._queue.still_wanted(out):
                    return False
                self._retried += 1  # the first attempt failed: each attempt here is a retry
                await self._transport.send_frame(out.unsent())
        return True

    def _begin_closing(self) -> None:
        """Refuse new frames; the writer returns once the queue is empty."""
        self._closing = True
        self._wake_writer()


@asynccontextmanager
async def open_owner(
    stream: trio.abc.SendStream | Transport,
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
) -> AsyncIterator[MetaOwner]:
    """Run a :class:`MetaOwner` writing to ``stream`` for the duration of the block.

    ``stream`` is any :class:`trio.abc.SendStream` (wrapped in a
    :class:`~agent_meta.StreamTransport`) or a :class:`~agent_meta.Transport`; the owner never
    closes it. ``options`` (an :class:`~agent_meta.OwnerOptions`) configures the rules.

    ``store``: a :class:`~agent_meta.LifetimeStore` (e.g. :class:`~agent_meta.SQLiteStore`)
    that keeps lifetimes across restarts. Every stored lifetime is loaded now; opening one of
    those session ids resumes it. Each change is stored before any frame carrying it is
    written; a store failure stops the owner with :class:`~agent_meta.StoreError` (raised from
    this block) before that frame. The owner never closes the store.

    On normal exit the block waits (up to ``options.drain_timeout`` seconds) for queued frames
    to be written (and stored), then stops. If the transport breaks for good or the store
    fails, the owner stops, the block is cancelled, and
    :class:`~agent_meta.TransportBrokenError` (or :class:`~agent_meta.StoreError`) is raised
    from it.
    """
    transport: Transport
    if isinstance(stream, trio.abc.SendStream):
        transport = StreamTransport(stream)
    elif isinstance(stream, Transport):
        transport = stream
    else:
        raise TypeError("stream must be a trio.abc.SendStream or an agent_meta.Transport")
    if options is None:
        options = OwnerOptions()
    elif not isinstance(options, OwnerOptions):
        raise TypeError(f"options must be an OwnerOptions, not {type(options).__name__}")
    owner = MetaOwner(transport, options, store)
    if store is not None:
        owner._stored = await store.load_lifetimes()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(owner._run_writer)
            yield owner
            owner._begin_closing()
            with trio.move_on_after(options.drain_timeout):
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
