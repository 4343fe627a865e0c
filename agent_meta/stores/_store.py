"""The store seam: where session lifetimes outlive a connection, a process or a machine.

A :class:`LifetimeStore` keeps, per session, exactly what its holder knows: the ``title`` /
``updatedAt`` / ``_meta`` JSON text, the current failure incident, whether the client's view
needs repair, whether the title is the client's (R13), and the fencing epoch of the holding.
One store is shared by every owner that uses it (every connection of a process; with a shared
database, every process and machine).

Ownership follows Temporal's shard ``range_id``: at most one owner holds a lifetime, and every
write it makes is conditional on its epoch.

- :meth:`LifetimeStore.claim` takes a stored lifetime over (a ``session/load`` or
  ``session/resume`` on any connection): the stored epoch goes up by one and the record comes
  back, now the claimer's. It takes effect at once; no lease has to run out.
- :meth:`LifetimeStore.write` stores a batch of changes, each only if the stored epoch is
  still the writer's; the sessions where it is not (another owner took them over) are
  returned, and the rest of the batch is stored. A lifetime not stored yet (epoch 0) is
  created only if no record exists.

See ``docs/durability.md`` for the protocol and who wins which race.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol, TypeGuard, final, runtime_checkable

from ..core._errors import StoreCorruptError
from ..sansio.queue._durability import FIRST_EPOCH
from ..sansio.queue._records import StoredLifetime
from ..sansio.queue._state import FailureIncident

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["LifetimeStore", "MemoryStore", "record_from_row"]


@runtime_checkable
class LifetimeStore(Protocol):
    """Where owners keep their lifetimes. Its calls may come from several owners (and tasks,
    and threads of them) at once: the store makes each call atomic.

    The owner never closes a store it was given: whoever opened it closes it.
    """

    @property
    def location(self) -> str:
        """A name for error messages (a file path, ``":memory:"``; never a password)."""
        ...

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        """Take the stored lifetime of ``session_id`` over for ``holder`` (an owner's
        :attr:`~agent_meta.Owner.holder`): the stored epoch goes up by one, unless ``holder``
        holds it already, and the record is returned with the epoch that is now ``holder``'s.
        ``None`` when nothing is stored for ``session_id``; nothing is created then."""
        ...

    async def read(self, session_id: str) -> StoredLifetime | None:
        """The stored lifetime of ``session_id`` without taking it over, or ``None``."""
        ...

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        """The stored lifetimes of ``session_ids`` without taking any over, by session id (those
        with none are left out), in one round trip: a ``session/list`` page reads its
        client-set titles so (R13)."""
        ...

    async def write(
        self,
        saves: Sequence[StoredLifetime],
        deletes: Sequence[tuple[str, int]],
        *,
        holder: str,
    ) -> frozenset[str]:
        """Atomically delete ``deletes`` (``(session_id, epoch)``), then store ``saves``, each
        only where ``holder`` still holds it: the stored epoch is the one it carries and the
        stored holder is ``holder`` (a save with epoch 0 only where no record exists; it is
        then stored with epoch 1, held by ``holder``). Returns the session ids where it was
        not (stale: another holder's now); everything else is stored.

        The holder is part of the condition because a record can be deleted (a close) and
        created again: its epoch starts over at 1, and a former holder that never learned
        of the takeover may hold that same epoch number. The pair (epoch, holder) is never
        reused: holders are unique per owner.

        Must not return before the batch is durable as far as the store promises; must raise
        (preferably :class:`~agent_meta.StoreError`) if it is not stored.
        """
        ...


@final
@dataclasses.dataclass(slots=True)
class _Held:
    record: StoredLifetime
    holder: str


@final
class MemoryStore:
    """A :class:`LifetimeStore` in this process's memory.

    Lifetimes survive a connection (another owner on the same store takes them over), not the
    process. Without any store, an owner keeps its lifetimes only while it runs.
    """

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self.writes = 0
        """How many batches were written (for tests)."""

    @property
    def location(self) -> str:
        return ":memory:"

    @property
    def records(self) -> dict[str, StoredLifetime]:
        """A copy of what is stored, by session id."""
        return {session_id: held.record for session_id, held in self._held.items()}

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        held = self._held.get(session_id)
        if held is None:
            return None
        if held.holder != holder:
            held.record = dataclasses.replace(held.record, epoch=held.record.epoch + 1)
            held.holder = holder
        return held.record

    async def read(self, session_id: str) -> StoredLifetime | None:
        held = self._held.get(session_id)
        return None if held is None else held.record

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        return {sid: self._held[sid].record for sid in session_ids if sid in self._held}

    async def write(
        self,
        saves: Sequence[StoredLifetime],
        deletes: Sequence[tuple[str, int]],
        *,
        holder: str,
    ) -> frozenset[str]:
        stale: set[str] = set()
        for session_id, epoch in deletes:
            held = self._held.get(session_id)
            if held is not None and (held.record.epoch, held.holder) == (epoch, holder):
                del self._held[session_id]
        for record in saves:
            held = self._held.get(record.session_id)
            if record.epoch == 0:
                if held is not None:
                    stale.add(record.session_id)
                    continue
                stored = dataclasses.replace(record, epoch=FIRST_EPOCH)
                self._held[record.session_id] = _Held(stored, holder)
            elif held is None or (held.record.epoch, held.holder) != (record.epoch, holder):
                stale.add(record.session_id)
            else:
                held.record = record
        self.writes += 1
        return frozenset(stale)


def record_from_row(location: str, row: tuple[object, ...]) -> StoredLifetime:
    """A stored lifetime from a database row (session id, title, updatedAt, meta, failure id
    and revision, repair flag, client-set title flag, epoch); :class:`StoreCorruptError`
    naming ``location`` when a field has the wrong type."""
    session_id, title, updated_at, meta, failure_id, revision, repair, client, epoch = row
    if (
        not isinstance(session_id, str)
        or not _optional_str(title)
        or not _optional_str(updated_at)
        or not _optional_str(meta)
        or not _optional_str(failure_id)
        or not isinstance(epoch, int)
    ):
        raise StoreCorruptError(location, f"lifetime row {session_id!r} is damaged")
    failure = None
    if failure_id is not None:
        if not isinstance(revision, int):
            raise StoreCorruptError(
                location, f"lifetime {session_id!r}: failure revision is damaged"
            )
        failure = FailureIncident(failure_id, revision)
    return StoredLifetime(
        session_id,
        title,
        updated_at,
        meta,
        failure,
        needs_repair=bool(repair),
        client_title=bool(client),
        epoch=epoch,
    )


def _optional_str(value: object) -> TypeGuard[str | None]:
    return value is None or isinstance(value, str)
