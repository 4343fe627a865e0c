"""What waits in the send queue, and what the queue hands to a driver.

Queue entries are :class:`InfoEntry` (one or more merged ``session_info_update`` publications
of one lifetime, in normal form), :class:`ResyncEntry` (R4) and :class:`RawEntry` (any other
frame: responses, requests, notifications). Besides a frame to write, a driver may receive a
:class:`StoreBatch` to store first: plain data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from .._encode import member_size

if TYPE_CHECKING:
    from .._encode import EncodedUpdate
    from ._records import StoredLifetime
    from ._state import LifetimeState

__all__ = [
    "Entry",
    "InfoEntry",
    "RawEntry",
    "ResyncEntry",
    "StoreBatch",
]


class InfoEntry:
    """Queued ``session_info_update`` publication(s) of one lifetime, in normal form: the
    fields set last, whether ``_meta`` was cleared first, and the patch after the clear."""

    __slots__ = (
        "cleared",
        "counted",
        "frame",
        "frames",
        "lifetime",
        "notification_meta",
        "own_patch",
        "patch",
        "patch_size",
        "pos",
        "snapshots",
        "title",
        "updated_at",
    )

    def __init__(self, lifetime: LifetimeState, update: EncodedUpdate, counted: bool) -> None:
        self.lifetime = lifetime
        self.counted = counted
        self.title = update.title
        self.updated_at = update.updated_at
        self.cleared = update.meta_clear
        self.patch = update.meta_patch  # shared until a merge changes it (most never merge)
        self.own_patch = False
        self.patch_size = update.patch_size
        self.notification_meta = update.notification_meta
        self.pos = 0
        self.frames = 1
        self.snapshots = lifetime.books.snapshots
        """The lifetime's snapshot count when queued: a later snapshot carries this entry."""
        self.frame: bytes | None = None
        """Its frame, rendered when it was published, where each publication is a frame of its
        own and that frame is the whole object (coalescing off, v1): the object as it was
        after this publication, not at write time, so the client is told every step."""

    def merge(self, update: EncodedUpdate) -> None:
        """Fold a later update into this entry (same effect for every stored state, R3)."""
        if update.title is not None:
            self.title = update.title
        if update.updated_at is not None:
            self.updated_at = update.updated_at
        if update.meta_clear:
            self.cleared = True
            self.patch = None
            self.own_patch = False
            self.patch_size = 0
        if update.meta_patch is not None:
            if not self.own_patch:
                self.patch = {} if self.patch is None else dict(self.patch)
                self.own_patch = True
            assert self.patch is not None
            for key, frag in update.meta_patch.items():
                if key in self.patch:
                    self.patch_size -= member_size(key, self.patch[key])
                self.patch[key] = frag
                self.patch_size += member_size(key, frag)


class ResyncEntry:
    """A resync of one lifetime (R4): rendered only when the writer takes it."""

    __slots__ = ("counted", "frames", "lifetime", "pos", "repair_only")

    def __init__(self, lifetime: LifetimeState, repair_only: bool, frames: int) -> None:
        self.lifetime = lifetime
        self.repair_only = repair_only
        self.counted = False
        self.pos = 0
        self.frames = frames


class RawEntry:
    """Any other frame, already encoded."""

    __slots__ = ("counted", "frame", "frames", "lifetime", "pos")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.lifetime: LifetimeState | None = None
        self.counted = True
        self.pos = 0
        self.frames = 1


Entry: TypeAlias = InfoEntry | ResyncEntry | RawEntry


class StoreBatch:
    """Lifetimes to store and lifetimes to delete, in one atomic store write, before the
    frame that depends on them is written (persist before write).

    Each save and each delete carries its holding's epoch (``StoredLifetime.epoch``; deletes as
    ``(session_id, epoch)``): the store applies it only if the stored epoch still matches, and
    reports the sessions where it does not (taken over by another holder)."""

    __slots__ = ("deletes", "saves", "seq", "states")

    def __init__(
        self,
        saves: list[StoredLifetime],
        deletes: list[tuple[str, int]],
        seq: int,
        states: list[LifetimeState] | None = None,
    ) -> None:
        self.saves = saves
        self.deletes = deletes
        self.seq = seq
        self.states = states if states is not None else []
        """The lifetimes ``saves`` were taken from, in the same order."""
