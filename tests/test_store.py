"""Durable lifetimes: the owner with a store, the SQLite store, and fault injection on both.

Every test that runs an owner runs on both drivers (trio and asyncio, ``tests/drivers.py``); the
SQLite store then runs its worker threads under that runtime too.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio

from agent_meta import MemoryStore, OwnerClosedError, StoredLifetime, StoreError
from agent_meta.core._errors import StoreCorruptError, StoreLockedError, StoreSchemaError
from agent_meta.stores._sqlite import SQLiteStore
from agent_meta.stores._urls import redact_url
from agent_meta.testing import ClientMirror, FailingTransport, RecordingTransport
from tests.failing_store import FailingStore, WrappedStore

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tests.drivers import Driver, Sequencer


class CheckingTransport(RecordingTransport):
    """Asserts, as each frame is sent, that the store already holds what the frame carries."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(mirror=ClientMirror())
        self.store = store

    async def send_frame(self, frame: bytes) -> None:
        await super().send_frame(frame)
        assert self.mirror is not None
        for session_id in self.mirror.session_ids:
            seen = self.mirror.meta(session_id) or {}
            record = self.store.records.get(session_id)
            stored = json.loads(record.meta) if record is not None and record.meta else {}
            for key, value in seen.items():
                assert key in stored, f"frame with {key!r} written before it was stored"
                assert stored[key] >= value


async def test_every_frame_is_stored_before_it_is_written(driver: Driver) -> None:
    store = MemoryStore()
    transport = CheckingTransport(store)
    async with driver.open_owner(transport, store=store) as owner:
        lifetime = owner.open_lifetime("s")
        for value in range(1, 200):
            await lifetime.publish(meta={"n": value, f"k{value % 7}": value})
        await owner.wait_flushed()
        assert owner.statistics().store_writes >= 1
    record = store.records["s"]
    assert record.meta is not None
    assert json.loads(record.meta)["n"] == 199


async def test_a_new_owner_resumes_the_stored_lifetime_and_its_incident(driver: Driver) -> None:
    store = MemoryStore()
    async with driver.open_owner(RecordingTransport(), store=store) as owner:
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(title="T", updated_at="2026-01-01T00:00:00Z", meta={"a": [1, None]})
        await lifetime.report_failure("inc", 4, {"why": "boom"})
    mirror = ClientMirror()
    async with driver.open_owner(RecordingTransport(mirror=mirror), store=store) as owner:
        stored = await owner.stored_snapshot("s")
        assert stored is not None
        assert stored.title == "T"
        claimed = await owner.claim_lifetime("s")
        assert claimed is not None
        lifetime = claimed
        assert lifetime.current_failure is not None
        assert lifetime.current_failure.revision == 4
        snapshot = lifetime.snapshot()
        assert snapshot.title == "T"
        assert snapshot.meta == {"a": [1, None], "agent-meta": {"failure": {"why": "boom"}}}
        lifetime.resync()
        assert not await lifetime.resolve_failure("inc", 3)
        assert await lifetime.resolve_failure("inc", 4)
    assert mirror.meta("s") == {"a": [1, None]}
    assert mirror.info("s").title == "T"
    record = store.records["s"]
    assert record.failure is None
    assert record.meta == '{"a":[1,null]}'


async def test_a_new_incident_with_the_same_record_is_stored(driver: Driver) -> None:
    store = MemoryStore()
    async with driver.open_owner(RecordingTransport(), store=store) as owner:
        lifetime = owner.open_lifetime("s")
        await lifetime.report_failure("a", 1, {"same": True})
        await owner.wait_flushed()
        await lifetime.report_failure("b", 1, {"same": True})  # the same record
        await owner.wait_flushed()
        failure = store.records["s"].failure
        assert failure is not None
        assert failure.incident_id == "b"


async def test_close_deletes_the_record_before_later_frames(driver: Driver) -> None:
    store = MemoryStore()
    seen: list[bool] = []

    class Probe(RecordingTransport):
        async def send_frame(self, frame: bytes) -> None:
            if b'"id":7' in frame:
                seen.append("s" in store.records)
            await super().send_frame(frame)

    async with driver.open_owner(Probe(), store=store) as owner:
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(meta={"a": 1})
        await owner.wait_flushed()
        assert "s" in store.records
        owner.close_lifetime("s")
        await owner.send_response(7, result={})
    assert seen == [False]
    async with driver.open_owner(RecordingTransport(), store=store) as owner:
        assert owner.open_lifetime("s").snapshot().meta is None  # a fresh lifetime (R5)


