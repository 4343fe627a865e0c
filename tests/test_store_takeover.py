"""Shared lifetimes: owners on one store take sessions over from each other, fenced by epochs.

Each test runs on both drivers (``tests/drivers.py``) and on every store: the
:class:`~agent_meta.MemoryStore` of one process, SQLite files opened twice, as two processes
open them (each owner with its own ``SQLiteStore`` on the same file), and a PostgreSQL database
opened twice, as two machines open it (each owner with its own ``PostgresStore`` and pool, on a
real server: ``tests/support/postgres_fixtures.py``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest

from agent_meta import (
    LifetimeTakenOverError,
    MemoryStore,
    SQLiteStore,
    StoredLifetime,
    UnknownSessionError,
)
from agent_meta.stores._sqlite import SCHEMA_VERSION
from agent_meta.testing import ClientMirror, RecordingTransport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from agent_meta import Owner
    from agent_meta.stores._store import LifetimeStore
    from tests.drivers import Driver

pytestmark = pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])


@pytest.fixture
def place(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where the shared store is: a SQLite file, or a PostgreSQL URL (an empty schema)."""
    if kind == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return str(tmp_path / "shared.sqlite")


class Stores:
    """Two handles on one store: the same object (memory), or the same file or database opened
    twice."""

    def __init__(self, kind: str, place: str, stack: AsyncExitStack) -> None:
        self.kind = kind
        self.place = place
        self.stack = stack
        self.memory = MemoryStore()

    async def open(self) -> LifetimeStore:
        if self.kind == "memory":
            return self.memory
        if self.kind == "postgres":
            from agent_meta import PostgresStore  # psycopg: only where PostgreSQL is tested

            return await self.stack.enter_async_context(await PostgresStore.open(self.place))
        return await self.stack.enter_async_context(await SQLiteStore.open(self.place))


async def stores(kind: str, place: str) -> tuple[Stores, AsyncExitStack]:
    stack = AsyncExitStack()
    return Stores(kind, place, stack), stack


@contextlib.asynccontextmanager
async def two_owners(
    driver: Driver, shared: Stores, stack: AsyncExitStack
) -> AsyncIterator[tuple[Owner, Owner]]:
    """Two owners on one store (two handles on it), writing nowhere that matters."""
    async with (
        stack,
        driver.open_owner(RecordingTransport(), store=await shared.open()) as a,
        driver.open_owner(RecordingTransport(), store=await shared.open()) as b,
    ):
        yield a, b


def meta_of(record: StoredLifetime | None) -> object:
    assert record is not None
    return None if record.meta is None else json.loads(record.meta)


