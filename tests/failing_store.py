"""Lifetime stores that pass calls to another and stage some: writes that fail on cue, for the
tests of what a store failure does, and others built on :class:`WrappedStore`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_meta import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_meta import StoredLifetime
    from agent_meta.stores._store import LifetimeStore


class WrappedStore:
    """A :class:`~agent_meta.LifetimeStore` that passes every call to ``inner`` (a fresh
    :class:`~agent_meta.MemoryStore` by default); tests override the calls they stage."""

    def __init__(self, inner: LifetimeStore | None = None) -> None:
        self.inner = MemoryStore() if inner is None else inner

    @property
    def location(self) -> str:
        return self.inner.location

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        return await self.inner.claim(session_id, holder)

    async def read(self, session_id: str) -> StoredLifetime | None:
        return await self.inner.read(session_id)

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        return await self.inner.read_many(session_ids)

    async def write(
        self, saves: Sequence[StoredLifetime], deletes: Sequence[tuple[str, int]], *, holder: str
    ) -> frozenset[str]:
        return await self.inner.write(saves, deletes, holder=holder)


class FailingStore(WrappedStore):
    """Its ``fail_on``-th write raises ``error`` (counted from 1), and with ``after`` every
    later one too (a disk that stays full). Claims and reads pass through."""

    def __init__(
        self,
        inner: LifetimeStore | None = None,
        *,
        fail_on: int = 1,
        error: Exception | None = None,
        after: bool = False,
    ) -> None:
        super().__init__(inner)
        self.fail_on = fail_on
        self.error = OSError("disk full") if error is None else error
        self.after = after
        self.calls = 0

    async def write(
        self, saves: Sequence[StoredLifetime], deletes: Sequence[tuple[str, int]], *, holder: str
    ) -> frozenset[str]:
        self.calls += 1
        if self.calls == self.fail_on or (self.after and self.calls > self.fail_on):
            raise self.error
        return await super().write(saves, deletes, holder=holder)
