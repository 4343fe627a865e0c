"""Where the writer stands in one send queue, sans I/O: what "flushed" means (R2).

Every entry appended gets the next position. The :class:`FlushCursor` keeps the newest position,
the one through which everything is written (or dropped), and whether a frame was handed out
and not yet reported: such a frame may be half on the wire, so nothing counts as flushed, and
nothing else is handed out, until it is reported. An *express* frame (a publication rendered at
once for a direct write, without a queue entry) holds its own position until it is reported.
"""

from __future__ import annotations

__all__ = ["FlushCursor"]


class FlushCursor:
    """The positions of one queue."""

    __slots__ = ("appended", "express", "finished", "unreported")

    def __init__(self) -> None:
        self.appended = 0
        """The position of the newest entry."""
        self.finished = 0
        """Every entry up to here is written or dropped."""
        self.express = 0
        """The position of an express frame not yet reported; 0: none."""
        self.unreported = False
        """A frame was handed out and not yet reported (written, lost, dropped)."""

    def append(self) -> int:
        """The position of an entry appended now."""
        self.appended += 1
        return self.appended

    def append_express(self) -> None:
        """An express frame takes the next position until it is reported."""
        self.appended += 1
        self.express = self.appended

    def reported(self, held: bool) -> None:
        """The frame handed out is reported; ``held``: part of it is still to be written."""
        self.unreported = False
        if self.express and not held:  # the express frame is done
            if self.express > self.finished:
                self.finished = self.express
            self.express = 0

    def finish(self, position: int, queue_empty: bool) -> None:
        """The entry at ``position`` is written or dropped; with nothing queued after it (and
        no express frame out), everything appended is."""
        if position > self.finished:
            self.finished = position
        if queue_empty and not self.express:
            self.finished = self.appended

    def reached(self, position: int, queue_empty: bool) -> bool:
        """Whether everything up to ``position`` is written (or dropped)."""
        return self.finished >= position or queue_empty
