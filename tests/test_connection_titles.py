"""``session/set_title`` on agent_meta's trio connection (R13), with the reference agent, on ACP v1
and v2, without a store and with one (SQLite, PostgreSQL).

The connection answers it, never the agent: the confirming ``session_info_update``, then the
response ``{"title": ...}``, both only once the store has the title. The reference agent's own
``/title`` stays an agent-generated title: it never reaches the client again, and
``session/list`` and every resync show the client's title, after a restart too.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from agent_meta import BaseAgent, MemoryStore, RequestContext
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.sansio.inbound._titles import MAX_TITLE_LENGTH
from agent_meta.stores._sqlite import SQLiteStore
from tests.failing_store import WrappedStore
from tests.peer import Peer, serve
from tests.test_reference_agent import _info_updates, _prompt, _replies, _start

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from agent_meta import JsonObject, JsonValue, StoredLifetime
    from agent_meta.stores._postgres import PostgresStore

VERSIONS = pytest.mark.parametrize("version", [1, 2])


def confirmation(version: int, title: str, meta: Any = None) -> dict[str, Any]:
    """The ``session_info_update`` that confirms a title (v1: the whole known state)."""
    if version == 1:
        return {"title": title, "_meta": meta or {}}
    return {"title": title}


async def set_title(peer: Peer, session_id: object, title: object) -> tuple[list[Any], Any]:
    return await peer.call("session/set_title", {"sessionId": session_id, "title": title})


async def resume(peer: Peer, session_id: str) -> list[dict[str, Any]]:
    before, answer = await peer.call("session/resume", {"sessionId": session_id, "cwd": "/work"})
    assert answer["result"] == {}, answer
    return before


async def listed_titles(peer: Peer) -> dict[object, object]:
    listing = await peer.request("session/list", {})
    return {entry["sessionId"]: entry.get("title") for entry in listing["result"]["sessions"]}


@VERSIONS
async def test_r13_set_title_is_confirmed_then_answered_and_the_agent_title_stays_off(
    version: int,
) -> None:
    async with serve(ReferenceAgent(), mirror_version=version) as peer:
        sid = await _start(peer, version)
        await _prompt(peer, sid, "/title Generated\n/meta set a 1")
        before, answer = await set_title(peer, sid, "Mine")
        assert answer["result"] == {"title": "Mine"}  # both shapes: RFD clients ignore it
        assert _info_updates(before) == [confirmation(version, "Mine", {"a": 1})]
        frames, _ = await _prompt(peer, sid, "/title Generated again\n/meta set b 2\n/title")
        assert "title set" in "".join(_replies(frames))  # as the agent sees it
        titles = [u["title"] for u in _info_updates(frames) if "title" in u]
        assert titles == (["Mine"] if version == 1 else [])  # v1 frames carry the whole state
        assert peer.mirror.info(sid).title == "Mine"
        assert peer.mirror.meta(sid) == {"a": 1, "b": 2}
        assert await listed_titles(peer) == {sid: "Mine"}
        resynced = _info_updates(await resume(peer, sid))
        assert resynced[-1]["title"] == "Mine"
        again, answer = await set_title(peer, sid, "Renamed")  # each later one replaces it
        assert answer["result"] == {"title": "Renamed"}
        assert _info_updates(again) == [confirmation(version, "Renamed", {"a": 1, "b": 2})]
        assert await listed_titles(peer) == {sid: "Renamed"}
    assert peer.mirror.info(sid).title == "Renamed"


@VERSIONS
async def test_r13_refused_requests_store_and_send_nothing(version: int) -> None:
    store = MemoryStore()
    async with serve(ReferenceAgent(), mirror_version=version, store=store) as peer:
        sid = await _start(peer, version)
        await _prompt(peer, sid, "/title Generated")
        cases: list[tuple[dict[str, Any], int]] = [
            ({"sessionId": "nobody", "title": "T"}, ErrorCode.RESOURCE_NOT_FOUND),
            ({"sessionId": sid, "title": 3}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid, "title": None}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid, "title": "  "}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid, "title": "x" * (MAX_TITLE_LENGTH + 1)}, ErrorCode.INVALID_PARAMS),
            ({"title": "T"}, ErrorCode.INVALID_PARAMS),
        ]
        for params, code in cases:
            before, answer = await peer.call("session/set_title", params)
            assert before == [], params
            assert answer["error"]["code"] == code, (params, answer)
        _, answer = await set_title(peer, "nobody", "T")
        assert answer["error"]["data"] == {"sessionId": "nobody"}
        record = store.records[sid]
        assert (record.title, record.client_title) == ('"Generated"', False)
        assert peer.mirror.info(sid).title == "Generated"
        await peer.request("session/close", {"sessionId": sid})
        closed, answer = await set_title(peer, sid, "T")
        assert (closed, answer["error"]["code"]) == ([], ErrorCode.RESOURCE_NOT_FOUND)


class GatedStore(WrappedStore):
    """Holds back the write of a client-set title until :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()

    async def write(
        self, saves: Sequence[StoredLifetime], deletes: Sequence[tuple[str, int]], *, holder: str
    ) -> frozenset[str]:
        if any(record.client_title for record in saves):
            await self.release.wait()
        return await super().write(saves, deletes, holder=holder)


