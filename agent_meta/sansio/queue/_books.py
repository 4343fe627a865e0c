"""The send queue's bookkeeping of one lifetime: a typed record, each field with one writer.

A :class:`~agent_meta.sansio.queue._state.LifetimeState` keeps the known state (what the agent
published, seeded or restored). What the queue and its parts keep of the lifetime besides is
here, in :class:`QueueBooks` (``LifetimeState.books``): each field is written by exactly one
part, named in its comment, and only read by the others (the queue carries what one part
decides over to another, ``docs/architecture.md``). It imports nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ._entries import InfoEntry, ResyncEntry

__all__ = ["QueueBooks"]


@final
class QueueBooks:
    """The send queue's bookkeeping of one lifetime (see the module docstring)."""

    __slots__ = (
        "closed",
        "epoch",
        "needs_repair",
        "open_entry",
        "resync_entry",
        "snapshots",
        "taken_over",
    )

    def __init__(self) -> None:
        self.closed = False
        """The lifetime ended here: its fence began (R6). Written by ``LifetimeRegistry.end``."""
        self.taken_over = False
        """Another holder took the lifetime over: it ended here, and publishers are told.
        Written by ``SendQueue.take_over``."""
        self.epoch = 0
        """The store's fencing epoch of this holding (0: not stored yet). Written by
        ``Durability`` (``restored``, and ``done`` for a first record)."""
        self.needs_repair = False
        """A frame of the lifetime was lost: a resync is due before its next frame (R11).
        Written by ``SendQueue`` (``open_lifetime`` from a record, ``lost``, and the entry that
        carries the repair, once taken)."""
        self.snapshots = 0
        """The snapshots rendered of the lifetime: each carries the entries queued before it.
        Written by ``FrameRenderer``."""
        self.open_entry: InfoEntry | None = None
        """The queued publication later ones may merge into (R3). Written by ``SendQueue``."""
        self.resync_entry: ResyncEntry | None = None
        """The resync queued and not yet taken by the writer (R4). Written by ``SendQueue``."""
