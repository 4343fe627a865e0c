"""Persist before write, sans I/O: which lifetimes must be stored before the next frame.

With a lifetime store, every change must be stored before any frame that depends on it can
reach the client (``docs/durability.md``). :class:`Durability` tracks the lifetimes changed
since they were last stored and the session ids to delete, hands them out as one
:class:`~agent_meta.sansio._entries.StoreBatch` at a time, and says whether everything accepted
before a given moment is stored. Without a store it tracks nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._entries import StoreBatch
from ._records import record_of

if TYPE_CHECKING:
    from ._state import LifetimeState

__all__ = ["Durability"]


class Durability:
    """The store bookkeeping of one send queue."""

    __slots__ = ("_deletes", "_dirty", "_taken", "batch", "enabled", "stored")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._dirty: dict[LifetimeState, None] = {}
        self._deletes: list[str] = []
        self.batch: StoreBatch | None = None
        """The batch handed out and not reported yet (read-only outside this class)."""
        self._taken = 0
        self.stored = 0
        """The sequence number of the last batch reported stored."""

    def changed(self, state: LifetimeState) -> None:
        """``state`` changed: store it before the next frame."""
        if self.enabled and not state.closed:
            self._dirty[state] = None

    def closed(self, state: LifetimeState) -> None:
        """``state`` ended: delete its record (before any frame queued from now on)."""
        self._dirty.pop(state, None)
        if self.enabled:
            self._deletes.append(state.session_id)

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
        batch = StoreBatch([record_of(state) for state in self._dirty], self._deletes, self._taken)
        self._dirty = {}
        self._deletes = []
        self.batch = batch
        return batch

    def done(self, batch: StoreBatch) -> None:
        """``batch`` is durably stored."""
        if batch is not self.batch:
            raise RuntimeError("that store batch was not handed out, or was reported already")
        self.batch = None
        self.stored = batch.seq

    def target(self) -> int:
        """The batch that must be stored for every change accepted so far to be stored."""
        if self.pending:
            return self._taken + 1  # a batch that is taken after this call
        if self.batch is not None:
            return self.batch.seq
        return self.stored
