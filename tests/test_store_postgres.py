# ruff: noqa: E402  (the psycopg imports follow the skip without it)
"""The PostgreSQL store on a real server (``tests/support/postgres_fixtures.py``): its schema,
its timeouts, its round trips, its errors, and the password that never shows.

The ownership protocol itself (claims, fencing, batches) is checked with the other stores in
``tests/test_store_takeover.py``. Store-level tests run on trio; those with an owner run on
both drivers (the store's worker threads then run under that runtime).
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.postgres_fixtures import skip_module_without_psycopg

skip_module_without_psycopg()  # before psycopg is imported (agent_meta.PostgresStore too)

import psycopg
import trio

from agent_meta import PostgresStore, StoredLifetime, StoreError
from agent_meta.core._errors import StoreCorruptError, StoreLockedError, StoreSchemaError
from agent_meta.stores._postgres import redact
from agent_meta.testing import ClientMirror, RecordingTransport

if TYPE_CHECKING:
    from tests.drivers import Driver
    from tests.support.postgres_server import PostgresServer


def sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own (another client of the database)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement.encode(), params)
        return cursor.fetchall() if cursor.description else []


async def test_round_trip_and_resume(driver: Driver, postgres_url: str) -> None:
    async with (
        await PostgresStore.open(postgres_url) as store,
        driver.open_owner(RecordingTransport(), store=store) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(title="T", meta={"a": {"b": "\u00e9"}, "n": 1.5})
        await lifetime.report_failure("i", 2, "x")
        await owner.open_lifetime("gone").publish(meta={"z": 1})
        owner.close_lifetime("gone")
        await owner.wait_flushed()
    async with await PostgresStore.open(postgres_url) as store:
        assert await store.read("gone") is None
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            claimed = await owner.claim_lifetime("s")
            assert claimed is not None
            assert claimed.snapshot().title == "T"
            assert claimed.snapshot().meta == {
                "a": {"b": "\u00e9"},
                "n": 1.5,
                "agent-meta": {"failure": "x"},
            }
            assert await claimed.resolve_failure("i", 2)


async def test_stores_opened_at_once_on_an_empty_database_create_the_schema_once(
    postgres_url: str,
) -> None:
    stores: list[PostgresStore] = []

    async def open_one() -> None:
        stores.append(await PostgresStore.open(postgres_url, min_size=0))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(open_one)
    for store in stores:
        await store.aclose()
    assert sql(postgres_url, "SELECT version FROM agent_meta_schema") == [(2,)]
    async with await PostgresStore.open(postgres_url) as store:
        await store.migrate()  # current: only read
        assert await store.write([StoredLifetime("s")], [], holder="h") == frozenset()


_VERSION_1 = """
CREATE TABLE agent_meta_lifetimes (
    session_id text PRIMARY KEY, title text, updated_at text, meta text, failure_id text,
    failure_revision bigint, needs_repair boolean NOT NULL DEFAULT false, epoch bigint NOT NULL,
    holder text NOT NULL
);
CREATE TABLE agent_meta_schema (
    single boolean PRIMARY KEY DEFAULT true CHECK (single), version integer NOT NULL
);
INSERT INTO agent_meta_schema (version) VALUES (1);
INSERT INTO agent_meta_lifetimes
VALUES ('old', '"T"', NULL, '{"v":1}', NULL, NULL, false, 3, 'gone');
"""


async def test_version_1_tables_are_migrated_by_the_first_store_that_opens_them(
    driver: Driver, postgres_url: str
) -> None:
    """Version 2 added whether a title is the client's (R13): the tables of version 1 get the
    column (no title of them is the client's), once, however many stores open them at once."""
    sql(postgres_url, _VERSION_1)
    stores: list[PostgresStore] = []

    async def open_one() -> None:
        stores.append(await PostgresStore.open(postgres_url, min_size=0))

    async with driver.task_group() as tasks:
        for _ in range(4):
            tasks.start_soon(open_one)
    for opened in stores:
        await opened.aclose()
    assert sql(postgres_url, "SELECT version FROM agent_meta_schema") == [(2,)]
    async with (
        await PostgresStore.open(postgres_url) as store,
        driver.open_owner(RecordingTransport(), store=store) as owner,
    ):
        claimed = await owner.claim_lifetime("old")
        assert claimed is not None
        assert (claimed.snapshot().title, claimed.title_set_by_client) == ("T", False)
        assert await claimed.set_client_title("Mine")
        record = await store.read("old")
        assert record is not None
        assert (record.epoch, record.title, record.client_title) == (4, '"Mine"', True)


async def test_a_newer_schema_and_foreign_tables_are_refused(
    postgres_server: PostgresServer,
) -> None:
    newer = postgres_server.fresh_url()
    async with await PostgresStore.open(newer):
        pass
    sql(newer, "UPDATE agent_meta_schema SET version = 99")
    with pytest.raises(StoreSchemaError, match="version 99 is newer") as caught:
        await PostgresStore.open(newer)
    assert caught.value.location == redact(newer)[0]
    foreign = postgres_server.fresh_url()
    sql(foreign, "CREATE TABLE agent_meta_lifetimes (x int)")
    with pytest.raises(StoreSchemaError, match="without agent_meta_schema"):
        await PostgresStore.open(foreign)


async def test_a_dropped_table_and_a_damaged_row_are_typed_errors(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.write([StoredLifetime("s")], [], holder="h")
        sql(postgres_url, "UPDATE agent_meta_lifetimes SET failure_id = 'i'")  # no revision
        with pytest.raises(StoreCorruptError, match="failure revision is damaged"):
            await store.claim("s", "other")
        sql(postgres_url, "DROP TABLE agent_meta_lifetimes")
        with pytest.raises(StoreSchemaError, match="agent_meta_lifetimes"):
            await store.read("s")


async def test_a_row_locked_by_a_frozen_session_delays_a_claim_by_lock_timeout_only(
    postgres_url: str,
) -> None:
    """Another session (a frozen holder, a stray psql) keeps the row locked: the claim and
    the write give up after ``lock_timeout`` with a typed error, not at ``statement_timeout``,
    and work again once the lock is gone."""
    async with await PostgresStore.open(
        postgres_url, lock_timeout=0.2, statement_timeout=60
    ) as store:
        await store.write([StoredLifetime("s", meta='{"a":1}')], [], holder="old")
        with psycopg.connect(postgres_url) as frozen:
            frozen.execute("SELECT * FROM agent_meta_lifetimes FOR UPDATE")  # and then nothing
            with trio.fail_after(30):
                with pytest.raises(StoreLockedError, match="lock_timeout") as claiming:
                    await store.claim("s", "new")
                with pytest.raises(StoreLockedError):
                    await store.write([StoredLifetime("s", epoch=1)], [], holder="old")
            frozen.rollback()
        assert str(claiming.value).startswith(f"lifetime store {store.location}:")
        claimed = await store.claim("s", "new")
        assert claimed is not None
        assert claimed.epoch == 2


async def test_a_frozen_transaction_of_a_store_is_ended_by_the_server(postgres_url: str) -> None:
    """A store whose process froze inside a transaction (here: an application's ``run``
    that stops) holds its locks only until ``idle_in_transaction_timeout``: the server ends
    that session, the other store's claim goes through, and the frozen call fails."""
    locked = threading.Event()
    thaw = threading.Event()

    def freeze(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT * FROM agent_meta_lifetimes FOR UPDATE")
        locked.set()
        thaw.wait(60)

    async with (
        await PostgresStore.open(postgres_url, idle_in_transaction_timeout=0.3) as frozen,
        await PostgresStore.open(postgres_url, lock_timeout=30) as other,
    ):
        await frozen.write([StoredLifetime("s")], [], holder="old")
        outcome: list[BaseException] = []

        async def run_frozen() -> None:
            try:
                await frozen.run(freeze)
            except StoreError as exc:
                outcome.append(exc)

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_frozen)
                await trio.to_thread.run_sync(locked.wait)
                claimed = await other.claim("s", "new")  # waits for the server to end it
                thaw.set()
        assert claimed is not None
        assert claimed.epoch == 2
        assert len(outcome) == 1
        assert outcome[0].location == frozen.location  # type: ignore[attr-defined]
        assert await frozen.read("s") == claimed  # the pool replaced the ended connection


def test_the_location_is_the_url_without_its_password() -> None:
    cases = {
        "postgresql://u:s3cret@h:5432/db": "postgresql://u@h:5432/db",
        "postgres://u:p%40ss@h/db?sslmode=require&password=p@ss": (
            "postgres://u@h/db?sslmode=require"
        ),
        "postgresql://h/db?password=s3cret&user=u": "postgresql://h/db?user=u",
        "host=h user=u password=s3cret dbname=db": "user=u dbname=db host=h",
    }
    for url, location in cases.items():
        shown, hidden = redact(url)
        assert shown == location
        assert hidden
        assert not any(secret in shown for secret in hidden)
    with pytest.raises(StoreError) as unreadable:
        redact("host=h password=open sesame")  # libpq's own message would quote "sesame"
    assert "sesame" not in str(unreadable.value)


async def test_the_password_shows_in_no_location_error_or_log_record(
    postgres_server: PostgresServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    password = postgres_server.password
    assert password in postgres_url
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="psycopg")  # psycopg sets WARNING on its logger
    errors: list[StoreError] = []
    async with await PostgresStore.open(postgres_url, lock_timeout=0.1) as store:
        assert password not in store.location
        assert "agent_meta_test@127.0.0.1" in store.location
        await store.write([StoredLifetime("s")], [], holder="h")
        with psycopg.connect(postgres_url) as frozen:
            frozen.execute("SELECT * FROM agent_meta_lifetimes FOR UPDATE")
            with pytest.raises(StoreLockedError) as locked:
                await store.claim("s", "x")
        errors.append(locked.value)
    with pytest.raises(StoreError) as closed:
        await store.read("s")
    errors.append(closed.value)
    wrong = postgres_url.replace(password, "not-" + password[::-1])
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(wrong)
    assert "password authentication failed" in str(refused.value)
    errors.append(refused.value)
    with pytest.raises(StoreError, match="nonsense") as unknown:
        await PostgresStore.open(postgres_url.replace("?", "?nonsense=1&"))
    errors.append(unknown.value)
    for error in errors:
        for text in (str(error), repr(error), error.location, str(error.__cause__ or "")):
            assert password not in text
            assert password[::-1] not in text
    assert any(record.name == "psycopg.pool" for record in caplog.records)
    for record in caplog.records:
        assert password not in record.getMessage()
    assert password not in caplog.text


class Trace:
    """libpq's protocol trace of the store's one connection (``max_size=1``), cut where the
    client waits for the server: each Sync (extended protocol) or Query (simple protocol)
    message ends one round trip."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by stop()

    async def start(self, store: PostgresStore) -> None:
        fd = self.file.fileno()

        def trace(conn: psycopg.Connection[Any]) -> None:
            conn.pgconn.trace(fd)
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

        await store.run(trace)

    async def stop(self, store: PostgresStore) -> list[str]:
        await store.run(lambda conn: conn.pgconn.untrace())
        self.file.seek(0)
        text = self.file.read()
        self.file.close()
        return re.split(r"^F\t\d+\t(?:Sync|Query)\b.*$", text, flags=re.MULTILINE)


async def test_each_call_is_one_round_trip(postgres_url: str) -> None:
    """A whole batch (begin, conditional deletes, updates and inserts, commit) goes to the
    server in one pipeline: the client waits once. A claim and a read wait once each."""
    async with await PostgresStore.open(postgres_url, min_size=1, max_size=1) as store:
        await store.write([StoredLifetime(f"old{i}") for i in range(3)], [], holder="h")
        trace = Trace()
        await trace.start(store)
        saves = [StoredLifetime(f"old{i}", meta='{"a":1}', epoch=1) for i in range(2)]
        saves += [StoredLifetime(f"new{i}") for i in range(5)]
        stale = await store.write(saves, [("old2", 1)], holder="h")
        claimed = await store.claim("new0", "other")
        read = await store.read("old1")
        waits = await trace.stop(store)
    assert stale == frozenset()
    assert claimed is not None
    assert read is not None
    assert len(waits) >= 5, waits  # the trace was cut: run's own commit and begin, the calls
    batch = [wait for wait in waits if "agent_meta_lifetimes AS l" in wait]
    assert len(batch) == 1, waits
    for part in (
        '"BEGIN"',
        "DELETE FROM",
        "UPDATE agent_meta_lifetimes",
        "INSERT INTO",
        '"COMMIT"',
    ):
        assert part in batch[0], part
    assert len([wait for wait in waits if "CASE WHEN holder" in wait]) == 1
    assert len([wait for wait in waits if "SELECT session_id" in wait]) == 1


async def test_a_write_held_up_past_lock_timeout_stops_the_owner_before_the_frame(
    driver: Driver, postgres_url: str
) -> None:
    transport = RecordingTransport(mirror=ClientMirror())
    async with await PostgresStore.open(postgres_url, lock_timeout=0.1) as store:
        with pytest.raises(StoreLockedError) as caught:  # noqa: PT012 - the owner's whole life
            async with driver.open_owner(transport, store=store) as owner:
                lifetime = owner.open_lifetime("s")
                await lifetime.publish(meta={"a": 1})
                with psycopg.connect(postgres_url) as frozen:
                    frozen.execute("SELECT * FROM agent_meta_lifetimes FOR UPDATE")
                    await lifetime.publish(meta={"b": 2})
        assert caught.value.location == store.location
        assert transport.mirror is not None
        assert transport.mirror.meta("s") == {"a": 1}
        record = await store.read("s")
        assert record is not None
        assert record.meta == '{"a":1}'


async def test_a_pooled_connection_the_server_closed_is_replaced_before_use(
    postgres_url: str,
) -> None:
    """A restart or an administrator ends the pool's idle connection: the next call notices
    it (the socket is readable while idle) and takes a fresh connection instead of failing."""
    async with await PostgresStore.open(postgres_url, min_size=1, max_size=1) as store:
        await store.write([StoredLifetime("s")], [], holder="h")
        pid = await store.run(lambda conn: conn.info.backend_pid)
        ended = sql(postgres_url, "SELECT pg_terminate_backend(%s, 10000)", (pid,))
        assert ended == [(True,)]  # returned once the backend had exited
        record = await store.read("s")
        assert record is not None
        assert await store.run(lambda conn: conn.info.backend_pid) != pid
