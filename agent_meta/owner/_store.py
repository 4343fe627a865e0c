"""The store seam: where session lifetimes outlive the agent process.

A :class:`LifetimeStore` keeps, per open session lifetime, exactly what the owner knows: the
``title`` / ``updatedAt`` / ``_meta`` JSON text, the current failure incident and whether the
client's view needs repair. The owner loads every stored lifetime when it starts (so
``open_session`` stays synchronous) and writes changes *before* it writes any frame, so what a
client has seen is always already stored (see ``docs/durability.md``).

Stores are written only by the owner's writer task, one batch at a time; a batch is atomic.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

from ..core._errors import AgentMetaError
from ..sansio._frames import encode_json, fragment

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..sansio._state import FailureIncident, LifetimeState

__all__ = [
    "LifetimeStore",
    "MemoryStore",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "StoredLifetime",
]


class StoreError(AgentMetaError, OSError):
    """A lifetime store cannot be opened, read or written.

    ``location`` names the store (a file path for SQLite) and ``reason`` the cause. When a
    write fails, the owner stops before writing the frame that depended on it: nothing whose
    state is not stored reaches the client.
    """

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"lifetime store {location}: {reason}")
        self.location = location
        self.reason = reason


class StoreLockedError(StoreError):
    """Another process (or connection) holds the store: one agent process per file."""


class StoreSchemaError(StoreError):
    """The file is not a lifetime store, or was written by a newer schema version."""


class StoreCorruptError(StoreError):
    """The file, or a stored record, is damaged; nothing was loaded from it."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class StoredLifetime:
    """The persisted state of one session lifetime, as the JSON text the owner sends.

    ``title`` / ``updated_at``: JSON text, or ``None`` when unknown. ``meta``: the known
    ``_meta`` as JSON object text, or ``None`` when there is none.
    """

    session_id: str
    title: str | None = None
    updated_at: str | None = None
    meta: str | None = None
    failure: FailureIncident | None = None
    needs_repair: bool = False


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


def record_of(state: LifetimeState) -> StoredLifetime:
    """What to store for ``state``: its JSON text as is, no re-encoding."""
    return StoredLifetime(
        session_id=state.session_id,
        title=state.title,
        updated_at=state.updated_at,
        meta=state.meta_text(),
        failure=state.failure,
        needs_repair=state.needs_repair,
    )


def restore_state(state: LifetimeState, record: StoredLifetime, location: str) -> None:
    """Make ``state`` hold what ``record`` stored; :class:`StoreCorruptError` if it is damaged."""
    where = f"session {record.session_id!r}"
    fragments: dict[str, str] = {}
    try:
        texts = [json.loads(t) for t in (record.title, record.updated_at) if t is not None]
        meta = None if record.meta is None else json.loads(record.meta, parse_constant=_reject)
    except ValueError as exc:
        raise StoreCorruptError(location, f"{where}: stored JSON is damaged ({exc})") from None
    if not all(isinstance(text, str | None) for text in texts):
        raise StoreCorruptError(location, f"{where}: stored title or updatedAt is not a string")
    if meta is not None:
        if not isinstance(meta, dict):
            raise StoreCorruptError(location, f"{where}: stored _meta is not an object")
        for key, value in meta.items():
            fragments[key] = fragment(key, encode_json(value))
    state.title = record.title
    state.updated_at = record.updated_at
    state.fragments = fragments
    state.meta_size = sum(len(text) for text in fragments.values())
    state.failure = record.failure
    state.needs_repair = record.needs_repair


def _reject(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
