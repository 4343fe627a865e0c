"""How one publication joins the send queue (R1, R3, R9): merged, appended, or written at once.

A publication is folded into its lifetime's known state (R1) as it is accepted. Its frame is
then, in order of preference:

- *expressed*: rendered now and held for the writer, when the queue is idle and the caller
  writes the next frame itself (a direct write): nothing could precede it or merge into it;
- *merged* into the lifetime's open entry (still queued, nothing of the same lifetime carrying
  a patch queued after it), when coalescing is on and the merged patch stays small (R3);
- *appended* as an entry of its own, counted against capacity unless it could not pile up
  without bound. An entry with notification ``_meta`` is never merged into (R9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._edits import Outcome
from ._entries import InfoEntry
from ._frames import info_frame, info_frames, patch_text

if TYPE_CHECKING:
    from ._durability import Durability
    from ._encode import EncodedUpdate
    from ._entries import QueueCounters
    from ._fifo import EntryFifo
    from ._render import FrameRenderer
    from ._state import LifetimeState
    from ._writing import Writing

__all__ = ["Publisher"]


class Publisher:
    """Queues the publications of one send queue."""

    __slots__ = (
        "_counters",
        "_cursor",
        "_fifo",
        "_renderer",
        "_store",
        "_writing",
        "capacity",
        "merge_limit",
        "merging",
    )

    def __init__(  # the parts of the queue it works with
        self,
        fifo: EntryFifo,
        writing: Writing,
        renderer: FrameRenderer,
        store: Durability,
        counters: QueueCounters,
        *,
        capacity: int,
        max_frame_bytes: int,
    ) -> None:
        self._fifo = fifo
        self._writing = writing
        self._cursor = writing.cursor
        self._renderer = renderer
        self._store = store
        self._counters = counters
        self.capacity = capacity
        self.merge_limit = max_frame_bytes // 2
        """A merged patch stays under this size, so merging never makes a frame too large."""
        self.merging = False
        """Whether publications may be merged: coalescing on, and the wire mode allows it (R3,
        R10); the queue sets it with the protocol version."""

    def publish(self, state: LifetimeState, update: EncodedUpdate, *, express: bool) -> Outcome:
        """Fold ``update`` and queue its frame; :attr:`Outcome.FULL`, having changed nothing,
        when it needs room and there is none."""
        if express and self._express(state, update):
            return Outcome.ACCEPTED
        needs_room = self._needs_room(state, update)
        if needs_room and self._fifo.counted >= self.capacity:
            return Outcome.FULL
        self._fold(state, update)
        entry = state.open_entry
        if not needs_room and isinstance(entry, InfoEntry):
            self._merge(entry, update)
            return Outcome.ACCEPTED
        new = InfoEntry(state, update, counted=needs_room)
        new.frames = self._frames_of(new)
        self._fifo.append(new)
        merging = self.merging and update.notification_meta is None
        state.open_entry = new if merging else None
        return Outcome.ACCEPTED

    def _merge(self, entry: InfoEntry, update: EncodedUpdate) -> None:
        """Merge ``update`` into the lifetime's open entry, still queued (R3)."""
        before = entry.frames
        entry.merge(update)
        entry.frames = self._frames_of(entry)
        self._fifo.count_frames(entry.frames - before)
        self._counters.coalesced += 1

    def _needs_room(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Whether publishing ``update`` now appends an entry that counts against capacity:
        one with notification ``_meta`` (R9), any when not merging, or one whose merge would
        make the open entry too large."""
        if update.notification_meta is not None or not self.merging:
            return True
        entry = state.open_entry
        if not isinstance(entry, InfoEntry):
            return False
        return entry.patch_size + update.patch_size > self.merge_limit

    def _fold(self, state: LifetimeState, update: EncodedUpdate) -> None:
        state.apply(update)
        store = self._store
        if store.enabled:
            store.changed(state)
        self._counters.publications += 1

    def _express(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Fold ``update`` and hold its one frame for the writer (the queue is idle), if the
        lifetime needs no repair and one frame says it; ``False`` (nothing done) otherwise.

        Every publication to an idle queue passes here, so the common frame (a v2 patch, or a
        title) is built without going through :func:`info_frames`."""
        if not self._writing.idle or state.needs_repair:
            return False  # something goes first: what is queued, or the repair
        mode = self._renderer.mode
        cleared = update.meta_clear
        patch = update.meta_patch
        if cleared and patch and not mode.full_object:
            return False  # two frames: the clear, then the object
        state.apply(update)  # _fold(), written out on this path
        store = self._store
        if store.enabled:
            store.changed(state)
        self._counters.publications += 1
        if mode.full_object or cleared:
            frames = info_frames(
                mode,
                state,
                update.title,
                update.updated_at,
                cleared,
                patch,
                update.notification_meta,
            )
            frame = frames[0]
        else:
            meta = None if patch is None else patch_text(patch)
            frame = info_frame(
                state.prefix, update.title, update.updated_at, meta, update.notification_meta
            )
        self._writing.express(frame, state, store.target() if store.enabled else 0)
        return True

    def _frames_of(self, entry: InfoEntry) -> int:
        return self._renderer.mode.publication_frames(entry.cleared, bool(entry.patch))