async def test_r13_nothing_is_answered_before_the_store_has_the_title() -> None:
    store = GatedStore()
    async with serve(ReferenceAgent(), store=store) as peer:
        sid = await _start(peer)
        received: list[dict[str, Any]] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                received.extend(await peer.until_response("t1"))

            params = {"sessionId": sid, "title": "Mine"}
            await peer.send({"id": "t1", "method": "session/set_title", "params": params})
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert received == []  # neither the confirmation nor the response
            assert isinstance(store.inner, MemoryStore)
            assert not store.inner.records[sid].client_title
            store.release.set()
        assert [m.get("result") for m in received] == [None, {"title": "Mine"}]
        assert received[0]["params"]["update"]["title"] == "Mine"


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the agent keeps its sessions and lifetimes: a SQLite file or a PostgreSQL URL."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return str(tmp_path / "agent.sqlite")


async def open_durable(place: str, stack: AsyncExitStack) -> SQLiteStore | PostgresStore:
    if place.startswith("postgresql:"):
        from agent_meta import PostgresStore  # psycopg: only where PostgreSQL is tested

        return await stack.enter_async_context(await PostgresStore.open(place))
    return await stack.enter_async_context(await SQLiteStore.open(place))


@VERSIONS
async def test_r13_the_client_title_survives_a_restart(version: int, durable: str) -> None:
    """A killed and restarted agent (a new connection, a new agent object, the same store):
    ``session/list`` reads the client's title from the store before the session is resumed,
    the resync restores it, and the agent's titles stay off the wire."""
    async with AsyncExitStack() as stack:
        await _restart(version, await open_durable(durable, stack))


async def _restart(version: int, durable: SQLiteStore | PostgresStore) -> None:
    agent = await ReferenceAgent.with_store(durable)
    async with serve(agent, mirror_version=version, store=durable) as peer:
        sid = await _start(peer, version)
        await set_title(peer, sid, "Mine")
        await _prompt(peer, sid, "/title Generated")
    agent = await ReferenceAgent.with_store(durable)
    async with serve(agent, mirror_version=version, store=durable) as peer:
        init = {"protocolVersion": version, "info": {"name": "t", "version": "0"}}
        await peer.request("initialize", init)
        assert await listed_titles(peer) == {sid: "Mine"}  # from the store: not open here
        resynced = _info_updates(await resume(peer, sid))
        assert resynced[-1]["title"] == "Mine"
        frames, _ = await _prompt(peer, sid, "/title After the restart")
        assert _info_updates(frames) == []  # nothing but a title: nothing sent
        assert await listed_titles(peer) == {sid: "Mine"}
    assert peer.mirror.info(sid).title == "Mine"


class ListingAgent(BaseAgent):
    """Lists every session it created with a title of its own, whatever the owner knows: the
    connection must put the client's titles in."""

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.names = list(names)

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        name = str(params["name"])
        self.names.append(name)
        return {"sessionId": name}

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {}

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        entries: list[JsonValue] = [
            {"sessionId": name, "cwd": "/", "title": "agent's"} for name in self.names
        ]
        return {"sessions": [*entries, {"sessionId": 7}]}  # a broken entry stays as it is


async def test_r13_the_connection_lists_the_client_titles_of_open_and_stored_sessions() -> None:
    store = MemoryStore()
    init = {"protocolVersion": 2, "info": {"name": "t", "version": "0"}}
    async with serve(ListingAgent(), store=store) as peer:
        await peer.request("initialize", init)
        for name in ("a", "b"):
            await peer.request("session/new", {"name": name})
        await set_title(peer, "a", "Mine")
        assert await listed_titles(peer) == {"a": "Mine", "b": "agent's", 7: None}
    async with serve(ListingAgent(["a", "b"]), store=store) as peer:  # a restart
        await peer.request("initialize", init)
        assert await listed_titles(peer) == {"a": "Mine", "b": "agent's", 7: None}  # stored
        await resume(peer, "b")
        await set_title(peer, "b", "Also mine")
        assert await listed_titles(peer) == {"a": "Mine", "b": "Also mine", 7: None}
