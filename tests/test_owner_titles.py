"""Client-set titles (R13) on the owner, on both drivers (``tests/drivers.py``), with every store
(memory, a SQLite file, the real PostgreSQL server) and without one.

What a client folds (:class:`ClientMirror`) is what these tests judge: once the client set the
title, an agent's later titles never reach it, the rest of each publication does, and the
client's title comes back after the lifetime is taken over by another owner (a restart).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest

from agent_meta import LifetimeTakenOverError, MemoryStore, MetaValueError, SessionInfoPatch
from agent_meta.owner._titles import client_titles
from agent_meta.stores._sqlite import SQLiteStore
from agent_meta.testing import ClientMirror, RecordingTransport

if TYPE_CHECKING:
    from pathlib import Path

    from agent_meta.stores._store import LifetimeStore
    from tests.drivers import Driver


@pytest.fixture(params=["none", "memory", "sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


async def open_store(
    kind: str, stack: AsyncExitStack, tmp_path: Path, request: pytest.FixtureRequest
) -> LifetimeStore | None:
    if kind == "none":
        return None
    if kind == "memory":
        return MemoryStore()
    if kind == "postgres":
        from agent_meta import PostgresStore  # psycopg: only where PostgreSQL is tested

        url: str = request.getfixturevalue("postgres_url")
        return await stack.enter_async_context(await PostgresStore.open(url))
    return await stack.enter_async_context(await SQLiteStore.open(tmp_path / "titles.sqlite"))


async def test_r13_agent_titles_never_reach_the_client_once_it_set_one(
    driver: Driver, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with AsyncExitStack() as stack:
        store = await open_store(store_kind, stack, tmp_path, request)
        mirror = ClientMirror()
        async with driver.open_owner(RecordingTransport(mirror=mirror), store=store) as owner:
            lifetime = owner.open_lifetime("s")
            await lifetime.publish(title="generated", meta={"a": 1})
            before = lifetime.title_set_by_client
            assert await lifetime.set_client_title("Mine")
            assert (before, lifetime.title_set_by_client) == (False, True)
            assert await lifetime.publish(title="generated again", meta={"b": 2})
            assert await lifetime.publish(title=None)
            lifetime.publish_nowait(title="and again")
            await owner.wait_flushed()
            assert mirror.info("s").title == "Mine"
            assert mirror.meta("s") == {"a": 1, "b": 2}
            assert lifetime.snapshot().title == "Mine"
            assert owner.statistics().suppressed_titles == 3
            assert await client_titles(owner, ["s"]) == {"s": "Mine"}
            assert await client_titles(owner, ["other"]) == {}


async def test_r13_the_client_title_outlives_the_owner_with_a_store(
    driver: Driver, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A restart: a new owner on the same store claims the lifetime back, with its client-set
    title and the rule; its resync carries the client's title, not the agent's."""
    if store_kind == "none":
        pytest.skip("without a store a lifetime ends with its owner")
    async with AsyncExitStack() as stack:
        store = await open_store(store_kind, stack, tmp_path, request)
        async with driver.open_owner(RecordingTransport(), store=store) as owner:
            lifetime = owner.open_lifetime("s")
            await lifetime.publish(title="generated", meta={"a": 1})
            await lifetime.set_client_title("Mine")
        mirror = ClientMirror()
        async with driver.open_owner(RecordingTransport(mirror=mirror), store=store) as owner:
            assert await client_titles(owner, ["s"]) == {
                "s": "Mine"
            }  # read from the store, not claimed
            seed = SessionInfoPatch(title="the agent's idea")
            claimed = await owner.claim_lifetime("s", seed=seed)
            assert claimed is not None
            assert claimed.title_set_by_client
            assert claimed.snapshot().title == "Mine"  # the seed's title was the agent's
            claimed.resync()
            await claimed.publish(title="after the restart", meta={"b": 2})
            await owner.wait_flushed()
            assert mirror.info("s").title == "Mine"
            assert mirror.meta("s") == {"a": 1, "b": 2}
            assert owner.statistics().suppressed_titles == 2


async def test_r13_the_confirmation_is_written_only_once_the_store_has_the_title(
    driver: Driver,
) -> None:
    store = MemoryStore()

    class Checking(RecordingTransport):
        async def send_frame(self, frame: bytes) -> None:
            message = json.loads(frame)
            update = message.get("params", {}).get("update", {})
            if update.get("title") == "Mine":
                record = store.records["s"]
                assert (record.title, record.client_title) == ('"Mine"', True)
            await super().send_frame(frame)

    transport = Checking()
    async with driver.open_owner(transport, store=store) as owner:
        lifetime = owner.open_lifetime("s")
        assert await lifetime.set_client_title("Mine")
        assert store.records["s"].client_title  # stored when the call returned
        await owner.wait_flushed()
    assert any(b'"title":"Mine"' in frame for frame in transport.frames)


async def test_r13_a_lifetime_taken_over_refuses_the_client_title(driver: Driver) -> None:
    store = MemoryStore()
    async with (
        driver.open_owner(RecordingTransport(), store=store) as first,
        driver.open_owner(RecordingTransport(), store=store) as second,
    ):
        held = first.open_lifetime("s")
        await held.publish(meta={"a": 1})
        assert await second.claim_lifetime("s") is not None
        with pytest.raises(LifetimeTakenOverError):
            await held.set_client_title("Mine")
        assert not store.records["s"].client_title


async def test_r13_an_ended_lifetime_and_a_title_that_is_no_str_are_refused(
    driver: Driver,
) -> None:
    async with driver.open_owner(RecordingTransport()) as owner:
        lifetime = owner.open_lifetime("s")
        with pytest.raises(MetaValueError, match="title"):
            await lifetime.set_client_title(None)  # type: ignore[arg-type]
        owner.close_lifetime("s")
        assert not await lifetime.set_client_title("Mine")
        assert not lifetime.adopt_client_title("Mine")


async def test_r13_an_adopted_title_is_kept_without_a_frame_of_its_own(driver: Driver) -> None:
    mirror = ClientMirror()
    transport = RecordingTransport(mirror=mirror)
    async with driver.open_owner(transport, store=MemoryStore()) as owner:
        lifetime = owner.open_lifetime("s")
        await lifetime.publish(title="Mine")  # what a proxied agent's confirmation folds into
        await owner.wait_flushed()
        sent = len(transport.frames)
        assert lifetime.adopt_client_title("Mine")
        await lifetime.publish(title="generated")
        await owner.wait_flushed()
        assert len(transport.frames) == sent
        assert mirror.info("s").title == "Mine"
        assert await client_titles(owner, ["s"]) == {"s": "Mine"}
