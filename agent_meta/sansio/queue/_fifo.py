"""The entries of one send queue, in order, with what they weigh (R2, R3).

:class:`EntryFifo` keeps the queued entries, how many count against the queue's capacity
(publications that could pile up without bound; a merge into an open entry does not), and how
many frames they will be written as (a clear followed by members is two, a resync one or two),
with the peak of that number.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._entries import Entry
    from ._state import LifetimeState

__all__ = ["EntryFifo"]


class EntryFifo:
    """Queued entries, oldest first."""

    __slots__ = ("counted", "entries", "frames", "peak_frames")

    def __init__(self) -> None:
        self.entries: collections.deque[Entry] = collections.deque()
        """The queued entries, oldest first (read-only outside this class; hot paths test it
        for emptiness directly)."""
        self.counted = 0
        """Queued entries that count against capacity."""
        self.frames = 0
        """Frames the queued entries will be written as, at most."""
        self.peak_frames = 0
        """The most frames ever queued at once."""

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def append(self, entry: Entry) -> None:
        """Queue ``entry`` (its position already given) after every other."""
        self.entries.append(entry)
        if entry.counted:
            self.counted += 1
        self.count_frames(entry.frames)

    def take(self) -> Entry:
        """The oldest entry, out of the queue (the writer takes it)."""
        entry = self.entries.popleft()
        self._forget(entry)
        return entry

    def drop_lifetime(self, state: LifetimeState) -> int:
        """Remove every entry of ``state`` (its lifetime ended); the frames they held."""
        kept: collections.deque[Entry] = collections.deque()
        dropped = 0
        for entry in self.entries:
            if entry.lifetime is state:
                dropped += entry.frames
                self._forget(entry)
            else:
                kept.append(entry)
        self.entries = kept
        return dropped

    def count_frames(self, delta: int) -> None:
        """The queued frames changed by ``delta`` (a merge may add one); the peak follows."""
        self.frames += delta
        if self.frames > self.peak_frames:
            self.peak_frames = self.frames

    def _forget(self, entry: Entry) -> None:
        """Bookkeeping when an entry leaves the queue (taken or dropped)."""
        if entry.counted:
            self.counted -= 1
        self.frames -= entry.frames