async def test_a_lost_frame_stores_the_repair_flag(driver: Driver) -> None:
    store = MemoryStore()
    transport = FailingTransport(fail_on=1, mode="lost")
    async with driver.open_owner(transport, store=store) as owner:
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(meta={"a": 1})
        await driver.wait_all_tasks_blocked()
        # The repair resync went out, so the stored flag is clear again.
        await owner.wait_flushed()
    assert store.records["s"].needs_repair is False
    assert transport.lost
    # A stored flag comes back: the next frame is preceded by a resync.
    store2 = MemoryStore()
    await store2.write([StoredLifetime("s", meta='{"a":1}', needs_repair=True)], [], holder="x")
    mirror = ClientMirror()
    async with driver.open_owner(RecordingTransport(mirror=mirror), store=store2) as owner:
        claimed = await owner.claim_lifetime("s")
        assert claimed is not None
        await claimed.publish(meta={"b": 2})
    assert mirror.meta("s") == {"a": 1, "b": 2}
    assert owner.statistics().repairs == 1


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("disk I/O error"),
        OSError(5, "fsync failed"),
        sqlite3.OperationalError("database or disk is full"),
    ],
    ids=["io", "fsync", "full"],
)
async def test_a_failing_store_stops_the_owner_before_the_frame(
    driver: Driver, error: Exception
) -> None:
    store = FailingStore(MemoryStore(), fail_on=2, error=error)
    transport = RecordingTransport(mirror=ClientMirror())

    async def run() -> None:
        async with driver.open_owner(transport, store=store) as owner:
            lifetime = owner.open_lifetime("s")
            await lifetime.publish(meta={"a": 1})
            await owner.wait_flushed()
            with pytest.raises(OwnerClosedError):
                await lifetime.publish(meta={"b": 2})  # accepted only once stored: it never is
            with pytest.raises(OwnerClosedError):
                await owner.wait_flushed()
            with pytest.raises(OwnerClosedError):
                await lifetime.publish(meta={"c": 3})

    with pytest.raises(StoreError) as caught:
        await run()
    assert caught.value.location == ":memory:"
    assert str(error) in str(caught.value)
    assert transport.mirror is not None
    assert transport.mirror.meta("s") == {"a": 1}  # the unstored frame never went out


# -- SQLiteStore ------------------------------------------------------------------------------


