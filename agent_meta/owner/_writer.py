"""The writer loop every owner runs, whatever its runtime: :class:`WriterLoop`.

One task per owner asks the sans-IO queue what to do next (write a frame, store a batch first,
or park), does it through the transport and the store, and reports how it went (R2, R11). It
only awaits the transport, the store, the retry policy and the driver's hooks, so it runs on
trio and on asyncio alike. :class:`~agent_meta.owner._base.OwnerBase` is a ``WriterLoop``.
"""

from __future__ import annotations

import abc
import logging
from typing import TYPE_CHECKING, ClassVar, Protocol

from ..core._errors import (
    AgentMetaError,
    FrameLostError,
    FrameNotSentError,
    StoreError,
    TransportBrokenError,
)
from ..sansio._entries import StoreBatch

if TYPE_CHECKING:
    import tenacity

    from ..sansio._entries import Outgoing
    from ..sansio._options import OwnerOptions
    from ..sansio._queue import SendQueue
    from ..sansio._state import LifetimeState
    from ..stores._store import LifetimeStore
    from ._transport import Transport

__all__ = ["WaitingTasks", "WriterLoop", "broken_transport"]

logger = logging.getLogger("agent_meta")


class WaitingTasks(Protocol):
    """Tasks parked until woken all at once: a ``trio.lowlevel.ParkingLot``, or the asyncio
    driver's equivalent. True while any task waits."""

    def __bool__(self) -> bool: ...

    async def park(self) -> None: ...

    def unpark_all(self) -> object: ...


class WriterLoop(abc.ABC):
    """The writer task of an owner, and how each failure is classified (R11)."""

    _queue: SendQueue
    _options: OwnerOptions
    _store: LifetimeStore | None
    _transport: Transport
    _retry: tenacity.AsyncRetrying
    _cancelled: ClassVar[type[BaseException]]
    """The runtime's cancellation exception (``trio.Cancelled``, ``asyncio.CancelledError``):
    a write it interrupts does not break the transport."""
    _room: WaitingTasks
    _progress: WaitingTasks
    _closing: bool
    _retried: int
    holder: str

    @abc.abstractmethod
    async def _park_writer(self) -> None:
        """Park the writer until something is queued (or a cancellation)."""

    @abc.abstractmethod
    def _stop(self, exc: BaseException) -> None:
        """Stop the owner with ``exc``."""

    async def _writer_loop(self) -> None:
        """The writer task: ask the queue what to do next, do it, report it; park when idle.

        Runs until the owner closes (and the queue is empty) or fails; a failure stops the
        owner and propagates.
        """
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

    async def _store_batch(self, batch: StoreBatch) -> None:
        """Store one batch (persist before write); a failure stops the owner with StoreError.
        Lifetimes another holder took over end here (the store reports them stale)."""
        assert self._store is not None
        try:
            stale = await self._store.write(batch.saves, batch.deletes, holder=self.holder)
        except Exception as exc:
            raise self._store_failed(exc) from exc
        taken = self._queue.stored(batch, frozenset(stale))
        if taken:
            self._taken_over(taken)
        self._progress.unpark_all()

    @abc.abstractmethod
    def _taken_over(self, states: list[LifetimeState]) -> None:
        """Another holder took these lifetimes over: forget their handles."""

    async def _write(self, out: Outgoing) -> None:
        """Write one frame: retried while the transport proves it unsent, a loss reported (and
        repaired), any other failure turned into :class:`~agent_meta.TransportBrokenError`
        (R11; the runtime's cancellation passes through)."""
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
        except self._cancelled:
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

    def _report_loss(self, out: Outgoing, exc: AgentMetaError) -> None:
        lifetime = out.lifetime
        logger.warning(
            "agent_meta: a frame%s was not delivered (%s); %s",
            f" of session {lifetime.session_id!r}" if lifetime is not None else "",
            exc,
            "its session will be resynced" if lifetime is not None else "it is dropped",
        )
        self._queue.lost(out)

    def _store_failed(self, exc: Exception) -> StoreError:
        """A store write failed with ``exc``: the error that stops the owner (R11)."""
        if isinstance(exc, StoreError):
            return exc
        location = "?" if self._store is None else self._store.location
        error = StoreError(location, f"saving lifetimes failed: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error


def broken_transport(exc: BaseException) -> TransportBrokenError:
    """The error that stops the owner when a write failed part-way (any failure other than
    the two the transport seam defines as safe, see :mod:`agent_meta.owner._transport`)."""
    if isinstance(exc, TransportBrokenError):
        return exc
    error = TransportBrokenError(
        f"writing a frame failed part-way ({type(exc).__name__}: {exc}); the stream can "
        "no longer be trusted"
    )
    error.__cause__ = exc
    return error
