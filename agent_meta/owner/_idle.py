"""The idle writer: whether the writer task is parked, and what queuing work does about it.

Every decision about the parked writer task is taken here, once, for every driver: when it
parks with nothing to do, calls may write their frames themselves (direct writes,
:mod:`._direct`) and the queue may render a publication without an entry (``express``); a call
that queued work either writes it directly or says the writer must be woken; no direct write
begins once the owner has stopped, or once the parked writer is cancelled (it might not live
to finish a frame the pipe took only in part). A driver only parks the task, reschedules it
when :meth:`IdleWriter.wake` says so, and reports a cancellation of the parked task at once
(:meth:`IdleWriter.unpark`), each in its runtime's way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ._direct import DirectWriter

__all__ = ["IdleWriter"]


@final
class IdleWriter:
    """The parked writer task's state, for one owner (either runtime)."""

    __slots__ = ("_direct", "_stopped", "express", "parked")

    def __init__(self, direct: DirectWriter | None) -> None:
        self._direct = direct
        self._stopped = False
        self.parked = False
        """The writer task is parked with nothing to do."""
        self.express = False
        """A call that queues a frame now writes it itself: the queue may render a publication
        at once, with no entry (``SendQueue.submit``)."""

    def park(self) -> None:
        """The writer task is about to park with nothing to do."""
        self.parked = True
        self.express = self._direct is not None and not self._stopped

    def wake(self) -> bool:
        """Work was queued or changed. ``True``: the driver must reschedule the parked writer
        (which counts as woken from here on). ``False``: the writer is busy (it takes the work
        before it parks again), or the work was written here, in the calling task."""
        if not self.parked:
            return False
        direct = self._direct
        if direct is not None and not self._stopped and not direct.write_queued():
            return False  # written whole; the writer stays parked
        self.parked = False
        self.express = False
        return True

    def unpark(self) -> None:
        """The parked writer was cancelled: no direct write may begin a frame it could not
        finish, and nothing is left for the driver to reschedule."""
        self.parked = False
        self.express = False

    def stop(self) -> None:
        """The owner stopped: no direct write begins from now on."""
        self._stopped = True
