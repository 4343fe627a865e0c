"""The asyncio driver: :func:`open_asyncio_owner` and :class:`AsyncioMetaOwner`.

The same owner as the trio driver (:mod:`._trio`), for agents on asyncio (the official ACP
Python SDK): every rule is decided by the sans-IO queue, and the writer loop, the handles, the
retry policy, the transport seam and when the idle writer is woken are shared (:mod:`._base`,
:mod:`._idle`). This module only parks and reschedules tasks with asyncio futures, runs the
writer as one asyncio task, and maps asyncio's cancellation onto the seam. It imports no trio.

Cancellation, in asyncio terms: an ``async`` method suspends only while it waits (for queue
room, or for the writer in :meth:`AsyncioMetaOwner.wait_flushed`), and a ``CancelledError``
raised there means nothing was done. A cancellation already requested of the calling task
(``Task.cancelling()``) is delivered when the call starts, before anything is done. Once the
effect is taken the call returns without awaiting anything, so no ``CancelledError`` can follow
it: a call that raised ``CancelledError`` did nothing, and a call that did something returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, final

from ..core._errors import OwnerClosedError
from ..sansio.queue._edits import ACCEPTED, FULL
from ._asyncio_stream import AsyncioStreamTransport
from ._base import OwnerBase, check_options
from ._failures import only_broken
from ._threadsafe import ThreadsafeOwner
from ._transport import Transport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..sansio._options import OwnerOptions
    from ..sansio.queue._edits import Edit
    from ..sansio.queue._state import LifetimeState
    from ..stores._store import LifetimeStore
    from ._idle import IdleWriter

__all__ = ["AsyncioMetaOwner", "open_asyncio_owner"]


@final
class _WaitingTasks:
    """Tasks parked until woken all at once: asyncio's counterpart of trio's ParkingLot."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    def __bool__(self) -> bool:
        return bool(self._futures)

    def __len__(self) -> int:
        return len(self._futures)

    async def park(self) -> None:
        """Wait until :meth:`unpark_all`. Cancelled, it leaves nothing behind."""
        future = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        try:
            await future
        finally:
            if future.cancelled():  # unless unpark_all already dropped it
                with contextlib.suppress(ValueError):
                    self._futures.remove(future)

    def unpark_all(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                future.set_result(None)


@final
class _Parked(asyncio.Future[None]):
    """What the parked writer task awaits. Its cancellation is told to the idle writer inside
    ``Task.cancel()`` (trio's abort callback), so that no direct write begins a frame that the
    writer might not live to finish."""

    __slots__ = ("_idle",)

    def __init__(self, idle: IdleWriter, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._idle = idle

    def cancel(self, msg: object = None) -> bool:
        if self.done():
            return False
        self._idle.unpark()
        return super().cancel(msg)


def _cancel_requested() -> bool:
    """Whether a cancellation was requested of the calling task. A call then yields once
    (``await asyncio.sleep(0)``) before it does anything, so that the cancellation is raised
    there (trio's ``checkpoint_if_cancelled``); otherwise it does not suspend at all."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@final
class AsyncioMetaOwner(OwnerBase):
    """The single writer of one agent connection, on asyncio. Create it with
    :func:`open_asyncio_owner`.

    The API is :class:`~agent_meta.MetaOwner`'s (lifetimes, ``send_*`` and their ``*_nowait``
    twins, :meth:`wait_flushed`, ``statistics()``); ``*_nowait`` calls raise
    :class:`asyncio.QueueFull` where the trio owner raises ``trio.WouldBlock``. Worker threads
    use :attr:`threadsafe`.
    """

    _cancelled = asyncio.CancelledError
    _would_block_error = asyncio.QueueFull
    _room: _WaitingTasks
    _progress: _WaitingTasks

    def __init__(
        self, transport: Transport, options: OwnerOptions, store: LifetimeStore | None
    ) -> None:
        super().__init__(
            options,
            store,
            transport,
            sleep=asyncio.sleep,
            room=_WaitingTasks(),
            progress=_WaitingTasks(),
            stream=transport if type(transport) is AsyncioStreamTransport else None,
        )
        self._loop = asyncio.get_running_loop()
        self._parked: _Parked | None = None  # the writer task, while parked
        self._threadsafe = ThreadsafeOwner(self, self._loop)

    @property
    def threadsafe(self) -> ThreadsafeOwner:
        """This owner's calls for other threads (:class:`~agent_meta.ThreadsafeOwner`): each
        returns a :class:`concurrent.futures.Future`; usable from any thread."""
        return self._threadsafe

    # -- waiting -------------------------------------------------------------------------
    async def wait_flushed(self) -> None:
        """Wait until everything queued before this call has been written (or dropped).

        With a store, it also waits until every change accepted before the call is stored.
        Cancelling the wait changes nothing. Raises if the owner stops first.
        """
        if _cancel_requested():
            await asyncio.sleep(0)
        target = self._queue.flush_target()
        while not self._queue.is_flushed(target):
            self._check_stopped()
            await self._progress.park()

    async def submit_edit(self, state: LifetimeState, edit: Edit) -> bool:
        task = asyncio.current_task()  # _cancel_requested(), written out: every publication
        if task is not None and task.cancelling():  # passes here
            await asyncio.sleep(0)  # where that cancellation is raised, before any effect
        outcome = self._try_submit(state, edit)
        while outcome is FULL:
            await self._room.park()
            outcome = self._try_submit(state, edit)  # computed afresh from the state now (R8)
        if outcome is ACCEPTED and self._store is not None:
            await self._durable(state)
        return outcome is ACCEPTED  # nothing awaited since the effect but the store

    async def _durable(self, state: LifetimeState) -> None:
        """Wait until what was just accepted is stored (it is accepted only then). It has taken
        effect, so a cancellation waits for the store and is raised after."""
        waiting = asyncio.ensure_future(self._wait_durable(state, self._queue.durable_target()))
        cancelled = False
        while True:
            try:
                await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if waiting.done():
                    raise
                cancelled = True
                continue
            break
        if cancelled:
            raise asyncio.CancelledError

    async def send_encoded(self, frame: bytes, session_id: str | None) -> bool:
        if _cancel_requested():
            await asyncio.sleep(0)
        outcome = self._try_raw(frame, session_id)
        while outcome is FULL:
            await self._room.park()
            outcome = self._try_raw(frame, session_id)
        return outcome is ACCEPTED

    # -- the writer task -----------------------------------------------------------------
    async def _park_writer(self) -> None:
        """Park until :meth:`_reschedule_writer` (or a cancellation)."""
        parked = _Parked(self._idle, loop=self._loop)
        self._parked = parked
        try:
            await parked
        finally:
            self._parked = None

    def _reschedule_writer(self) -> None:
        parked = self._parked
        assert parked is not None
        self._parked = None
        parked.set_result(None)

    async def _finish(
        self, drain_timeout: float, writer: asyncio.Task[None], server: asyncio.Task[None]
    ) -> None:
        """Leaving the block normally: run the thread calls already made, drain, stop."""
        try:
            async with asyncio.timeout(None if math.isinf(drain_timeout) else drain_timeout):
                self._threadsafe._close()  # its server runs what it holds, then returns
                await server
                self._begin_closing()
                await self.wait_flushed()
        except TimeoutError:
            pass  # what is still queued is not written
        self._stop(OwnerClosedError("the owner was closed"))
        writer.cancel()


@asynccontextmanager
async def open_asyncio_owner(
    output: asyncio.StreamWriter | Transport,
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
) -> AsyncIterator[AsyncioMetaOwner]:
    """Run an :class:`AsyncioMetaOwner` writing to ``output`` for the duration of the block, on
    the running asyncio loop.

    ``output`` is an :class:`asyncio.StreamWriter` (wrapped in an
    ``AsyncioStreamTransport``) or a :class:`~agent_meta.Transport` whose
    ``send_frame`` is awaited on this loop; the owner never closes it. ``options`` and
    ``store`` are those of :func:`~agent_meta.open_owner` (a store's ``write`` is awaited on
    this loop; :class:`~agent_meta.SQLiteStore` runs on either runtime).

    On normal exit the block runs the thread-safe calls already made, then waits (up to
    ``options.drain_timeout`` seconds) for queued frames to be written (and stored), then
    stops. If the transport breaks for good or the store fails, the owner stops, the block's
    task is cancelled, and :class:`~agent_meta.TransportBrokenError` (or
    :class:`~agent_meta.StoreError`) is raised from the block. Other errors leave it in an
    :class:`ExceptionGroup`, as with the trio owner.
    """
    transport: Transport
    if isinstance(output, asyncio.StreamWriter):
        transport = AsyncioStreamTransport(output)
    elif isinstance(output, Transport):
        transport = output
    else:
        raise TypeError("expected an asyncio.StreamWriter or an agent_meta.Transport")
    options = check_options(options)
    owner = AsyncioMetaOwner(transport, options, store)
    try:
        async with asyncio.TaskGroup() as tasks:
            writer = tasks.create_task(owner._writer_loop())
            server = tasks.create_task(owner._threadsafe._serve())
            await asyncio.sleep(0)  # both start: the writer parks, idle, as trio's start() does
            yield owner
            await owner._finish(options.drain_timeout, writer, server)
    except BaseExceptionGroup as group:
        broken = only_broken(group, asyncio.CancelledError)
        if broken is None:
            raise
        raise broken from None
    finally:
        owner._closing = True
        owner._stop(OwnerClosedError("the owner was closed"))
        owner._threadsafe._abort()
