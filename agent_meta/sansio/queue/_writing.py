"""What the writer of one send queue is in the middle of, sans I/O (R2).

The writer takes one entry at a time and hands its frames out one by one. :class:`Writing`
keeps that entry and its frames still to come, and *the frame*: the one frame the writer has
out (handed out, not reported yet) or that waits to be handed out next (written in part, or
waiting for its state to be stored, or rendered at once for a direct write). There is never
more than one, so a line is never cut by another, and the reports (written, lost, dropped)
need not say which frame they are about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._entries import Entry
    from ._state import LifetimeState

__all__ = ["Writing"]


class Writing:
    """The entry being written, and the one frame held or out. Only the send queue calls it."""

    __slots__ = ("entry", "frame", "frames", "lifetime", "out", "sent", "stored_by")

    def __init__(self) -> None:
        self.entry: Entry | None = None
        """The entry being written (``None``: none)."""
        self.frames: Iterator[bytes] | None = None
        """Its frames still to hand out (``None`` exactly when there is no entry)."""
        self.frame: bytes | None = None
        """The frame held or out (``None``: none)."""
        self.lifetime: LifetimeState | None = None
        """The lifetime :attr:`frame` belongs to (``None`` for other frames)."""
        self.sent = 0
        """How much of :attr:`frame` is written already (a write the pipe took in part)."""
        self.stored_by = 0
        """The store batch that must be stored before :attr:`frame` is written: the one
        holding every change made up to its rendering (persist before write), no later one."""
        self.out = False
        """:attr:`frame` is handed out and not reported yet: it may be half on the wire."""

    @property
    def idle(self) -> bool:
        """No entry being written, no frame held or out."""
        return self.frame is None and self.frames is None

    def begin(self, entry: Entry, frames: Iterator[bytes]) -> None:
        """Start writing ``entry``, whose frames are ``frames``."""
        self.entry = entry
        self.frames = frames

    def next_frame(self, stored_by: int) -> bool:
        """Hold the next frame of the entry being written, to be written once store batch
        ``stored_by`` is stored; ``False`` when there is none (no entry, its frames are all
        out, or another holder took its lifetime over)."""
        if self.frame is not None:
            raise RuntimeError("report the frame handed out before taking the next one")
        frames = self.frames
        if frames is None:
            return False
        entry = self.entry
        assert entry is not None
        lifetime = entry.lifetime
        if lifetime is not None and lifetime.books.taken_over:
            return False
        frame = next(frames, None)
        if frame is None:
            return False
        self.frame = frame
        self.lifetime = lifetime
        self.stored_by = stored_by
        return True

    def finish(self) -> Entry | None:
        """The entry being written is done (written, dropped, or cut short by a loss); the
        entry it was."""
        entry = self.entry
        self.entry = None
        self.frames = None
        return entry

    def hold_express(self, frame: bytes, lifetime: LifetimeState, stored_by: int) -> None:
        """Hold ``frame``, rendered at once without an entry (the queue is idle: nothing
        precedes it), to be written once store batch ``stored_by`` is stored."""
        if self.frame is not None or self.frames is not None:
            raise RuntimeError("a frame is rendered at once only while nothing is being written")
        self.frame = frame
        self.lifetime = lifetime
        self.stored_by = stored_by

    def hand_out(self) -> bytes:
        """Hand the frame out: what of it is still to be written."""
        frame = self.frame
        assert frame is not None
        assert not self.out
        self.out = True
        return frame[self.sent :] if self.sent else frame

    def wrote_part(self, sent: int) -> None:
        """The frame out went out in part, ``sent`` more bytes of it: hold the rest."""
        assert self.out
        self.out = False
        self.sent += sent

    def release(self) -> None:
        """The frame is reported (written whole, lost or dropped): none is held or out."""
        self.frame = None
        self.lifetime = None
        self.out = False
        self.sent = 0
        self.stored_by = 0

    def end_lifetime(self, state: LifetimeState) -> Entry | None:
        """``state`` was taken over: drop the rest of its entry being written (a frame already
        taken is still finished, or dropped unbegun by the queue). The entry dropped that way,
        if any."""
        entry = self.entry
        if entry is None or entry.lifetime is not state:
            return None
        if self.frame is not None:
            self.frames = iter(())  # its frame taken is finished, nothing after
            return None
        return self.finish()
