"""The reference agent on the official SDK (``agent-meta agent --runtime sdk``) over OS pipes.

The SDK's own connection runs the agent with the adapter under it (``tests/sdk_pair.py``); a raw
client reads the wire. What the real clients check for both runtimes is in
``integration/``; these tests pin what is particular to the SDK agent: which commands go through
the SDK (and are absorbed) and which through the lifetime handle, the order of the command list
after ``session/new``, and how turns end.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.sdk_release import REFERENCE_AGENT_SKIP

if REFERENCE_AGENT_SKIP is not None:  # its modules do not import there
    pytest.skip(REFERENCE_AGENT_SKIP, allow_module_level=True)

from agent_meta import ErrorCode
from agent_meta.agents._common._storage import HistoryStore
from agent_meta.agents.sdk_agent._agent import SdkReferenceAgent
from agent_meta.sdk._release import installed_release
from agent_meta.testing import ClientMirror
from tests.sdk_pair import RawClient, run

if TYPE_CHECKING:
    from agent_meta.sdk import SdkAdapter

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes

Message = dict[str, Any]


ROUTES_CLOSE = installed_release().routes_close
needs_close = pytest.mark.skipif(
    not ROUTES_CLOSE, reason="this SDK release does not route session/close"
)


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


@needs_close
def test_close_stops_a_burst_and_nothing_of_the_session_follows_its_response() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "/burst 1000000 n")
        # Under a busy writer bursts coalesce, so the client may see n skip values.
        await client.read_until(
            lambda m: (m.get("params", {}).get("update", {}).get("_meta") or {}).get("n", 0) >= 3
        )
        closed = await client.call("session/close", {"sessionId": sid})
        assert closed["result"] == {}
        later = await prompt(client, sid, "/meta set late 1")
        assert later["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND  # closed: resume it first

    client, _ = go(scenario)
    close = next(i for i, m in enumerate(client.messages) if m.get("result") == {} and i > 2)
    after = [m for m in client.messages[close + 1 :] if "method" in m]
    assert after == [], after


@needs_close
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
            assert answer["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        answer = await prompt(client, "nope", "hi")
        assert answer["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        listed = await client.call("session/list", {"cursor": "forged"})
        assert listed["error"]["code"] == -32602
        if ROUTES_CLOSE:
            assert (await client.call("session/close", {"sessionId": "nope"}))["result"] == {}

    go(scenario)


class _GatedHistory(HistoryStore):
    """A history whose message writes wait for the test: a cancellation can land mid-write."""

    def __init__(self) -> None:
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()
        self.stored: list[str] = []

    async def save_session(self, *args: Any, holder: str | None = None) -> None:
        return None

    async def add_message(
        self, session_id: str, role: str, message_id: str, text: str, *, holder: str | None = None
    ) -> None:
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


@needs_close
def test_a_refused_resume_does_not_reopen_a_closed_session() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "/title Old")
        await client.call("session/close", {"sessionId": sid})
        refused = await client.call("session/resume", {"sessionId": sid})  # no cwd: -32602
        assert refused["error"]["code"] == -32602
        assert not adapter.owner.has_lifetime(sid)
        answer = await prompt(client, sid, "/meta set x 1")
        assert answer["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND  # closed: resume it first

    go(scenario)


def test_unknown_sessions_refused_by_load_or_resume_leave_no_lifetime() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        for n in range(10):
            method = "session/load" if n % 2 else "session/resume"
            params = {"sessionId": f"bogus-{n}", "cwd": "/", "mcpServers": []}
            answer = await client.call(method, params)
            assert answer["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        assert adapter.owner.lifetime_ids() == [sid]

    go(scenario)


class _YieldingHistory(HistoryStore):
    """A history whose writes suspend once, as a real store's thread does (a pass through the
    event loop, not a wait on time)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []

    async def save_session(self, *args: Any, holder: str | None = None) -> None:
        await asyncio.sleep(0)

    async def add_message(
        self, session_id: str, role: str, message_id: str, text: str, *, holder: str | None = None
    ) -> None:
        await asyncio.sleep(0)
        self.messages.append((role, text))


@needs_close
def test_a_prompt_right_behind_close_ends_before_the_close_response() -> None:
    """Both lines arrive in one write while a turn waits in ``/ask``: the close stops the late
    prompt too (as the trio connection does), so nothing of it outlives the close."""
    history = _YieldingHistory()

    def make(adapter: SdkAdapter) -> SdkReferenceAgent:
        return SdkReferenceAgent(adapter, history)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await client.send(
            {"id": 1, "method": "session/prompt", "params": prompt_params(sid, "/ask ok?")}
        )
        await client.read_until(lambda m: m.get("method") == "session/request_permission")
        close = {"jsonrpc": "2.0", "id": 2, "method": "session/close", "params": {"sessionId": sid}}
        late = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": prompt_params(sid, "late"),
        }
        await client.send_line(json.dumps(close).encode() + b"\n" + json.dumps(late).encode())
        await client.read_until(lambda m: m.get("id") == 2 and "method" not in m)

    client, _ = asyncio.run(run(make, scenario))
    answers = {
        m["id"]: m for m in client.messages if "method" not in m and m.get("id") in (1, 2, 3)
    }
    assert list(answers)[-1] == 2, answers  # the close response comes last
    late = answers[3]
    if "error" in late:  # stopped before its message was stored
        assert late["error"]["code"] == ErrorCode.REQUEST_CANCELLED
        assert ("user", "late") not in history.messages
    else:
        assert late["result"] == {"stopReason": "cancelled"}


@needs_close
def test_a_load_running_when_the_session_closes_is_answered_before_the_close() -> None:
    class SlowReplay(SdkReferenceAgent):
        replaying = asyncio.Event()

        async def _restore(self, session: Any, *, replay: bool) -> None:
            self.replaying.set()
            await asyncio.Event().wait()  # until the close stops it

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        params = {"sessionId": sid, "cwd": "/", "mcpServers": []}
        await client.send({"id": 1, "method": "session/load", "params": params})
        await SlowReplay.replaying.wait()
        closed = await client.call("session/close", {"sessionId": sid})
        assert closed["result"] == {}

    client, _ = asyncio.run(run(SlowReplay, scenario))
    answers = [m for m in client.messages if "method" not in m and m.get("id") == 1]
    assert answers == [
        {"jsonrpc": "2.0", "id": 1, "error": answers[0]["error"]}
    ]  # answered, before the close's response (the scenario read that one last)
    assert answers[0]["error"]["code"] == ErrorCode.REQUEST_CANCELLED
    closing = next(
        i for i, m in enumerate(client.messages) if m.get("result") == {} and m["id"] > 102
    )
    assert client.messages.index(answers[0]) < closing


def test_the_replayed_agent_message_is_the_text_sent_live() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "a\n/meta set b 1")
        live = "".join(replies(client))
        before = len(client.messages)
        await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        replayed = [
            m["params"]["update"]
            for m in client.messages[before:]
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert "".join(u["content"]["text"] for u in replayed) == live
        assert live == "a\nok: _meta.b set\n"

    go(scenario)
