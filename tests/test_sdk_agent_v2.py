"""The reference agent on the official SDK's ACP v2 side (``acp.experimental.v2``, SDK 1.0)
over OS pipes: ``agent-meta agent --runtime sdk --protocol 2`` (and ``auto``).

The SDK's own v2 connection runs :class:`SdkReferenceAgentV2` with the adapter under it
(``tests/sdk_pair_v2.py``); a raw client reads the wire. What the real clients check for both
runtimes is in ``integration/`` and ``tests/test_v2_pipe_conformance.py``; these tests pin what
the v2 SDK agent does itself, since the SDK's v2 side does none of it: the early answer and the
order around it, the foreground ``state_update``\\ s, ``replayFrom``, what a cancellation does
before and after the message is inserted, which commands go through the SDK, and the
negotiating router. Skipped where the installed SDK has no v2 side (before 1.0).

No sleeps: every wait reads frames until one shows what is awaited (a v2 turn ends with its
idle ``state_update``); ``sdk_pair.GUARD`` bounds a scenario.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip(
    "acp.experimental.v2", reason="the installed official SDK has no ACP v2 side (before 1.0)"
)

from agent_meta import ErrorCode
from agent_meta.agents._common._storage import HistoryStore
from agent_meta.agents.sdk_agent._agent import SdkReferenceAgent
from agent_meta.agents.sdk_agent._agent_v2 import SdkReferenceAgentV2
from agent_meta.sdk._release import installed_release
from agent_meta.testing import ClientMirror
from tests.sdk_pair_v2 import run_auto, run_v2

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_meta.sdk import SdkAdapter
    from tests.sdk_pair import RawClient

Message = dict[str, Any]

INITIALIZE_V2: Message = {
    "protocolVersion": 2,
    "info": {"name": "sdk-agent-v2-tests", "version": "0"},
    "capabilities": {},
}


def go(
    scenario: Callable[[RawClient, SdkAdapter], Awaitable[None]],
    make: Callable[[SdkAdapter], Any] = SdkReferenceAgentV2,
    **options: Any,
) -> tuple[RawClient, SdkAdapter]:
    return asyncio.run(run_v2(make, scenario, **options))


async def start(client: RawClient) -> str:
    answer = await client.call("initialize", INITIALIZE_V2)
    assert answer["result"]["protocolVersion"] == 2, answer
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    # The command list follows the response, from a task of its own: read past it.
    await client.read_until(
        lambda m: update_of(m, session_id, "available_commands_update") is not None
    )
    return session_id


def prompt_params(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def update_of(message: Message, session_id: str, kind: str) -> Message | None:
    if message.get("method") != "session/update":
        return None
    params = message["params"]
    update: Message = params["update"]
    if params["sessionId"] != session_id or update.get("sessionUpdate") != kind:
        return None
    return update


def is_idle(message: Message, session_id: str) -> bool:
    state = update_of(message, session_id, "state_update")
    return state is not None and state["state"] == "idle"


def is_answer(message: Message, request_id: object) -> bool:
    return "method" not in message and message.get("id") == request_id


def states(messages: list[Message], session_id: str) -> list[Message]:
    found = (update_of(m, session_id, "state_update") for m in messages)
    return [state for state in found if state is not None]


def replies(messages: list[Message], session_id: str) -> list[str]:
    found = (update_of(m, session_id, "agent_message_chunk") for m in messages)
    return [chunk["content"]["text"] for chunk in found if chunk is not None]


async def send_prompt(client: RawClient, request_id: int, session_id: str, text: str) -> None:
    params = prompt_params(session_id, text)
    await client.send({"id": request_id, "method": "session/prompt", "params": params})


async def whole_turn(client: RawClient, session_id: str, text: str, request_id: int = 1) -> int:
    """Send a prompt and read until its turn ends; return where its frames start."""
    start = len(client.messages)
    await send_prompt(client, request_id, session_id, text)
    await client.read_until(lambda m: is_idle(m, session_id))
    return start


async def asked(client: RawClient) -> Message:
    """The agent's next ``session/request_permission``."""
    return await client.read_until(lambda m: m.get("method") == "session/request_permission")


