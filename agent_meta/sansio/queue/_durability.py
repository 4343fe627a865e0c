"""Persist before write, sans I/O: which lifetimes must be stored before the next frame.

With a lifetime store, every change must be stored before any frame that depends on it can
reach the client (``docs/durability.md``). :class:`Durability` tracks the lifetimes changed
since they were last stored and the lifetimes to delete, hands them out as one
:class:`~agent_meta.sansio.queue._entries.StoreBatch` at a time, and says whether everything
accepted before a given moment is stored. Without a store it tracks nothing.

Every store write is conditional on the holding's fencing epoch (``LifetimeState.books.epoch``): a
lifetime not stored yet (epoch 0) is created only if the store holds none, and holds epoch 1
once stored; any other write applies only while the stored epoch is still this holding's.
When another holder has taken a lifetime over, the store reports it stale and the send queue
ends that lifetime here (:meth:`~agent_meta.sansio.queue._queue.SendQueue.stored`). A claim of a
session that is open here decides by the same epochs whether this holding still has it
(:func:`still_held`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._entries import StoreBatch
from ._records import record_of

if TYPE_CHECKING:
    from ._records import StoredLifetime
    from ._state import LifetimeState

__all__ = ["FIRST_EPOCH", "Durability", "claim_again", "still_held"]

FIRST_EPOCH = 1
"""The epoch of a lifetime once its first record is stored (a takeover raises it)."""


class Durability:
    """The store bookkeeping of one send queue."""

    __slots__ = ("_deletes", "_dirty", "_taken", "batch", "enabled", "stored")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._dirty: dict[LifetimeState, None] = {}
        self._deletes: list[tuple[str, int]] = []
        self.batch: StoreBatch | None = None
        """The batch handed out and not reported yet (read-only outside this class)."""
        self._taken = 0
        self.stored = 0
        """The sequence number of the last batch reported stored."""

    def changed(self, state: LifetimeState) -> None:
        """``state`` changed: store it before the next frame."""
        if self.enabled and not state.books.closed:
            self._dirty[state] = None

    def restored(self, state: LifetimeState, record: StoredLifetime) -> None:
        """``state`` was restored from ``record``: it is held under the record's epoch."""
        state.books.epoch = record.epoch

    def closed(self, state: LifetimeState) -> None:
        """``state`` ended: delete its record (before any frame queued from now on). A
        lifetime whose first record is still being written is deleted once it is stored."""
        self._dirty.pop(state, None)
        if self.enabled and state.books.epoch:
            self._deletes.append((state.session_id, state.books.epoch))

    def forget(self, state: LifetimeState) -> None:
        """``state`` was taken over: nothing more of it is stored (the record is the new
        holder's)."""
        self._dirty.pop(state, None)

    @property
    def pending(self) -> bool:
        """Whether something must be stored before the next frame."""
        return bool(self._dirty or self._deletes)

    @property
    def in_flight(self) -> bool:
        """Whether a batch was handed out and not reported yet."""
        return self.batch is not None

    def take(self) -> StoreBatch:
        """The pending changes as one batch, to be reported with :meth:`done`."""
        self._taken += 1
        states = list(self._dirty)
        records = [record_of(state) for state in states]
        batch = StoreBatch(records, self._deletes, self._taken, states)
        self._dirty = {}
        self._deletes = []
        self.batch = batch
        return batch

    def done(self, batch: StoreBatch, stale: frozenset[str] = frozenset()) -> None:
        """``batch`` is durably stored, except for the lifetimes of the session ids in
        ``stale`` (another holder's now): a lifetime stored for the first time holds epoch 1
        (and, if it ended meanwhile, its record is deleted next)."""
        if batch is not self.batch:
            raise RuntimeError("that store batch was not handed out, or was reported already")
        self.batch = None
        self.stored = batch.seq
        for record, state in zip(batch.saves, batch.states, strict=True):
            if record.epoch or record.session_id in stale or state.books.epoch:
                continue
            state.books.epoch = FIRST_EPOCH
            if state.books.closed and not state.books.taken_over:
                self._deletes.append((state.session_id, FIRST_EPOCH))

    def target(self) -> int:
        """The batch that must be stored for every change accepted so far to be stored."""
        if self.pending:
            return self._taken + 1  # a batch that is taken after this call
        if self.batch is not None:
            return self.batch.seq
        return self.stored


# -- what a claim read (a takeover on another connection, process or machine) ----------------


def still_held(state: LifetimeState, record: StoredLifetime | None) -> bool:
    """Whether ``state``, open here, is still this holding's, given the record this owner's own
    claim of its session read (a claim by the holder moves nothing)."""
    if state.books.epoch == 0:  # its first record is not stored yet, or the claim read it stored
        return record is None or record.epoch == FIRST_EPOCH
    return record is not None and record.epoch == state.books.epoch


def claim_again(state: LifetimeState, record: StoredLifetime | None) -> bool:
    """Whether a claim of ``state``'s session, open here, must ask the store again: it found
    nothing, yet the lifetime's first record is stored (it committed after the claim read)."""
    return record is None and state.books.epoch != 0
