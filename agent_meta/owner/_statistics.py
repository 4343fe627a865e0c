"""An owner's counters: :class:`OwnerStatistics`, what ``statistics()`` returns on every driver."""

from __future__ import annotations

import dataclasses
from typing import final

__all__ = ["OwnerStatistics"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class OwnerStatistics:
    """A snapshot of an owner's counters (see ``statistics()`` on either driver)."""

    open_lifetimes: int
    """Lifetimes currently open."""
    queued: int
    """Entries waiting to be written (including the one being written)."""
    queued_frames: int
    """Frames still queued, at most (a frame being written is no longer counted)."""
    peak_queued_frames: int
    """The most frames ever queued at once."""
    publications: int
    """Session-info publications accepted (publish, domain edits, failure changes)."""
    coalesced: int
    """Publications and resyncs merged into an entry already queued (R3), or carried by a
    snapshot written before their own entry came up (R2: they send nothing more)."""
    frames_written: int
    bytes_written: int
    fenced: int
    """Calls refused because their lifetime had ended (R6): publications, domain edits,
    failure changes, resyncs, seeds, and notifications or requests of the ended session; and
    queued frames dropped because another holder took their lifetime over. A close drops
    nothing: what a lifetime queued before its close is written."""
    write_failures: int
    """Frames the transport did not (or may not have) delivered (R11)."""
    retried_writes: int
    """Retries of frames the transport proved unsent."""
    resyncs: int
    """Resyncs written (requested ones and repairs)."""
    repairs: int
    """Resyncs written to repair a client view after a lost frame."""
    waiting_producers: int
    """Tasks blocked waiting for queue room."""
    store_writes: int = 0
    """Batches written to the lifetime store (0 without a store)."""
    taken_over: int = 0
    """Lifetimes another holder took over (a store write found their epoch moved on): they
    ended here, and what was queued for them was dropped (counted in ``fenced``)."""
    direct_writes: int = 0
    """Frames written whole by the call that queued them, the writer task being idle (over a
    pipe, without a store: ``StreamTransport`` on trio,
    ``AsyncioStreamTransport`` on asyncio)."""
    suppressed_titles: int = 0
    """Titles dropped from publications (and seeds) because the client set the lifetime's title
    (``session/set_title``, R13); the rest of each publication was still published."""