def selected(option_id: str) -> Message:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def fold(client: RawClient) -> ClientMirror:
    mirror = ClientMirror(protocol_version=2)
    for message in client.messages:
        mirror.feed(message)
    return mirror


# --------------------------------------------------------------------------- the turn


def test_the_prompt_is_answered_first_then_echo_running_replies_and_idle() -> None:
    """ACP v2 ``migration.mdx``: the prompt is answered as soon as it is accepted; the turn
    then reports its updates and ends with the idle ``state_update`` carrying ``stopReason``.
    The SDK sends the answer from another task: the turn waits for it, so the order is the
    trio agent's, every time."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        begin = await whole_turn(client, sid, "hello\nworld")
        turn = client.messages[begin:]
        kinds = [
            "answer" if is_answer(m, 1) else m["params"]["update"]["sessionUpdate"] for m in turn
        ]
        assert kinds == [
            "answer",
            "user_message",
            "state_update",
            "agent_message_chunk",
            "agent_message_chunk",
            "state_update",
        ], kinds
        assert turn[0]["result"] == {"messageId": "user-1"}
        echo = turn[1]["params"]["update"]
        assert echo["messageId"] == "user-1"
        assert echo["content"] == [{"type": "text", "text": "hello\nworld"}]
        assert [s["state"] for s in states(turn, sid)] == ["running", "idle"]
        assert states(turn, sid)[-1]["stopReason"] == "end_turn"
        chunks = [m["params"]["update"] for m in turn[3:5]]
        assert [c["messageId"] for c in chunks] == ["agent-of-user-1"] * 2
        assert replies(turn, sid) == ["hello\n", "world\n"]

    go(scenario)


def test_without_the_observer_the_turn_still_runs_and_ends() -> None:
    """An embedding that passes no ``observers=[agent.observe]``: the turn does not wait for
    its answer to be sent (the order is then the scheduler's), but it runs and ends."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        begin = await whole_turn(client, sid, "hi")
        turn = client.messages[begin:]
        if not any(is_answer(m, 1) for m in turn):
            await client.read_until(lambda m: is_answer(m, 1))
        assert replies(client.messages, sid) == ["hi\n"]

    go(scenario, observe=False)


def test_commands_go_through_the_sdk_or_the_handle_and_fold_as_on_trio() -> None:
    """On v2 the SDK keeps ``None`` fields, so ``/meta clear`` and ``/title`` with no text go
    through it too (``_meta: null``, ``title: null``); only domain edits and incidents need
    the lifetime handle."""
    script = (
        '/title Plan\n/meta set a {"x":1}\n/meta patch {"b":2,"gone":null}\n/meta rm b\n'
        '/domain set agent-meta notes.owner "alice"\n/fail inc 1 Broken\n/resolve inc 1\n'
        "/trace 00-t-s-01 c 3\n/meta clear\n/meta set d 4\n/title"
    )

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await whole_turn(client, sid, script)

    client, adapter = go(scenario)
    sid = client.messages[1]["result"]["sessionId"]
    mirror = fold(client)
    assert mirror.meta(sid) == {"d": 4}
    assert mirror.info(sid).title is None
    assert mirror.notification_meta(sid) == [{"traceparent": "00-t-s-01"}]
    sent = [u.get("_meta", "absent") for u in client.info_updates(sid)]
    failure = {"id": "inc", "revision": 1, "title": "Broken", "severity": "error"}
    notes = {"notes": {"owner": "alice"}}
    # v2: patches as published, whichever path published them.
    assert sent == [
        "absent",  # /title Plan
        {"a": {"x": 1}},
        {"b": 2, "gone": None},
        {"b": None},
        {"agent-meta": notes},
        {"agent-meta": {**notes, "failure": failure}},  # a domain edit sends its whole key
        {"agent-meta": notes},
        {"c": 3},
        None,  # /meta clear, through the SDK
        {"d": 4},
        "absent",  # /title with no text, through the SDK: title null
    ]
    assert [u.get("title", "absent") for u in client.info_updates(sid)][-1] is None
    assert not any("error" in reply for reply in replies(client.messages, sid))
    statistics = adapter.statistics()
    # Everything but /domain, /fail and /resolve was sent with conn.session_update.
    assert statistics.absorbed_updates == 8
    assert statistics.passed_through_updates == 0


def test_the_command_list_follows_the_new_session_response_in_the_v2_shape() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        update = client.messages[-1]
        assert update_of(update, sid, "available_commands_update") is not None
        commands = update["params"]["update"]["availableCommands"]
        assert [c["name"] for c in commands][:2] == ["meta", "title"]
        assert all(c["type"] == "command" for c in commands), commands
        assert all(c["input"]["type"] == "text" for c in commands), commands

    client, _ = go(scenario)
    kinds = [m.get("method") or "answer" for m in client.messages]
    assert kinds == ["answer", "answer", "session/update"]


# --------------------------------------------------------------------------- /ask


def test_ask_requires_action_while_it_waits_and_the_answer_reaches_the_turn() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask Ship it?")
        ask = await asked(client)
        params = ask["params"]
        assert params["sessionId"] == sid
        assert params["title"] == "Ship it?"  # v2: a title, no toolCall
        assert "toolCall" not in params
        assert [o["optionId"] for o in params["options"]] == ["allow", "reject"]
        assert [s["state"] for s in states(client.messages, sid)] == [
            "running",
            "requires_action",
        ]
        await client.send({"id": ask["id"], "result": selected("allow")})
        await client.read_until(lambda m: is_idle(m, sid))
        assert [s["state"] for s in states(client.messages, sid)][-2:] == ["running", "idle"]
        assert replies(client.messages, sid) == ["answer: allow\n"]

    go(scenario)


@pytest.mark.parametrize("answer", [{}, None, "allow"], ids=["{}", "null", "string"])
def test_an_answer_that_is_not_an_outcome_is_not_answered(answer: object) -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask Allow?")
        ask = await asked(client)
        await client.send({"id": ask["id"], "result": answer})
        await client.read_until(lambda m: is_idle(m, sid))
        text = replies(client.messages, sid)
        assert text[-1].startswith("not answered: the client's answer is not a permission"), text

    go(scenario)


# --------------------------------------------------------------------------- cancelling


@pytest.mark.skipif(
    not installed_release().cancels_requests,
    reason="this SDK release's connection does not withdraw a cancelled request to the client "
    "with $/cancel_request (1.0.0rc3 on)",
)
def test_cancel_ends_a_turn_waiting_for_the_client_cancelled_and_withdraws_the_question() -> None:
    """``session/cancel`` during ``/ask``: the SDK withdraws the permission request with
    ``$/cancel_request``; the prompt was answered with its ``messageId`` and the turn ends
    ``cancelled``."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask ok?")
        ask = await asked(client)
        await client.send({"method": "session/cancel", "params": {"sessionId": sid}})
        withdrawn = await client.read_until(lambda m: m.get("method") == "$/cancel_request")
        assert withdrawn["params"] == {"requestId": ask["id"]}
        idle = await client.read_until(lambda m: is_idle(m, sid))
        assert idle["params"]["update"]["stopReason"] == "cancelled"
        answers = [m for m in client.messages if is_answer(m, 1)]
        assert [a.get("result") for a in answers] == [{"messageId": "user-1"}]

    go(scenario)


class _GatedHistory(HistoryStore):
    """A history whose session or message writes wait for the test."""

    def __init__(self, gate_on: str) -> None:
        self.gate_on = gate_on
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()
        self.stored: list[str] = []

    async def _hold(self, what: str) -> None:
        if what == self.gate_on and not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()

    async def save_session(self, *args: Any, holder: str | None = None) -> None:
        await self._hold("session")

    async def add_message(
        self, session_id: str, role: str, message_id: str, text: str, *, holder: str | None = None
    ) -> None:
        await self._hold("message")
        self.stored.append(message_id)


@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
def test_a_cancel_during_the_message_write_still_answers_the_message_id(how: str) -> None:
    """ACP v2 ``session/prompt``: "An error response means the user message was not inserted.
    Once it is inserted, the Agent MUST NOT answer with an error." A cancellation that lands
    while the message is written lets the write finish: the prompt gets its ``messageId``, the
    echo, and the turn ends ``cancelled``."""
    history = _GatedHistory("message")

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 7, sid, "hi")
        await history.waiting.wait()
        if how == "session/cancel":
            await client.send({"method": how, "params": {"sessionId": sid}})
        else:
            await client.send({"method": how, "params": {"requestId": 7}})
        # Answered after the cancel was read (and acted on: both act as they are read).
        await client.call("session/list", {})
        history.gate.set()
        idle = await client.read_until(lambda m: is_idle(m, sid))
        assert idle["params"]["update"]["stopReason"] == "cancelled"
        # A stopped turn does not wait for its answer: it may come before or after.
        answers = [m for m in client.messages if is_answer(m, 7)]
        answer = answers[0] if answers else await client.read_until(lambda m: is_answer(m, 7))
        assert answer.get("result") == {"messageId": "user-1"}, answer
        echo = [update_of(m, sid, "user_message") for m in client.messages]
        assert [e["messageId"] for e in echo if e is not None] == ["user-1"]

    agents: list[SdkReferenceAgentV2] = []

    def make(adapter: SdkAdapter) -> SdkReferenceAgentV2:
        agents.append(SdkReferenceAgentV2(adapter, history))
        return agents[-1]

    go(scenario, make=make)
    assert history.stored == ["user-1"]
    # Whether or not the stopped turn waited for its answer, nothing is left waiting.
    assert (agents[0]._answered, agents[0]._unwaited) == ({}, set())


@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
def test_a_cancel_before_the_message_is_inserted_answers_32800(how: str) -> None:
    history = _GatedHistory("session")

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        history.gate.set()  # session/new saves the session too
        sid = await start(client)
        history.gate.clear()
        await send_prompt(client, 7, sid, "hi")
        await history.waiting.wait()
        if how == "session/cancel":
            await client.send({"method": how, "params": {"sessionId": sid}})
        else:
            await client.send({"method": how, "params": {"requestId": 7}})
        answer = await client.read_until(lambda m: is_answer(m, 7))
        assert answer["error"]["code"] == ErrorCode.REQUEST_CANCELLED, answer
        history.gate.set()
        # The session is still usable, and nothing of the cancelled prompt was kept.
        await client.send({"id": 8, "method": "session/prompt", "params": prompt_params(sid, "x")})
        await client.read_until(lambda m: is_idle(m, sid))
        echoed = [update_of(m, sid, "user_message") for m in client.messages]
        assert [u["messageId"] for u in echoed if u is not None] == ["user-2"]

    go(scenario, make=lambda adapter: SdkReferenceAgentV2(adapter, history))
    assert history.stored == ["user-2", "agent-of-user-2"]


def test_cancel_request_of_an_answered_prompt_leaves_the_turn_running() -> None:
    """``CancelRequestNotification``: receivers ignore it for an already-answered request."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask Keep going?\nafter")
        ask = await asked(client)
        if not any(is_answer(m, 1) for m in client.messages):
            await client.read_until(lambda m: is_answer(m, 1))
        await client.send({"method": "$/cancel_request", "params": {"requestId": 1}})
        await client.send({"id": ask["id"], "result": selected("allow")})
        idle = await client.read_until(lambda m: is_idle(m, sid))
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        assert replies(client.messages, sid) == ["answer: allow\n", "after\n"]
        assert not any(m.get("method") == "$/cancel_request" for m in client.messages)

    go(scenario)


