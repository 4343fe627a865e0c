"""Turning a queue entry into frames when the writer takes it (R3, R4, R9, R10, R11).

Everything but a resync is rendered at once; a resync's snapshot only once its ``null`` frame
is written, so the snapshot is as new as it can be (R4). A snapshot (a resync's, a repair's, or
any v1 merged frame, which carries the whole object) *absorbs* the publications queued behind
it: they send nothing more, or the client would go back through older states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._entries import InfoEntry, RawEntry
from ._frames import clear_frame, info_frame, info_frames, snapshot_frame

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._cursor import FlushCursor
    from ._durability import Durability
    from ._entries import Entry, QueueCounters
    from ._modes import WireMode
    from ._state import LifetimeState

__all__ = ["FrameRenderer"]


class FrameRenderer:
    """Renders the entries of one queue; ``mode`` follows the queue's protocol version."""

    __slots__ = ("_counters", "_cursor", "_store", "mode", "repairing")

    def __init__(
        self, mode: WireMode, counters: QueueCounters, cursor: FlushCursor, store: Durability
    ) -> None:
        self.mode = mode
        self._counters = counters
        self._cursor = cursor
        self._store = store
        self.repairing: set[LifetimeState] = set()
        """Lifetimes that lost a frame and whose repair is not written yet (R11)."""

    def render(self, entry: Entry) -> Iterator[bytes]:
        """The frames of an entry the writer takes."""
        if isinstance(entry, InfoEntry):
            state = entry.lifetime
            if entry.pos <= state.absorbed_through:
                return iter(self._absorbed_frames(entry))
            if state.needs_repair:
                return self._repaired_info_frames(entry)
            frames = self.info_frames(entry)
            if self.mode.full_object:
                self.absorb(state)  # the frame is a snapshot: nothing queued may go back
            return iter(frames)
        if isinstance(entry, RawEntry):
            return iter((entry.frame,))
        if entry.repair_only and not entry.lifetime.needs_repair:
            return iter(())
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
        state.absorbed_through = self._cursor.appended
        if state.open_entry is not None:
            state.open_entry = None

    def _absorbed_frames(self, entry: InfoEntry) -> list[bytes]:
        """An entry whose publications a snapshot already carries: only its notification
        ``_meta`` still goes out (R9), on an update that changes nothing. Counted as coalesced:
        its publication reached the client inside the snapshot, not in a frame of its own."""
        self._counters.coalesced += 1
        if entry.notification_meta is None:
            return []
        prefix = entry.lifetime.prefix
        return [info_frame(prefix, None, None, None, entry.notification_meta)]

    def _repaired_info_frames(self, entry: InfoEntry) -> Iterator[bytes]:
        yield from self._resync_frames(entry.lifetime)
        if entry.pos <= entry.lifetime.absorbed_through:
            yield from self._absorbed_frames(entry)  # the repair's snapshot carries it
        else:
            yield from self.info_frames(entry)  # no snapshot was sent (v1 pass-through)

    def _resync_frames(self, state: LifetimeState) -> Iterator[bytes]:
        if state.needs_repair:
            self._counters.repairs += 1
            state.needs_repair = False
            self._store.changed(state)
        mode = self.mode
        if mode.resync == "none":
            return
        self._counters.resyncs += 1
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
