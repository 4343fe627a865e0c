"""The trio driver: :func:`open_owner` and :class:`MetaOwner`, the flagship runtime.

Everything -- session-info publications, resyncs, responses, requests, other notifications --
is *queued* through the owner, in FIFO order (R2); the sans-IO send queue decides what goes on
the wire. This module only runs the writer task (frames to the transport, batches to the store),
retries what the transport proves unsent, and parks and reschedules tasks. Over a pipe, while
the writer task idles, the call that queued a frame may write it itself (:mod:`._direct`; when,
:mod:`._idle` decides).

Cancellation: every ``async`` method either completes its whole effect or, if cancelled before
it could, has no effect at all. Methods that must wait (for queue room, with coalescing off, or
for frames that count against capacity) can be cancelled while waiting: nothing is then stored
or queued. Once an operation has taken effect, a later cancellation does not undo it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, final

import trio

from ..core._errors import OwnerClosedError
from ..sansio.queue._edits import ACCEPTED, FULL
from ._base import OwnerBase, check_options
from ._failures import only_broken
from ._transport import Transport
from ._trio_stream import StreamTransport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from ..sansio._options import OwnerOptions
    from ..sansio.queue._edits import Edit
    from ..sansio.queue._state import LifetimeState
    from ..stores._store import LifetimeStore

__all__ = ["MetaOwner", "open_owner"]


@final
class MetaOwner(OwnerBase):
    """The single writer of one agent connection, on trio. Create it with :func:`open_owner`."""

    _cancelled = trio.Cancelled
    _would_block_error = trio.WouldBlock
    _room: trio.lowlevel.ParkingLot
    _progress: trio.lowlevel.ParkingLot

    def __init__(
        self, transport: Transport, options: OwnerOptions, store: LifetimeStore | None
    ) -> None:
        super().__init__(
            options,
            store,
            transport,
            sleep=trio.sleep,
            room=trio.lowlevel.ParkingLot(),
            progress=trio.lowlevel.ParkingLot(),
            stream=transport if type(transport) is StreamTransport else None,
        )
        self._parked: trio.lowlevel.Task | None = None  # the writer task, while parked

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

    async def submit_edit(self, state: LifetimeState, edit: Edit) -> bool:
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self._try_submit(state, edit)
        while outcome is FULL:
            await self._room.park()
            outcome = self._try_submit(state, edit)  # computed afresh from the state now (R8)
        if outcome is ACCEPTED and self._store is not None:
            # Accepted once stored: taken effect, so a cancellation waits for the store.
            with trio.CancelScope(shield=True):
                await self._wait_durable(state, self._queue.durable_target())
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome is ACCEPTED

    async def send_encoded(self, frame: bytes, session_id: str | None) -> bool:
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self._try_raw(frame, session_id)
        while outcome is FULL:
            await self._room.park()
            outcome = self._try_raw(frame, session_id)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome is ACCEPTED

    # -- the writer task -----------------------------------------------------------------
    async def _run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        await self._writer_loop()

    async def _park_writer(self) -> None:
        """Park until :meth:`_reschedule_writer` (or a cancellation).

        Not a ParkingLot: the writer must stop counting as idle the moment it is *cancelled*
        (the abort callback runs inside ``cancel()``), so that no direct write begins a frame
        that the writer might not live to finish.
        """
        self._parked = trio.lowlevel.current_task()

        def abort(_: Callable[[], object]) -> trio.lowlevel.Abort:
            self._parked = None
            self._idle.unpark()
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _reschedule_writer(self) -> None:
        task = self._parked
        assert task is not None
        self._parked = None
        trio.lowlevel.reschedule(task)


@asynccontextmanager
async def open_owner(
    output: trio.abc.SendStream | Transport,
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
) -> AsyncIterator[MetaOwner]:
    """Run a :class:`MetaOwner` writing to ``output`` for the duration of the block.

    ``output`` is any :class:`trio.abc.SendStream` (wrapped in a
    ``StreamTransport``) or a :class:`~agent_meta.Transport`; the owner never
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
    if isinstance(output, trio.abc.SendStream):
        transport = StreamTransport(output)
    elif isinstance(output, Transport):
        transport = output
    else:
        raise TypeError("output must be a trio.abc.SendStream or an agent_meta.Transport")
    options = check_options(options)
    owner = MetaOwner(transport, options, store)
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
        broken = only_broken(group, trio.Cancelled)
        if broken is None:
            raise
        raise broken from None
    finally:
        owner._closing = True
        owner._stop(OwnerClosedError("the owner was closed"))