# --------------------------------------------------------------------------- close


@pytest.mark.skipif(
    not installed_release().cancels_requests,
    reason="this SDK release's connection does not withdraw a cancelled request to the client "
    "with $/cancel_request (1.0.0rc3 on)",
)
def test_close_during_ask_sends_the_final_updates_then_answers_and_nothing_follows() -> None:
    """Schema ``CloseSessionRequest``: the work is cancelled as by ``session/cancel``; its final
    updates and the idle ``state_update`` with ``stopReason: "cancelled"`` come before the close
    response, nothing of the session after it; the pending permission request is withdrawn."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask May I close?")
        ask = await asked(client)
        closed = await client.call("session/close", {"sessionId": sid})
        assert closed["result"] == {}
        close_at = client.messages.index(closed)
        before = client.messages[:close_at]
        last = states(before, sid)[-1]
        assert (last["state"], last.get("stopReason")) == ("idle", "cancelled")
        withdrawn = [m for m in before if m.get("method") == "$/cancel_request"]
        assert [m["params"]["requestId"] for m in withdrawn] == [ask["id"]]
        later = await client.call("session/prompt", prompt_params(sid, "late"))
        assert later["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND  # closed: resume it first

    client, _ = go(scenario)
    sid = client.messages[1]["result"]["sessionId"]
    close_at = next(i for i, m in enumerate(client.messages) if m.get("id") == 103)
    after = client.messages[close_at + 1 :]
    assert not [m for m in after if m.get("params", {}).get("sessionId") == sid], after
    answers = [m for m in client.messages if is_answer(m, 1)]
    assert [a.get("result") for a in answers] == [{"messageId": "user-1"}]


def test_closing_an_unknown_session_succeeds_and_unknown_sessions_are_refused() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start(client)
        assert (await client.call("session/close", {"sessionId": "nope"}))["result"] == {}
        resumed = await client.call("session/resume", {"sessionId": "nope", "cwd": "/"})
        assert resumed["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        prompted = await client.call("session/prompt", prompt_params("nope", "hi"))
        assert prompted["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        loaded = await client.call("session/load", {"sessionId": "nope", "cwd": "/"})
        assert loaded["error"]["code"] == -32601  # not part of v2
        assert "nope" not in adapter.owner.lifetime_ids()

    go(scenario)


def test_reopening_a_closed_session_clears_the_title_the_client_kept() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await whole_turn(client, sid, "/title Old\n/meta set old 1")
        await client.call("session/close", {"sessionId": sid})
        resumed = await client.call("session/resume", {"sessionId": sid, "cwd": "/"})
        assert resumed["result"] == {}
        assert adapter.lifetime(sid).snapshot().title is None

    client, _ = go(scenario)
    sid = client.messages[1]["result"]["sessionId"]
    mirror = fold(client)
    assert mirror.info(sid).title is None
    assert not mirror.meta(sid)


# --------------------------------------------------------------------------- resume


def resume_params(session_id: str, replay_from: object = "absent") -> Message:
    params: Message = {"sessionId": session_id, "cwd": "/"}
    if replay_from != "absent":
        params["replayFrom"] = replay_from
    return params


def test_resume_replays_only_from_start_with_the_live_message_ids() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        begin = await whole_turn(client, sid, "a\n/meta set b 1")
        live = "".join(replies(client.messages[begin:], sid))
        for replay_from in ("absent", None):
            mark = len(client.messages)
            answer = await client.call("session/resume", resume_params(sid, replay_from))
            assert answer["result"] == {}
            got = client.messages[mark:]
            kinds = [m["params"]["update"]["sessionUpdate"] for m in got if "method" in m]
            # No replay: the foreground state, then the resync (_meta: null, the snapshot).
            assert kinds == ["state_update", "session_info_update", "session_info_update"], kinds
            assert states(got, sid) == [{"sessionUpdate": "state_update", "state": "idle"}]
        mark = len(client.messages)
        await client.call("session/resume", resume_params(sid, {"type": "start"}))
        got = client.messages[mark:]
        kinds = [m["params"]["update"]["sessionUpdate"] for m in got if "method" in m]
        assert kinds[:3] == ["user_message", "agent_message", "state_update"], kinds
        user, agent = (m["params"]["update"] for m in got[:2])
        assert (user["messageId"], agent["messageId"]) == ("user-1", "agent-of-user-1")
        assert user["content"] == [{"type": "text", "text": "a\n/meta set b 1"}]
        assert "".join(block["text"] for block in agent["content"]) == live
        assert fold(client).meta(sid) == {"b": 1}

    go(scenario)


def test_an_unknown_replay_cursor_is_refused_as_on_trio() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await whole_turn(client, sid, "/meta set k 1")
        mark = len(client.messages)
        refused = await client.call(
            "session/resume", resume_params(sid, {"type": "_x-checkpoint", "at": 3})
        )
        assert refused["error"]["code"] == ErrorCode.INVALID_PARAMS, refused
        assert "_x-checkpoint" in refused["error"]["message"]
        assert [m for m in client.messages[mark:] if "method" in m] == []  # no replay, no resync
        assert adapter.owner.has_lifetime(sid)  # it was open: it stays open
        assert fold(client).meta(sid) == {"k": 1}

    go(scenario)


def test_resume_during_ask_reports_requires_action_before_its_response() -> None:
    """Schema ``ResumeSessionResponse``: "The agent MUST send a current ``state_update`` after
    any requested history replay and before this response, even without replay."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await whole_turn(client, sid, "/meta set a 1")
        await send_prompt(client, 2, sid, "/ask Resume me?")
        ask = await asked(client)
        mark = len(client.messages)
        resumed = await client.call("session/resume", resume_params(sid, {"type": "start"}))
        got = client.messages[mark : client.messages.index(resumed)]
        assert [s["state"] for s in states(got, sid)] == ["requires_action"]
        replayed = [update_of(m, sid, "user_message") for m in got]
        assert [u["messageId"] for u in replayed if u is not None] == ["user-1", "user-2"]
        await client.send({"id": ask["id"], "result": selected("reject")})
        idle = await client.read_until(lambda m: is_idle(m, sid))
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        after = client.messages[client.messages.index(resumed) + 1 :]
        assert len([m for m in after if is_idle(m, sid)]) == 1
        assert fold(client).meta(sid) == {"a": 1}

    go(scenario)


