"""How one publication joins the send queue (R3, R9): merged, or appended as an entry.

A publication is folded into its lifetime's known state (R1) as it is accepted. Its frame is
then, in order of preference (the send queue asks this part, and carries the answer out):

- *expressed*: rendered at once and held for the writer, when the queue is idle and the caller
  writes the next frame itself (a direct write): nothing could precede it or merge into it (the
  queue decides this one, since it depends on the whole queue);
- *merged* into the lifetime's open entry (still queued, nothing of the same lifetime carrying
  a patch queued after it, no snapshot carrying it), when coalescing is on and the merged patch
  stays small (R3);
- *appended* as an entry of its own, counted against capacity unless it could not pile up
  without bound. An entry with notification ``_meta`` is never merged into (R9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._encode import EncodedUpdate
    from ._entries import InfoEntry
    from ._state import LifetimeState

__all__ = ["Publisher"]


class Publisher:
    """The coalescing rule of one send queue (R3), and the merges it made."""

    __slots__ = ("merge_limit", "merged", "merging")

    def __init__(self, max_frame_bytes: int) -> None:
        self.merge_limit = max_frame_bytes // 2
        """A merged patch stays under this size, so merging never makes a frame too large."""
        self.merging = False
        """Whether publications may be merged: coalescing on, and the wire mode allows it (R3,
        R10); the queue sets it with the protocol version."""
        self.merged = 0
        """Publications merged into an entry already queued."""

    def open_entry(self, state: LifetimeState) -> InfoEntry | None:
        """The entry of ``state`` later publications may merge into, if any: its newest
        queued publication entry, with nothing after it and no snapshot carrying it."""
        books = state.books
        entry = books.open_entry
        if entry is None or entry.snapshots != books.snapshots:
            return None
        return entry

    def needs_room(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Whether publishing ``update`` now appends an entry that counts against capacity:
        one with notification ``_meta`` (R9), any when not merging, or one whose merge would
        make the open entry too large."""
        if update.notification_meta is not None or not self.merging:
            return True
        entry = self.open_entry(state)
        if entry is None:
            return False
        return entry.patch_size + update.patch_size > self.merge_limit

    def merge(self, entry: InfoEntry, update: EncodedUpdate) -> None:
        """Merge ``update`` into the open entry ``entry``, still queued (R3)."""
        entry.merge(update)
        self.merged += 1

    def stays_open(self, update: EncodedUpdate) -> bool:
        """Whether the entry appended for ``update`` may take later publications (R3, R9)."""
        return self.merging and update.notification_meta is None
