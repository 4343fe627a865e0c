"""The reference agent on the official SDK (``agent-meta agent --runtime sdk``) over OS pipes.

The SDK's own connection runs the agent with the adapter under it (``tests/sdk_pair.py``); a raw
client reads the wire. What the real clients check for both runtimes is in
``integration/``; these tests pin what is particular to the SDK agent: which commands go through
the SDK (and are absorbed) and which through the lifetime handle, the order of the command list
after ``session/new``, and how turns end.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from sdk_pair import RawClient, run

from agent_meta import RESOURCE_NOT_FOUND
from agent_meta.apps.reference_agent._storage import HistoryStore
from agent_meta.apps.sdk_agent import SdkReferenceAgent
from agent_meta.testing import ClientMirror

if TYPE_CHECKING:
    from agent_meta.sdk import SdkAdapter

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes

Message = dict[str, Any]


def go(scenario: Any) -> tuple[RawClient, SdkAdapter]:
    return asyncio.run(run(SdkReferenceAgent, scenario))


async def start(client: RawClient) -> str:
    await client.call("initialize", {"protocolVersion": 1})
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    return session_id


def prompt_params(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def prompt(client: RawClient, session_id: str, text: str) -> Message:
    return await client.call("session/prompt", prompt_params(session_id, text))


def replies(client: RawClient) -> list[str]:
    return [
        m["params"]["update"]["content"]["text"]
        for m in client.messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]


def test_commands_go_through_the_sdk_or_the_handle_and_fold_as_on_trio() -> None:
    script = (
        '/title Plan\n/meta set a {"x":1}\n/meta patch {"b":2,"gone":null}\n/meta rm b\n'
        '/domain set agent-meta notes.owner "alice"\n/fail inc 1 Broken\n/resolve inc 1\n'
        "/trace 00-t-s-01 c 3\n/meta clear\n/meta set d 4\n/title"
    )

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        answer = await prompt(client, sid, script)
        assert answer["result"] == {"stopReason": "end_turn"}

    client, adapter = go(scenario)
    sid = client.messages[1]["result"]["sessionId"]
    mirror = ClientMirror(protocol_version=1)
    for message in client.messages:
        mirror.feed(message)
    assert mirror.meta(sid) == {"d": 4}
    assert mirror.info(sid).title is None
    assert mirror.notification_meta(sid) == [{"traceparent": "00-t-s-01"}]
    notes = {"notes": {"owner": "alice"}}
    failure = {"id": "inc", "revision": 1, "title": "Broken", "severity": "error"}
    # v1 merged mode: every frame is the whole object (R10), whichever path published it.
    assert [u["_meta"] for u in client.info_updates(sid)] == [
        {},
        {"a": {"x": 1}},
        {"a": {"x": 1}, "b": 2},
        {"a": {"x": 1}},
        {"a": {"x": 1}, "agent-meta": notes},
        {"a": {"x": 1}, "agent-meta": {**notes, "failure": failure}},
        {"a": {"x": 1}, "agent-meta": notes},
        {"a": {"x": 1}, "agent-meta": notes, "c": 3},
        {},  # /meta clear, through the handle
        {"d": 4},
        {"d": 4},  # /title with no text, through the handle: title null
    ]
    assert [u["title"] for u in client.info_updates(sid)] == ["Plan"] * 10 + [None]
    assert not any("error" in reply for reply in replies(client)), replies(client)
    statistics = adapter.statistics()
    # /title TEXT, /meta set (twice), patch, rm, /trace: sent with conn.session_update.
    assert statistics.absorbed_updates == 6
    assert statistics.passed_through_updates == 0


def test_the_command_list_follows_the_new_session_response() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start(client)
        await client.read_until(
            lambda m: (
                m.get("params", {}).get("update", {}).get("sessionUpdate")
                == "available_commands_update"
            )
        )

    client, _ = go(scenario)
    kinds = [m.get("method") or ("response" if "result" in m else "error") for m in client.messages]
    assert kinds == ["response", "response", "session/update"]
    commands = client.messages[2]["params"]["update"]["availableCommands"]
    assert [c["name"] for c in commands][:2] == ["meta", "title"]


def test_cancel_ends_a_turn_waiting_for_the_client_with_cancelled() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await client.send(
            {"id": 7, "method": "session/prompt", "params": prompt_params(sid, "/ask ok?")}
        )
        asked = await client.read_until(lambda m: m.get("method") == "session/request_permission")
        assert asked["params"]["toolCall"]["title"] == "ok?"
        await client.send({"method": "session/cancel", "params": {"sessionId": sid}})
        answer = await client.read_until(lambda m: m.get("id") == 7 and "method" not in m)
        assert answer["result"] == {"stopReason": "cancelled"}

    go(scenario)


def test_close_stops_a_burst_and_nothing_of_the_session_follows_its_response() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "/burst 1000000 n")
        await client.read_until(
            lambda m: (m.get("params", {}).get("update", {}).get("_meta") or {}).get("n") == 3
        )
        closed = await client.call("session/close", {"sessionId": sid})
        assert closed["result"] == {}
        later = await prompt(client, sid, "/meta set late 1")
        assert later["error"]["code"] == RESOURCE_NOT_FOUND  # closed: resume it first

    client, _ = go(scenario)
    close = next(i for i, m in enumerate(client.messages) if m.get("result") == {} and i > 2)
    after = [m for m in client.messages[close + 1 :] if "method" in m]
    assert after == [], after


def test_reopening_a_closed_session_clears_the_title_the_client_kept() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "/title Old\n/meta set old 1")
        await client.call("session/close", {"sessionId": sid})
        loaded = await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert loaded["result"] == {}
        assert adapter.lifetime(sid).snapshot().title is None

    client, _ = go(scenario)
    sid = client.messages[1]["result"]["sessionId"]
    mirror = ClientMirror(protocol_version=1)
    for message in client.messages:
        mirror.feed(message)
    assert mirror.info(sid).title is None
    assert not mirror.meta(sid)  # the closed lifetime's metadata did not come back


def test_unknown_sessions_and_cursors_are_refused() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start(client)
        for method in ("session/load", "session/resume"):
            answer = await client.call(method, {"sessionId": "nope", "cwd": "/", "mcpServers": []})
            assert answer["error"]["code"] == RESOURCE_NOT_FOUND
        answer = await prompt(client, "nope", "hi")
        assert answer["error"]["code"] == RESOURCE_NOT_FOUND
        listed = await client.call("session/list", {"cursor": "forged"})
        assert listed["error"]["code"] == -32602
        assert (await client.call("session/close", {"sessionId": "nope"}))["result"] == {}

    go(scenario)


class _GatedHistory(HistoryStore):
    """A history whose message writes wait for the test: a cancellation can land mid-write."""

    def __init__(self) -> None:
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()
        self.stored: list[str] = []

    async def save_session(self, *args: Any) -> None:
        return None

    async def add_message(self, session_id: str, role: str, message_id: str, text: str) -> None:
        self.writing.set()
        await self.gate.wait()
        self.stored.append(message_id)


def test_a_cancel_during_the_message_write_still_inserts_it_and_ends_the_turn_cancelled() -> None:
    """As in the trio agent: an error answer to a prompt means its message was not inserted,
    so once the write has begun the turn ends ``cancelled`` with the message in both places."""
    history = _GatedHistory()
    agents: list[SdkReferenceAgent] = []

    def make(adapter: SdkAdapter) -> SdkReferenceAgent:
        agents.append(SdkReferenceAgent(adapter, history))
        return agents[-1]

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await client.send({"id": 7, "method": "session/prompt", "params": prompt_params(sid, "hi")})
        await history.writing.wait()
        await agents[0].cancel(sid)
        history.gate.set()
        answer = await client.read_until(lambda m: m.get("id") == 7 and "method" not in m)
        assert answer.get("result") == {"stopReason": "cancelled"}, answer

    asyncio.run(run(make, scenario))
    assert history.stored[0] == "user-1"
    session = next(iter(agents[0]._sessions.values()))
    assert [m.message_id for m in session.history] == history.stored
