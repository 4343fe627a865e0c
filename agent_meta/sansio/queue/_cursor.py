"""Positions in one send queue, sans I/O: what "flushed" means (R2).

Every entry appended gets the next position. The :class:`FlushCursor` keeps the newest position
and the one through which everything is written (or dropped); a caller of ``wait_flushed``
waits until the position that was newest when it called is reached. (A frame rendered at once
for a direct write, without an entry, needs no position: nothing counts as flushed while any
frame is held or out.)
"""

from __future__ import annotations

__all__ = ["FlushCursor"]


class FlushCursor:
    """The positions of one queue. Only the send queue moves it."""

    __slots__ = ("appended", "finished")

    def __init__(self) -> None:
        self.appended = 0
        """The position of the newest entry."""
        self.finished = 0
        """Every entry up to here is written or dropped."""

    def append(self) -> int:
        """The position of an entry appended now."""
        self.appended += 1
        return self.appended

    def finish(self, position: int, queue_empty: bool) -> None:
        """What was at ``position`` is written or dropped; with nothing queued after it,
        everything appended is."""
        if queue_empty:
            self.finished = self.appended
        elif position > self.finished:
            self.finished = position

    def reached(self, position: int, queue_empty: bool) -> bool:
        """Whether everything up to ``position`` is written (or dropped)."""
        return self.finished >= position or queue_empty