async def test_a_claim_takes_the_lifetime_over_and_fences_the_former_holder(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with stack:
        a_client = RecordingTransport(mirror=ClientMirror())
        b_client = RecordingTransport(mirror=ClientMirror())
        async with (
            driver.open_owner(a_client, store=await shared.open()) as a,
            driver.open_owner(b_client, store=await shared.open()) as b,
        ):
            held = a.open_lifetime("s")
            await held.publish(meta={"a": 1})  # accepted: stored
            taken = await b.claim_lifetime("s")
            assert taken is not None
            assert taken.snapshot().meta == {"a": 1}  # everything accepted before the claim
            taken.resync()
            with pytest.raises(LifetimeTakenOverError):
                await held.publish(meta={"stale": True})  # refused to the former holder
            assert not a.has_lifetime("s")
            with pytest.raises(UnknownSessionError):
                a.lifetime("s")
            with pytest.raises(LifetimeTakenOverError):
                await held.publish(meta={"again": True})
            await taken.publish(meta={"b": 2})
            await a.wait_flushed()
            await b.wait_flushed()
            assert a.statistics().taken_over == 1
            record = await (await shared.open()).read("s")
            assert meta_of(record) == {"a": 1, "b": 2}
            assert record is not None
            assert record.epoch == 2
        assert a_client.mirror is not None
        assert b_client.mirror is not None
        assert a_client.mirror.meta("s") == {"a": 1}  # nothing more of it after the takeover
        assert b_client.mirror.meta("s") == {"a": 1, "b": 2}


async def test_a_stale_session_in_a_batch_fences_that_session_only(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with two_owners(driver, shared, stack) as (a, b):
        one = a.open_lifetime("one")
        two = a.open_lifetime("two")
        await a.wait_flushed()
        assert await b.claim_lifetime("one") is not None
        # Both changes go to the store in one batch of A's: "one" is stale there.
        one.publish_nowait(meta={"x": 1})
        await two.publish(meta={"y": 2})
        await a.wait_flushed()
        assert not a.has_lifetime("one")
        assert a.has_lifetime("two")
        store = await shared.open()
        assert meta_of(await store.read("two")) == {"y": 2}
        assert meta_of(await store.read("one")) is None  # the stale change was not stored
        await two.publish(meta={"z": 3})  # the owner goes on
        assert meta_of(await store.read("two")) == {"y": 2, "z": 3}


async def test_claiming_twice_on_one_owner_takes_nothing_more(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with stack:
        store = await shared.open()
        await store.write([StoredLifetime("s", meta='{"k":1}')], [], holder="old")
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            first = await owner.claim_lifetime("s")
            assert first is not None
            assert await owner.claim_lifetime("s") is first  # open here: kept (R5)
            assert (await store.claim("s", owner.holder)) is not None  # the same holder
            record = await store.read("s")
            assert record is not None
            assert record.epoch == 2  # one takeover, not three
            await first.publish(meta={"k": 2})  # still this owner's
            assert meta_of(await store.read("s")) == {"k": 2}


async def test_a_former_holder_claiming_again_takes_the_lifetime_back(
    driver: Driver, kind: str, place: str
) -> None:
    """A's lifetime is open, B took it over, and A has not written it since (so A does not
    know): A's claim must not return its stale lifetime as still held. It ends as taken over,
    and the stored lifetime, B's, is claimed in its place."""
    shared, stack = await stores(kind, place)
    async with stack:
        a_client = RecordingTransport(mirror=ClientMirror())
        async with (
            driver.open_owner(a_client, store=await shared.open()) as a,
            driver.open_owner(RecordingTransport(), store=await shared.open()) as b,
        ):
            stale = a.open_lifetime("s")
            await stale.publish(meta={"a": 1})
            taken = await b.claim_lifetime("s")
            assert taken is not None
            await taken.publish(meta={"b": 2})
            back = await a.claim_lifetime("s")
            assert back is not None
            assert back is not stale
            assert back.snapshot().meta == {"a": 1, "b": 2}  # the stored state, not A's own
            assert a.statistics().taken_over == 1
            with pytest.raises(LifetimeTakenOverError):
                await stale.publish(meta={"old": True})
            back.resync()
            await back.publish(meta={"a": 3})  # A holds it again
            with pytest.raises(LifetimeTakenOverError):
                await taken.publish(meta={"b": 4})  # and B is fenced
            record = await (await shared.open()).read("s")
            assert meta_of(record) == {"a": 3, "b": 2}
            assert record is not None
            assert record.epoch == 3
        assert a_client.mirror is not None
        assert a_client.mirror.meta("s") == {"a": 3, "b": 2}


async def test_claiming_a_new_lifetime_before_its_first_record_keeps_it(
    driver: Driver, kind: str, place: str
) -> None:
    """A lifetime opened here whose first record is not stored yet is this owner's: a claim
    keeps it (the store holds nothing, or its first record, stored as the claim read it)."""
    shared, stack = await stores(kind, place)
    async with stack, driver.open_owner(RecordingTransport(), store=await shared.open()) as a:
        fresh = a.open_lifetime("s")
        fresh.publish_nowait(meta={"a": 1})
        assert await a.claim_lifetime("s") is fresh
        await a.wait_flushed()
        assert await a.claim_lifetime("s") is fresh
        assert a.statistics().taken_over == 0
        assert meta_of(await (await shared.open()).read("s")) == {"a": 1}


async def test_a_claim_of_an_unknown_session_takes_nothing_and_creates_nothing(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with stack:
        store = await shared.open()
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            assert await owner.claim_lifetime("nobody") is None
            assert not owner.has_lifetime("nobody")
            assert await owner.stored_snapshot("nobody") is None
        assert await store.read("nobody") is None


async def test_a_new_lifetime_is_stored_before_the_next_frame(
    driver: Driver, kind: str, place: str
) -> None:
    """The response that names a new session is written after its record exists: another
    holder asked for it at once finds it."""
    shared, stack = await stores(kind, place)
    async with stack:
        store = await shared.open()
        seen: list[StoredLifetime | None] = []

        class Probe(RecordingTransport):
            async def send_frame(self, frame: bytes) -> None:
                if b'"id":1' in frame:
                    seen.append(await store.read("fresh"))
                await super().send_frame(frame)

        async with driver.open_owner(Probe(), store=store) as owner:
            owner.open_lifetime("fresh")
            await owner.send_response(1, result={"sessionId": "fresh"})
        assert len(seen) == 1
        assert seen[0] is not None
        assert seen[0].epoch == 1


async def test_a_new_lifetime_whose_id_another_holder_stored_is_fenced(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with stack:
        store = await shared.open()
        await store.write([StoredLifetime("s", meta='{"theirs":1}')], [], holder="them")
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            lifetime = owner.open_lifetime("s")  # not claimed: a new lifetime of a taken id
            with pytest.raises(LifetimeTakenOverError):
                await lifetime.publish(meta={"mine": 1})
            assert owner.statistics().taken_over == 1
        assert meta_of(await store.read("s")) == {"theirs": 1}


async def test_the_former_holder_closing_deletes_nothing_of_the_new_one(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with two_owners(driver, shared, stack) as (a, b):
        await a.open_lifetime("s").publish(meta={"a": 1})
        assert await b.claim_lifetime("s") is not None
        a.close_lifetime("s")  # A has not learnt yet: its delete carries epoch 1
        await a.send_response(1, result={})
        await a.wait_flushed()
        assert meta_of(await (await shared.open()).read("s")) == {"a": 1}


async def test_a_version_1_file_is_migrated_and_its_lifetimes_claimed(
    driver: Driver, kind: str, tmp_path: Path
) -> None:
    if kind != "sqlite":
        pytest.skip("a SQLite file format")
    path = tmp_path / "shared.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        PRAGMA application_id = 1095191892;
        PRAGMA user_version = 1;
        CREATE TABLE agent_meta_lifetimes (
            session_id TEXT PRIMARY KEY NOT NULL, title TEXT, updated_at TEXT, meta TEXT,
            failure_id TEXT, failure_revision INTEGER, needs_repair INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        INSERT INTO agent_meta_lifetimes VALUES ('old', NULL, NULL, '{"v":1}', NULL, NULL, 0);
        """
    )
    conn.close()
    async with await SQLiteStore.open(path) as store:
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            claimed = await owner.claim_lifetime("old")
            assert claimed is not None
            assert claimed.snapshot().meta == {"v": 1}
            await claimed.publish(meta={"w": 2})
        record = await store.read("old")
        assert record is not None
        assert record.epoch == 2
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


async def test_read_many_reads_many_records_in_one_call_and_claims_none(
    driver: Driver, kind: str, place: str
) -> None:
    shared, stack = await stores(kind, place)
    async with two_owners(driver, shared, stack) as (a, _):
        store = await shared.open()
        ids = [f"s{index}" for index in range(1200)]  # more than one SQLite statement takes
        for session_id in ids:
            a.open_lifetime(session_id)
        await a.lifetime("s7").set_client_title("Mine")
        await a.wait_flushed()
        found = await store.read_many([*reversed(ids), "absent", "s7"])
        assert sorted(found) == sorted(ids)
        assert (found["s7"].title, found["s7"].client_title, found["s7"].epoch) == (
            '"Mine"',
            True,
            1,
        )
        assert not found["s8"].client_title
        assert await store.read_many([]) == {}
        await a.lifetime("s7").publish(meta={"still": "held"})  # nothing was claimed
        await a.wait_flushed()


async def test_a_version_2_file_is_migrated_and_keeps_its_lifetimes_and_epochs(
    driver: Driver, kind: str, tmp_path: Path
) -> None:
    """Version 3 added whether a title is the client's (R13): a version 2 file gets the column
    (no title of it is the client's) at open, and its lifetimes and epochs are kept."""
    if kind != "sqlite":
        pytest.skip("a SQLite file format")
    path = tmp_path / "shared.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        PRAGMA application_id = 1095191892;
        PRAGMA user_version = 2;
        CREATE TABLE agent_meta_lifetimes (
            session_id TEXT PRIMARY KEY NOT NULL, title TEXT, updated_at TEXT, meta TEXT,
            failure_id TEXT, failure_revision INTEGER, needs_repair INTEGER NOT NULL DEFAULT 0,
            epoch INTEGER NOT NULL DEFAULT 1, holder TEXT NOT NULL DEFAULT ''
        ) WITHOUT ROWID;
        INSERT INTO agent_meta_lifetimes VALUES ('old', '"T"', NULL, '{"v":1}', NULL, NULL, 0, 4,
            'gone');
        """
    )
    conn.close()
    async with await SQLiteStore.open(path) as store:
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            claimed = await owner.claim_lifetime("old")
            assert claimed is not None
            assert (claimed.snapshot().title, claimed.title_set_by_client) == ("T", False)
            assert await claimed.set_client_title("Mine")
            created = owner.open_lifetime("new")  # a row written by this version
            await created.publish(meta={"n": 1})
        old = await store.read("old")
        new = await store.read("new")
        assert old is not None
        assert new is not None
        assert (old.epoch, old.title, old.client_title) == (5, '"Mine"', True)
        assert (new.epoch, new.client_title) == (1, False)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    conn.close()


async def test_a_session_closed_and_opened_again_does_not_readmit_its_former_holder(
    driver: Driver, kind: str, place: str
) -> None:
    """A held a session; B took it over and closed it (its record deleted), then opened it
    again: its record starts over at epoch 1, the epoch A still holds. A never learned of the
    takeover; its writes must still change nothing (they are conditional on the holder too),
    and its close must not delete B's record."""
    shared, stack = await stores(kind, place)
    async with two_owners(driver, shared, stack) as (a, b):
        stale = a.open_lifetime("s")
        await stale.publish(meta={"a": 1})
        assert await b.claim_lifetime("s") is not None
        b.close_lifetime("s")
        await b.wait_flushed()
        assert await (await shared.open()).read("s") is None
        again = b.open_lifetime("s")
        await again.publish(meta={"b": 1})
        reopened = await (await shared.open()).read("s")
        assert reopened is not None
        assert reopened.epoch == 1  # the number A holds

        with pytest.raises(LifetimeTakenOverError):
            await stale.publish(meta={"stale": True})
        assert meta_of(await (await shared.open()).read("s")) == {"b": 1}

        stale_too = a.open_lifetime("t")  # the same again, ending with a close by A
        await stale_too.publish(meta={"a": 1})
        assert await b.claim_lifetime("t") is not None
        b.close_lifetime("t")
        await b.wait_flushed()
        mine = b.open_lifetime("t")
        await mine.publish(meta={"b": 1})
        a.close_lifetime("t")  # A's stale close
        await a.wait_flushed()
        assert meta_of(await (await shared.open()).read("t")) == {"b": 1}  # B's record stays
        await mine.publish(meta={"b": 2})
        assert meta_of(await (await shared.open()).read("t")) == {"b": 2}  # and B still holds it
