"""What the writer of one send queue is in the middle of, sans I/O (R2).

The writer takes one entry at a time from the :class:`~agent_meta.sansio._fifo.EntryFifo` and
hands its frames out one by one, as the :class:`~agent_meta.sansio._render.FrameRenderer`
renders them. A frame written in part is *held*: the rest goes out before anything else, so a
line is never cut by another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._entries import Outgoing

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._cursor import FlushCursor
    from ._entries import Entry
    from ._fifo import EntryFifo
    from ._render import FrameRenderer
    from ._state import LifetimeState

__all__ = ["Writing"]


class Writing:
    """The entry being written (its remaining frames) and a frame held in part."""

    __slots__ = ("_fifo", "_renderer", "cursor", "entry", "frames", "held")

    def __init__(self, fifo: EntryFifo, renderer: FrameRenderer, cursor: FlushCursor) -> None:
        self._fifo = fifo
        self._renderer = renderer
        self.cursor = cursor
        """The queue's positions (shared)."""
        self.frames: Iterator[bytes] | None = None
        """The frames of the entry being written still to hand out (``None``: no entry)."""
        self.entry: Entry | None = None
        self.held: Outgoing | None = None
        """A frame to hand out before anything else (written in part, or rendered at once)."""

    @property
    def idle(self) -> bool:
        """Nothing queued, held or being written."""
        return (
            self.frames is None
            and self.held is None
            and not self._fifo.entries
            and not self.cursor.unreported
        )

    @property
    def busy(self) -> bool:
        """An entry is being written."""
        return self.frames is not None

    def next_frame(self) -> Outgoing | None:
        """The next frame of the entry being written, or of the next entry; ``None`` when
        nothing is queued. The frame is unreported until the queue hears how it went."""
        cursor = self.cursor
        if cursor.unreported:
            raise RuntimeError("report the last frame handed out before taking the next one")
        while True:
            frames = self.frames
            if frames is not None:
                entry = self.entry
                assert entry is not None
                lifetime = entry.lifetime
                if lifetime is not None and lifetime.closed:
                    self.finish()
                    continue
                frame = next(frames, None)
                if frame is not None:
                    cursor.unreported = True
                    return Outgoing(frame, lifetime)
                self.finish()
                continue
            if not self._fifo.entries:
                return None
            entry = self._fifo.take()
            self.entry = entry
            self.frames = self._renderer.render(entry)

    def express(self, frame: bytes, state: LifetimeState, stored_by: int) -> None:
        """Hold ``frame`` (of ``state``, whose changes are stored by batch ``stored_by``) to be
        handed out next, without a queue entry: the writer is idle, nothing precedes it."""
        cursor = self.cursor
        cursor.appended += 1  # the express frame holds the next position until reported
        cursor.express = cursor.appended
        held = self.held = Outgoing(frame, state)
        held.stored_by = stored_by

    def finish(self) -> None:
        """The entry being written is done (written, dropped, or cut short by a loss)."""
        entry = self.entry
        self.frames = None
        self.entry = None
        self.cursor.finish(0 if entry is None else entry.pos, not self._fifo.entries)

    def end_lifetime(self, state: LifetimeState) -> int:
        """``state`` ended: the rest of its entry being written is dropped (a frame already
        handed out is still finished and reported). The frames dropped (0 or 1)."""
        entry = self.entry
        if entry is None or entry.lifetime is not state:
            return 0
        if self.cursor.unreported:
            self.frames = iter(())  # its frame being written is finished, nothing after
            return 0
        self.finish()
        return 1
