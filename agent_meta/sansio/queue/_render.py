"""Turning a queue entry into frames when the writer takes it (R3, R4, R9, R10, R11).

Everything but a resync is rendered at once; a resync's snapshot only once its ``null`` frame
is written, so the snapshot is as new as it can be (R4). A snapshot (a resync's, a repair's, or
any v1 merged frame, which carries the whole object) *absorbs* the publications queued behind
it: they send nothing more, or the client would go back through older states. With coalescing
off a v1 publication's whole object is rendered when it is published instead
(``InfoEntry.frame``): every publication is then a frame, each showing its own step, and only a
resync or a repair absorbs. Each lifetime
counts the snapshots rendered of it (``LifetimeState.books.snapshots``), and each publication entry
remembers the count it was queued under, so an entry queued before the latest snapshot is
known to be carried by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._entries import InfoEntry, RawEntry
from ._info_frames import clear_frame, info_frame, info_frames, snapshot_frame

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .._modes import WireMode
    from ._entries import Entry
    from ._state import LifetimeState

__all__ = ["FrameRenderer"]


class FrameRenderer:
    """Renders the entries of one queue; ``mode`` follows the queue's protocol version."""

    __slots__ = ("absorbed", "mode", "repairing", "repairs", "resyncs")

    def __init__(self, mode: WireMode) -> None:
        self.mode = mode
        self.repairing: set[LifetimeState] = set()
        """Lifetimes that lost a frame and whose repair is not written yet (R11; read-only
        outside this class)."""
        self.resyncs = 0
        """Resyncs rendered (requested ones and repairs)."""
        self.repairs = 0
        """Repairs rendered."""
        self.absorbed = 0
        """Publication entries a snapshot already carried when the writer took them."""

    def repair_pending(self, state: LifetimeState) -> None:
        """``state`` lost a frame: its repair is pending until written (R11)."""
        self.repairing.add(state)

    def forget(self, state: LifetimeState) -> None:
        """``state`` ended: no repair of it is pending any more."""
        self.repairing.discard(state)

    def repair_due(self, entry: Entry) -> bool:
        """Whether writing ``entry`` begins with the repair of its lifetime (R11): it lost a
        frame, and the entry is not one a snapshot already carries."""
        if isinstance(entry, RawEntry) or not entry.lifetime.books.needs_repair:
            return False
        return not (isinstance(entry, InfoEntry) and _absorbed(entry))

    def render(self, entry: Entry, repair: bool) -> Iterator[bytes]:
        """The frames of an entry the writer takes; ``repair``: they begin with the repair of
        its lifetime (see :meth:`repair_due`)."""
        if repair:
            self.repairs += 1
        if isinstance(entry, InfoEntry):
            state = entry.lifetime
            if _absorbed(entry):
                return iter(self._absorbed_frames(entry))
            if repair:
                return self._repaired_info_frames(entry)
            if entry.frame is not None:  # its own object, rendered when published
                return iter((entry.frame,))
            frames = self.info_frames(entry)
            if self.mode.full_object:
                self.absorb(state)  # the frame is a snapshot: nothing queued may go back
            return iter(frames)
        if isinstance(entry, RawEntry):
            return iter((entry.frame,))
        if entry.repair_only and not repair:
            return iter(())  # the repair it was queued for went out with an earlier entry
        return self._resync_frames(entry.lifetime)

    def info_frames(self, entry: InfoEntry) -> list[bytes]:
        """The frames of one (possibly merged) publication."""
        return info_frames(
            self.mode,
            entry.lifetime,
            entry.title,
            entry.updated_at,
            entry.cleared,
            entry.patch,
            entry.notification_meta,
        )

    def absorb(self, state: LifetimeState) -> None:
        """A snapshot of ``state`` is being rendered now: it carries every publication queued
        behind it, so those entries send nothing more (the client would otherwise go back
        through older states, issue 13), and none of them may take later publications."""
        state.books.snapshots += 1

    def _absorbed_frames(self, entry: InfoEntry) -> list[bytes]:
        """An entry whose publications a snapshot already carries: only its notification
        ``_meta`` still goes out (R9), on an update that changes nothing. Counted as coalesced:
        its publication reached the client inside the snapshot, not in a frame of its own."""
        self.absorbed += 1
        if entry.notification_meta is None:
            return []
        prefix = entry.lifetime.prefix
        return [info_frame(prefix, None, None, None, entry.notification_meta)]

    def _repaired_info_frames(self, entry: InfoEntry) -> Iterator[bytes]:
        yield from self._resync_frames(entry.lifetime)
        if _absorbed(entry):
            yield from self._absorbed_frames(entry)  # the repair's snapshot carries it
        else:
            yield from self.info_frames(entry)  # no snapshot was sent (v1 pass-through)

    def _resync_frames(self, state: LifetimeState) -> Iterator[bytes]:
        mode = self.mode
        if mode.resync == "none":
            return
        self.resyncs += 1
        if mode.resync == "clear_then_snapshot":
            yield clear_frame(state)
            # Rendered only now, after the clear went out: the snapshot is as new as it can be.
            self.absorb(state)
            if state.is_empty():
                self.repairing.discard(state)
                return
        self.absorb(state)
        yield snapshot_frame(mode, state)
        self.repairing.discard(state)  # reached only once every frame above was written


def _absorbed(entry: InfoEntry) -> bool:
    """Whether a snapshot of its lifetime was rendered since ``entry`` was queued."""
    return entry.snapshots != entry.lifetime.books.snapshots
