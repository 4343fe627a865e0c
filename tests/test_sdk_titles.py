"""``session/set_title`` behind the official-SDK adapter (R13), on the SDK's ACP v1 side, over OS
pipes (``tests/sdk_pair.py``), without a store and with one (SQLite, PostgreSQL).

The SDK has no such method: the adapter answers it before the SDK sees it, as its gate answers
what the SDK gets wrong, and rewrites what the SDK answers to ``initialize`` (advertising it)
and ``session/list`` (the client's titles). The reference agent on the SDK (``--runtime sdk``)
publishes ``/title`` through the SDK's ``session_update``: an agent-generated title that stays off
the wire once the client set one.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import acp
import pytest

from agent_meta import MemoryStore
from agent_meta.agents._common._storage import HistoryStore
from agent_meta.agents.sdk_agent._agent import SdkReferenceAgent
from agent_meta.agents.sdk_agent._base import SdkSession
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.stores._sqlite import SQLiteStore
from agent_meta.testing import ClientMirror
from tests.sdk_pair import RawClient, run
from tests.support.sdk_mini_agent import MiniAgent

if TYPE_CHECKING:
    from pathlib import Path

    from agent_meta.sdk import SdkAdapter
    from agent_meta.stores._postgres import PostgresStore

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes

Message = dict[str, Any]


async def start(client: RawClient) -> str:
    init = await client.call("initialize", {"protocolVersion": 1})
    sessions = init["result"]["agentCapabilities"]["sessionCapabilities"]
    assert sessions["setTitle"] == sessions["title"] == {}  # both shapes advertised
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    return session_id


async def prompt(client: RawClient, session_id: str, text: str) -> Message:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return await client.call("session/prompt", params)


async def call(client: RawClient, method: str, params: Message) -> tuple[list[Message], Message]:
    """The messages the agent sent before the response, and the response."""
    seen = len(client.messages)
    answer = await client.call(method, params)
    return client.messages[seen:-1], answer


def info_updates(messages: list[Message]) -> list[Message]:
    return [
        {k: v for k, v in m["params"]["update"].items() if k != "sessionUpdate"}
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]


def fold(client: RawClient) -> ClientMirror:
    mirror = ClientMirror(protocol_version=1)
    for message in client.messages:
        mirror.feed(message)
    return mirror


async def listed(client: RawClient) -> dict[str, object]:
    listing = await client.call("session/list", {})
    return {e["sessionId"]: e.get("title") for e in listing["result"]["sessions"]}


def reference(adapter: SdkAdapter, history: HistoryStore | None = None) -> SdkReferenceAgent:
    return SdkReferenceAgent(adapter, history)


def test_r13_the_adapter_answers_set_title_and_the_sdk_agent_title_stays_off() -> None:
    sessions: list[str] = []

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        sessions.append(sid)
        await prompt(client, sid, "/title Generated")
        before, answer = await call(
            client, "session/set_title", {"sessionId": sid, "title": "Mine"}
        )
        assert answer["result"] == {"title": "Mine"}
        assert info_updates(before) == [{"title": "Mine", "_meta": {}}]
        seen = len(client.messages)
        await prompt(client, sid, "/title Generated again\n/meta set a 1\n/title")
        titles = {u.get("title") for u in info_updates(client.messages[seen:])}
        assert titles == {"Mine"}  # v1: every frame is the whole state, with the client's title
        assert await listed(client) == {sid: "Mine"}
        before, answer = await call(client, "session/load", {"sessionId": sid, "cwd": "/"})
        assert info_updates(before)[-1] == {"title": "Mine", "_meta": {"a": 1}}  # the resync
        stats = adapter.statistics()
        assert stats.owner.suppressed_titles == 2
        assert stats.refused_requests == 0

    client, _ = asyncio.run(run(reference, scenario))
    assert fold(client).info(sessions[0]).title == "Mine"


def test_r13_refused_requests_send_nothing_and_reach_neither_the_sdk_nor_the_store() -> None:
    store = MemoryStore()

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "/title Generated")
        cases: list[tuple[Message, int]] = [
            ({"sessionId": "nobody", "title": "T"}, ErrorCode.RESOURCE_NOT_FOUND),
            ({"sessionId": sid, "title": 3}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid, "title": ""}, ErrorCode.INVALID_PARAMS),
            ({"sessionId": sid, "title": "x" * 8193}, ErrorCode.INVALID_PARAMS),
        ]
        for params, code in cases:
            before, answer = await call(client, "session/set_title", params)
            assert before == []
            assert answer["error"]["code"] == code, (params, answer)
        record = store.records[sid]
        assert (record.title, record.client_title) == ('"Generated"', False)

    asyncio.run(run(reference, scenario, store=store))


def test_r13_set_title_in_a_batch_is_answered_in_the_batch_array() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        batch = [
            {"jsonrpc": "2.0", "id": "a", "method": "session/set_title",
             "params": {"sessionId": sid, "title": "Mine"}},
            {"jsonrpc": "2.0", "id": "b", "method": "session/set_title",
             "params": {"sessionId": sid, "title": 1}},
        ]  # fmt: skip
        await client.send_line(json.dumps(batch).encode())
        answer = await client.read_until(lambda m: isinstance(m, list))
        assert [(r["id"], "result" in r) for r in answer] == [("a", True), ("b", False)]  # type: ignore[index]

    asyncio.run(run(reference, scenario))


class ListingAgent(MiniAgent):
    """An SDK agent that lists its sessions with titles of its own."""

    async def list_sessions(self, **_: Any) -> acp.schema.ListSessionsResponse:
        sessions = [
            acp.schema.SessionInfo(session_id=sid, cwd="/", title="agent's")
            for sid in sorted(self.history)
        ]
        return acp.schema.ListSessionsResponse(sessions=sessions)


def test_r13_the_adapter_rewrites_what_the_sdk_lists() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        for _ in range(2):
            await client.call("session/new", {"cwd": "/", "mcpServers": []})
        await client.call("session/set_title", {"sessionId": "s1", "title": "Mine"})
        assert await listed(client) == {"s1": "Mine", "s2": "agent's"}

    asyncio.run(run(ListingAgent, scenario))


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return str(tmp_path / "agent.sqlite")


async def open_durable(place: str, stack: AsyncExitStack) -> SQLiteStore | PostgresStore:
    if place.startswith("postgresql:"):
        from agent_meta import PostgresStore  # psycopg: only where PostgreSQL is tested

        return await stack.enter_async_context(await PostgresStore.open(place))
    return await stack.enter_async_context(await SQLiteStore.open(place))


def test_r13_the_client_title_survives_a_restart(durable: str) -> None:
    sessions: list[str] = []

    async def before_restart(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        sessions.append(sid)
        await client.call("session/set_title", {"sessionId": sid, "title": "Mine"})

    async def after_restart(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        sid = sessions[0]
        assert await listed(client) == {sid: "Mine"}  # from the store: not open here
        before, _ = await call(client, "session/resume", {"sessionId": sid, "cwd": "/"})
        assert info_updates(before)[-1]["title"] == "Mine"
        seen = len(client.messages)
        await prompt(client, sid, "/title After the restart")
        assert info_updates(client.messages[seen:]) == []

    async def main() -> None:
        async with AsyncExitStack() as stack:
            store = await open_durable(durable, stack)
            history = HistoryStore(store)
            await history.load_sessions(SdkSession)  # creates the agent's tables

            def agent(adapter: SdkAdapter) -> SdkReferenceAgent:
                return reference(adapter, history)

            await run(agent, before_restart, store=store)
            await run(agent, after_restart, store=store)

    asyncio.run(main())