def test_the_foreground_state_covers_every_turn_of_the_session() -> None:
    """Two prompts: the second ends while the first waits for permission, so no ``idle`` until
    the first ends, and a resume meanwhile reports ``requires_action``."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await send_prompt(client, 1, sid, "/ask Go on?")
        ask = await asked(client)
        await send_prompt(client, 2, sid, "hello")
        await client.read_until(lambda m: "hello\n" in replies([m], sid))
        mark = len(client.messages)
        resumed = await client.call("session/resume", resume_params(sid))
        assert resumed["result"] == {}
        assert not any(is_idle(m, sid) for m in client.messages), client.messages
        assert [s["state"] for s in states(client.messages[mark:], sid)] == ["requires_action"]
        await client.send({"id": ask["id"], "result": selected("allow")})
        idle = await client.read_until(lambda m: is_idle(m, sid))
        assert idle["params"]["update"]["stopReason"] == "end_turn"

    go(scenario)


# --------------------------------------------------------------------------- session/list


def test_session_list_pages_and_refuses_a_cursor_it_did_not_issue() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", INITIALIZE_V2)
        created = set()
        for _ in range(5):
            answer = await client.call("session/new", {"cwd": "/"})
            created.add(answer["result"]["sessionId"])
        listed: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await client.call("session/list", {} if cursor is None else {"cursor": cursor})
            pages += 1
            listed.extend(s["sessionId"] for s in page["result"]["sessions"])
            cursor = page["result"].get("nextCursor")
            if cursor is None:
                break
        assert pages == 3
        assert sorted(listed) == sorted(created)
        for bad in ("forged", json.dumps({"p": 1})):
            refused = await client.call("session/list", {"cursor": bad})
            assert refused["error"]["code"] == ErrorCode.INVALID_PARAMS

    go(scenario, make=lambda adapter: SdkReferenceAgentV2(adapter, list_page_size=2))


# --------------------------------------------------------------------------- negotiation


@pytest.mark.parametrize("version", [1, 2])
def test_auto_serves_the_version_the_client_asks_for(version: int) -> None:
    """``--protocol auto``: the SDK's ``AgentProtocolRouter`` picks the agent by the requested
    version, and the adapter follows the version the answer names."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        if version == 2:
            params: Message = INITIALIZE_V2
        else:
            params = {"protocolVersion": 1, "clientCapabilities": {}}
        answer = await client.call("initialize", params)
        assert answer["result"]["protocolVersion"] == version, answer
        created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
        sid = created["result"]["sessionId"]
        prompted = await client.call("session/prompt", prompt_params(sid, "/meta set a 1"))
        if version == 2:
            assert prompted["result"] == {"messageId": "user-1"}
            await client.read_until(lambda m: is_idle(m, sid))
        else:
            assert prompted["result"] == {"stopReason": "end_turn"}
        assert adapter.owner.protocol_version == version

    client, _ = asyncio.run(run_auto(SdkReferenceAgent, SdkReferenceAgentV2, scenario))
    sid = client.messages[1]["result"]["sessionId"]
    info = client.info_updates(sid)
    assert info == [{"sessionUpdate": "session_info_update", "_meta": {"a": 1}}]
