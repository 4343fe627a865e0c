"""The owner's writer: what its writer task does with what the send queue hands out.

A :class:`Writer` writes frames to the transport and stores batches in the store, and reports
each outcome to the queue (R2, R11, persist before write). It owns what writing needs and
nothing else: the transport, the retry policy (tenacity, sleeping with the runtime's ``sleep``)
and its count of retries, and the store with the owner's name in it. How a failed write is
classified is decided here, once, for every driver: the transport seam's two safe failures
(:mod:`agent_meta.owner._transport`), the runtime's cancellation, which passes through, and
anything else, which breaks the transport.

The task that runs it (ask the queue, carry the action out, wake the tasks waiting, park when
idle) is the owner's: ``OwnerBase._writer_loop``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, final

from ..core._errors import AgentMetaError, FrameLostError, FrameNotSentError
from ._failures import broken_transport, store_failed
from ._retry import tenacity_retry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import tenacity

    from ..sansio._options import RetryPolicy
    from ..sansio.queue._entries import StoreBatch
    from ..sansio.queue._queue import SendQueue
    from ..sansio.queue._state import LifetimeState
    from ..stores._store import LifetimeStore
    from ._transport import Transport

__all__ = ["Writer"]

logger = logging.getLogger("agent_meta")


@final
class Writer:
    """Writes and stores what a send queue hands out, for one owner (either runtime).

    ``cancelled`` is the runtime's cancellation exception (``trio.Cancelled``,
    ``asyncio.CancelledError``): a write it interrupts propagates it, and the transport says
    whether that broke the stream.
    """

    __slots__ = (
        "_cancelled",
        "_holder",
        "_queue",
        "_retried",
        "_retries",
        "_retry",
        "_retry_policy",
        "_sleep",
        "_store",
        "_transport",
    )

    def __init__(
        self,
        queue: SendQueue,
        transport: Transport,
        retry: RetryPolicy,
        *,
        sleep: Callable[[float], Awaitable[None]],
        cancelled: type[BaseException],
        store: LifetimeStore | None,
        holder: str,
    ) -> None:
        self._queue = queue
        self._transport = transport
        self._retry_policy = retry
        self._sleep = sleep
        self._retry: tenacity.AsyncRetrying | None = None  # built at the first retry
        self._retries = retry.retries
        self._cancelled = cancelled
        self._store = store
        self._holder = holder
        self._retried = 0

    @property
    def retried(self) -> int:
        """Retries of frames the transport proved unsent, so far."""
        return self._retried

    async def write(self, data: bytes) -> None:
        """Write what the queue handed out: retried while the transport proves it unsent, a
        loss reported (and repaired), any other failure turned into
        :class:`~agent_meta.TransportBrokenError` (R11; the runtime's cancellation passes
        through)."""
        try:
            try:
                await self._transport.send_frame(data)
            except FrameNotSentError:
                if not self._retries:
                    raise  # no retries: reported as a loss below
                if not await self._retry_unsent(data):
                    return  # its lifetime was taken over during the backoff
        except (FrameNotSentError, FrameLostError) as exc:
            self._report_loss(exc)
            return
        except self._cancelled:
            raise
        except BaseException as exc:
            raise broken_transport(exc) from exc
        self._queue.written()

    async def store(self, batch: StoreBatch) -> list[LifetimeState]:
        """Store one batch (persist before write); a failure raises the
        :class:`~agent_meta.StoreError` that stops the owner. Returns the lifetimes that end
        here because another holder took them over (the store reported them stale)."""
        assert self._store is not None
        try:
            stale = await self._store.write(batch.saves, batch.deletes, holder=self._holder)
        except Exception as exc:
            raise store_failed(exc, self._store.location) from exc
        return self._queue.stored(batch, frozenset(stale))

    async def _retry_unsent(self, data: bytes) -> bool:
        """Retry a frame the transport proved unsent. ``False`` if another holder took its
        lifetime over meanwhile (the frame is dropped; a close does not drop it, R6); when
        the policy gives up the last error propagates."""
        if self._retry is None:
            self._retry = tenacity_retry(self._retry_policy, self._sleep)
        async for attempt in self._retry:
            with attempt:
                if not self._queue.still_wanted():
                    return False
                self._retried += 1  # the first attempt failed: each attempt here is a retry
                await self._transport.send_frame(data)
        return True

    def _report_loss(self, exc: AgentMetaError) -> None:
        session_id = self._queue.lost()
        logger.warning(
            "agent_meta: a frame%s was not delivered (%s); %s",
            f" of session {session_id!r}" if session_id is not None else "",
            exc,
            "its session will be resynced" if session_id is not None else "it is dropped",
        )
