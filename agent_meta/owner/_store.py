"""The store seam: where session lifetimes outlive the agent process.

A :class:`LifetimeStore` keeps, per open session lifetime, exactly what the owner knows: the
``title`` / ``updatedAt`` / ``_meta`` JSON text, the current failure incident and whether the
client's view needs repair. The owner loads every stored lifetime when it starts (so
``open_lifetime`` stays synchronous) and writes changes *before* it writes any frame, so what a
client has seen is always already stored (see ``docs/durability.md``).

Stores are written only by the owner's writer task, one batch at a time; a batch is atomic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..sansio._records import StoredLifetime

__all__ = ["LifetimeStore", "MemoryStore"]


@runtime_checkable
class LifetimeStore(Protocol):
    """Where an owner keeps its lifetimes. Only the owner's writer task writes to it.

    The owner never closes a store it was given: whoever opened it closes it.
    """

    @property
    def location(self) -> str:
        """A name for error messages (a file path, ``":memory:"``)."""
        ...

    async def load_lifetimes(self) -> dict[str, StoredLifetime]:
        """Every stored lifetime, by session id (called once, when the owner starts)."""
        ...

    async def write(self, saves: Sequence[StoredLifetime], deletes: Sequence[str]) -> None:
        """Atomically delete ``deletes``, then store ``saves`` (replacing same-id records).

        Must not return before the batch is durable as far as the store promises; must raise
        (preferably :class:`StoreError`) if it is not stored.
        """
        ...


@final
class MemoryStore:
    """A :class:`LifetimeStore` in this process's memory.

    Lifetimes survive a connection (a new owner on the same store resumes them), not the
    process. Without any store, an owner keeps its lifetimes only while it runs.
    """

    def __init__(self) -> None:
        self._records: dict[str, StoredLifetime] = {}
        self.writes = 0
        """How many batches were written (for tests)."""

    @property
    def location(self) -> str:
        return ":memory:"

    @property
    def records(self) -> dict[str, StoredLifetime]:
        """A copy of what is stored, by session id."""
        return dict(self._records)

    async def load_lifetimes(self) -> dict[str, StoredLifetime]:
        return dict(self._records)

    async def write(self, saves: Sequence[StoredLifetime], deletes: Sequence[str]) -> None:
        for session_id in deletes:
            self._records.pop(session_id, None)
        for record in saves:
            self._records[record.session_id] = record
        self.writes += 1