async def test_sqlite_round_trip_and_resume(driver: Driver, tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with (
        await SQLiteStore.open(path) as store,
        driver.open_owner(RecordingTransport(), store=store) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(title=None, meta={"a": {"b": "\u00e9"}, "n": 1.5})
        await lifetime.report_failure("i", 2, "x")
        owner.open_lifetime("gone")
        await owner.lifetime("gone").publish(meta={"z": 1})
        await owner.wait_flushed()
        owner.close_lifetime("gone")
    async with await SQLiteStore.open(path) as store:
        assert await store.read("gone") is None
        assert await store.read("s") is not None
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            claimed = await owner.claim_lifetime("s")
            assert claimed is not None
            lifetime = claimed
            assert lifetime.snapshot().title is None
            assert lifetime.snapshot().meta == {
                "a": {"b": "\u00e9"},
                "n": 1.5,
                "agent-meta": {"failure": "x"},
            }
            assert await lifetime.resolve_failure("i", 2)


async def test_sqlite_two_openers_share_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with await SQLiteStore.open(path) as first, await SQLiteStore.open(path) as second:
        stale = await first.write([StoredLifetime("s", meta='{"a":1}')], [], holder="one")
        assert stale == frozenset()
        claimed = await second.claim("s", "two")
        assert claimed is not None
        assert (claimed.meta, claimed.epoch) == ('{"a":1}', 2)
        # The first holder's next write is conditional on epoch 1: it changes nothing.
        stale = await first.write([StoredLifetime("s", meta='{"b":2}', epoch=1)], [], holder="one")
        assert stale == frozenset({"s"})
        read = await first.read("s")
        assert read is not None
        assert (read.meta, read.epoch) == ('{"a":1}', 2)


async def test_sqlite_a_write_lock_held_past_the_timeout_is_a_clear_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite"
    async with await SQLiteStore.open(path, lock_timeout=0) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process in a write transaction
        try:
            with pytest.raises(StoreLockedError) as caught:
                await store.write([StoredLifetime("s")], [], holder="x")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert str(path) in str(caught.value)
        assert await store.write([StoredLifetime("s")], [], holder="x") == frozenset()


async def test_sqlite_store_left_by_a_cancellation_still_releases_its_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = await SQLiteStore.open(path)
    with trio.CancelScope() as scope:
        scope.cancel()  # the block is left in a cancelled scope (a timeout, Ctrl-C)
        async with store:
            pass
    assert store.closed  # although aclose() ran in a cancelled scope
    async with await SQLiteStore.open(path, lock_timeout=0):
        pass  # no transaction was left open on the file


async def test_sqlite_refuses_newer_schema_and_foreign_files(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with await SQLiteStore.open(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreSchemaError, match="newer"):
        await SQLiteStore.open(path)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreSchemaError, match="not an agent_meta"):
        await SQLiteStore.open(other)


async def test_sqlite_refuses_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(StoreCorruptError) as caught:
        await SQLiteStore.open(path)
    assert str(path) in str(caught.value)


async def test_sqlite_refuses_a_damaged_record(driver: Driver, tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with await SQLiteStore.open(path) as store:
        await store.write([StoredLifetime("s", meta="{not json")], [], holder="x")
        with pytest.raises(StoreCorruptError, match="session 's'"):
            async with driver.open_owner(RecordingTransport(), store=store) as owner:
                await owner.claim_lifetime("s")


async def test_sqlite_read_only_file_fails_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with await SQLiteStore.open(path):
        pass
    with pytest.raises(StoreError) as caught:
        await SQLiteStore.open(f"file:{path}?mode=ro")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("fault", ["full", "read_only"])
async def test_sqlite_write_failure_stops_the_owner_with_nothing_partial(
    driver: Driver, tmp_path: Path, fault: str
) -> None:
    path = tmp_path / "s.sqlite"
    transport = RecordingTransport(mirror=ClientMirror())

    async def run(store: SQLiteStore) -> None:
        async with driver.open_owner(transport, store=store) as owner:
            lifetime = owner.open_lifetime("s")
            await lifetime.publish(meta={"a": 1})
            await owner.wait_flushed()
            if fault == "full":
                pages = await store.run(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
                await store.run(lambda c: c.execute(f"PRAGMA max_page_count = {pages}"))
                await lifetime.publish(meta={"big": "x" * 100_000})
            else:
                await store.run(lambda c: c.execute("PRAGMA query_only = 1"), write=False)
                await lifetime.publish(meta={"b": 2})
            await owner.wait_flushed()

    async with await SQLiteStore.open(path) as store:
        with pytest.raises(StoreError) as caught:
            await run(store)
        assert str(path) in str(caught.value)
        assert transport.mirror is not None
        assert transport.mirror.meta("s") == {"a": 1}
    async with await SQLiteStore.open(path) as store:
        record = await store.read("s")
        assert record is not None
        assert record.meta == '{"a":1}'


@pytest.mark.parametrize(
    ("url", "location", "hidden"),
    [
        # libpq takes "#" and "?" in a password as they are; urlsplit took them as delimiters
        ("postgresql://user:Sup3r#Secret@host/db", "postgresql://user@host/db", "Sup3r#Secret"),
        (
            "postgresql://u:a?b#c@h:5432/db?sslmode=require",
            "postgresql://u@h:5432/db?sslmode=require",
            "a?b#c",
        ),
        ("postgresql://u:pa/ss@h/db", "postgresql://u@h/db", "pa/ss"),  # libpq cannot read it
        ("postgresql://u:a@b@h/db", "postgresql://u@h/db", "a@b"),
        ("postgres://u:p%40ss@h/db?password=p@ss", "postgres://u@h/db", "p@ss"),
        ("postgresql:///db?host=/tmp&password=x%23y", "postgresql:///db?host=/tmp", "x#y"),
        ("postgresql://h/db?pass%77ord=s3cret&user=u", "postgresql://h/db?user=u", "s3cret"),
        ("postgresql:///db?host=/tmp", "postgresql:///db?host=/tmp", None),  # the form is kept
        ("postgresql://u@h1:1,h2:2/db?user=a@b", "postgresql://u@h1:1,h2:2/db?user=a@b", None),
    ],
)
def test_a_store_url_is_shown_without_its_password_as_libpq_reads_it(
    url: str, location: str, hidden: str | None
) -> None:
    shown, secrets = redact_url(url)
    assert shown == location
    if hidden is None:
        assert secrets == ()
    else:
        assert hidden in secrets
        assert hidden not in shown


class ClaimReadingFirst(WrappedStore):
    """Its first claim reads the store before the owner's first write is stored, and answers
    only after it is (a claim and a batch on two connections of one database, the batch
    committing between the claim's read and its answer). Later calls pass straight through."""

    def __init__(self, sequencer: Sequencer) -> None:
        super().__init__()
        self.sequencer = sequencer
        self.claims = 0
        self.writes = 0

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        self.claims += 1
        if self.claims > 1:
            return await super().claim(session_id, holder)
        async with self.sequencer(0):
            found = await super().claim(session_id, holder)
        async with self.sequencer(2):
            return found

    async def write(
        self, saves: Sequence[StoredLifetime], deletes: Sequence[tuple[str, int]], *, holder: str
    ) -> frozenset[str]:
        self.writes += 1
        if self.writes > 1:
            return await super().write(saves, deletes, holder=holder)
        async with self.sequencer(1):
            return await super().write(saves, deletes, holder=holder)


async def test_a_claim_that_read_before_the_first_record_was_stored_keeps_the_lifetime(
    driver: Driver,
) -> None:
    """The claim found nothing, but the lifetime's first record was stored meanwhile (it was
    this owner's all along): the owner asks the store again instead of ending its own lifetime
    as taken over (CI caught this race on PostgreSQL)."""
    store = ClaimReadingFirst(driver.sequencer())
    async with driver.open_owner(RecordingTransport(), store=store) as owner:
        fresh = owner.open_lifetime("s")
        fresh.publish_nowait(meta={"a": 1})
        assert await owner.claim_lifetime("s") is fresh
        assert owner.statistics().taken_over == 0
        assert store.claims == 2
        await fresh.publish(meta={"b": 2})
    record = await store.read("s")
    assert record is not None
    assert json.loads(record.meta or "null") == {"a": 1, "b": 2}
