"""The official TypeScript SDK 2.x (`/experimental/v2` entry point) as an ACP v2 client.

``integration/node/ts_client.mjs`` drives the agent and prints every message it received, raw
and in order (a synchronous TransformStream tap in front of the SDK), plus a marker when each
request resolves. These tests assert that order and fold the raw frames with
:class:`ClientMirror` (v2 rules); they also check what the SDK's own handler was given. All of
them need ACP v2: on ``--runtime sdk`` they run where the official Python SDK has its v2 side
(``acp.experimental.v2``, 1.0 on) and skip before.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_meta.testing import ClientMirror
from integration.harness import NodeRun, info_updates, run_node_client

pytestmark = [pytest.mark.usefixtures("node", "agent_runtime"), pytest.mark.acp_v2]

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _fold(messages: list[dict[str, Any]]) -> ClientMirror:
    mirror = ClientMirror(protocol_version=2)
    for message in messages:
        mirror.feed(message)
    return mirror


def _session_id(run: NodeRun, index: int = 0) -> str:
    responses = [line for line in run.lines if line["type"] == "response" and line["op"] == "new"]
    session_id = responses[index]["result"]["sessionId"]
    assert isinstance(session_id, str)
    return session_id


def _is_message(update: dict[str, Any]) -> bool:
    return update.get("sessionUpdate") in ("user_message", "agent_message", "agent_message_chunk")


def assert_resync(received: list[dict[str, Any]], expected_meta: Any, *, replay: bool) -> None:
    """Before a resume's response: [replay...] then ``_meta: null`` then the snapshot, if any."""
    updates = [m["params"]["update"] for m in received if m.get("method") == "session/update"]
    clears = [i for i, u in enumerate(updates) if "_meta" in u and u["_meta"] is None]
    assert clears, f"no _meta: null before the response: {updates}"
    clear = clears[-1]
    replayed = [i for i, u in enumerate(updates) if _is_message(u)]
    if replay:
        assert replayed, f"replayFrom start replayed nothing: {updates}"
        assert max(replayed) < clear, f"the clear came before the end of the replay: {updates}"
    else:
        assert not replayed, f"a resume without replayFrom replayed history: {updates}"
    after = [u for u in updates[clear:] if u["sessionUpdate"] == "session_info_update"]
    sent = [u["_meta"] for u in after if "_meta" in u]
    expected = [None] if expected_meta is None else [None, expected_meta]
    assert sent == expected, f"resync sent {sent}, expected {expected}"


def test_resume_without_and_with_replay() -> None:
    run = run_node_client("resume")
    session = _session_id(run)
    expected = {"a": {"x": 1}}

    prompt = info_updates(run.step_received(1))
    assert _fold(run.step_received(1)).meta(session) == expected
    assert any(
        u.get("_meta") == {"b": None} or (u.get("_meta") or {}).get("b", 0) is None for u in prompt
    ), f"the removal of b was not sent: {prompt}"

    assert_resync(run.step_received(2), expected, replay=False)
    assert_resync(run.step_received(3), expected, replay=True)

    mirror = _fold(run.received())
    assert mirror.meta(session) == expected
    assert mirror.info(session).title == "Plan"
    # The SDK itself kept the explicit null (a key present with a null value).
    handled = [p["update"] for p in run.handled_updates() if p["sessionId"] == session]
    assert sum(1 for u in handled if "_meta" in u and u["_meta"] is None) == 2


def test_removal_of_a_never_seen_key_is_sent() -> None:
    run = run_node_client("remove-unseen")
    session = _session_id(run)
    sent = [u["_meta"] for u in info_updates(run.step_received(1)) if "_meta" in u]
    assert any(isinstance(m, dict) and "never" in m and m["never"] is None for m in sent), sent
    handled = [p["update"].get("_meta") for p in run.handled_updates()]
    assert any(isinstance(m, dict) and m.get("never", 0) is None for m in handled), handled
    assert _fold(run.received()).meta(session) == {"kept": 1}
    assert_resync(run.step_received(2), {"kept": 1}, replay=False)


def test_nested_nulls_survive_the_wire_the_sdk_and_the_resync() -> None:
    run = run_node_client("nested-null")
    session = _session_id(run)
    value = {"a": None, "b": {"c": None}, "d": [None]}
    sent = [u["_meta"] for u in info_updates(run.step_received(1)) if "_meta" in u]
    assert sent == [{"k": value}]
    handled = [p["update"].get("_meta") for p in run.handled_updates()]
    assert {"k": value} in handled
    assert_resync(run.step_received(2), {"k": value}, replay=True)
    assert _fold(run.received()).meta(session) == {"k": value}


def test_notification_meta_is_forwarded_and_never_restored() -> None:
    run = run_node_client("notification-meta")  # the reference agent's /trace command
    session = _session_id(run)
    traced = [
        m for m in run.received() if m.get("method") == "session/update" and "_meta" in m["params"]
    ]
    assert [m["params"]["_meta"] for m in traced] == [{"traceparent": TRACEPARENT}]
    assert traced[0]["params"]["update"]["_meta"] == {"a": 1}
    assert traced in [run.step_received(1)[i : i + 1] for i in range(len(run.step_received(1)))]
    # The SDK hands params._meta to the handler.
    handled = [p for p in run.handled_updates() if "_meta" in p]
    assert [p["_meta"] for p in handled] == [{"traceparent": TRACEPARENT}]

    assert_resync(run.step_received(3), {"a": 1, "b": 2}, replay=True)
    mirror = _fold(run.received())
    assert mirror.meta(session) == {"a": 1, "b": 2}
    assert mirror.notification_meta(session) == [{"traceparent": TRACEPARENT}]


def test_close_then_resume_starts_a_fresh_lifetime() -> None:
    run = run_node_client("close")
    session = _session_id(run)
    assert _fold(run.step_received(1)).meta(session) == {"a": 1}
    assert info_updates(run.step_received(2)) == [], "close itself sent session info"
    # The closed lifetime is gone: resuming it resyncs to nothing, then only new state exists.
    assert_resync(run.step_received(3), None, replay=True)
    assert_resync(run.step_received(5), {"b": 2}, replay=False)
    mirror = _fold(run.received())
    assert mirror.meta(session) == {"b": 2}


# --- agent-to-client requests and work in flight (issue 12) ---------------------------------
#
# The TypeScript SDK 2.4.0 sends no JSON-RPC batches and answers a received array with -32600
# ("ACP does not use JSON-RPC batches", its v2 stream docs), so batches are tested over a raw
# pipe (tests/test_v2_pipe_conformance.py), not with this client.


def _states(messages: list[dict[str, Any]], session: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == session
        and m["params"]["update"]["sessionUpdate"] == "state_update"
    ]


def _permission(run: NodeRun) -> dict[str, Any]:
    asks: list[dict[str, Any]] = [
        line["params"] for line in run.lines if line["type"] == "permission"
    ]
    assert len(asks) == 1, run.lines
    return asks[0]


def test_ask_sends_request_permission_and_the_answer_reaches_the_prompt() -> None:
    run = run_node_client("ask")
    session = _session_id(run)
    ask = _permission(run)
    assert ask["sessionId"] == session
    assert ask["title"] == "Ship it?"
    assert [o["optionId"] for o in ask["options"]] == ["allow", "reject"]
    received = run.received()
    states = [s["state"] for s in _states(received, session)]
    assert states[:2] == ["running", "requires_action"]
    assert states[-2:] == ["running", "idle"]
    replies = [
        m["params"]["update"]["content"]["text"]
        for m in received
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert replies == ["answer: allow\n"]


def test_close_during_a_running_prompt_answers_after_its_final_updates() -> None:
    run = run_node_client("close-running")
    session = _session_id(run)
    marker = next(
        i
        for i, line in enumerate(run.lines)
        if line["type"] == "response" and line["op"] == "close"
    )
    # The close response is the last message received before its marker (recv comes first).
    response_line = max(
        i
        for i in range(marker)
        if run.lines[i]["type"] == "recv" and "method" not in run.lines[i]["message"]
    )
    before = [line["message"] for line in run.lines[:response_line] if line["type"] == "recv"]
    after = [line["message"] for line in run.lines[response_line + 1 :] if line["type"] == "recv"]
    assert run.lines[response_line]["message"]["result"] == {}
    last_state = _states(before, session)[-1]
    assert (last_state["state"], last_state["stopReason"]) == ("idle", "cancelled")
    cancels = [m for m in before if m.get("method") == "$/cancel_request"]
    assert len(cancels) == 1  # the pending permission request, cancelled before the response
    assert not any(
        m.get("params", {}).get("sessionId") == session for m in after if "method" in m
    ), after


def test_resume_during_a_running_prompt_reports_its_state_before_the_response() -> None:
    run = run_node_client("resume-running")
    session = _session_id(run)
    resume = run.step_received(4)
    states = _states(resume, session)
    assert states, resume
    assert states[-1]["state"] == "requires_action"  # still waiting for the permission answer
    assert_resync(resume, {"a": 1}, replay=True)
    ended = _states(run.received(), session)[-1]
    assert (ended["state"], ended["stopReason"]) == ("idle", "end_turn")
    assert _fold(run.received()).meta(session) == {"a": 1}


# --- client-set titles (R13) ---------------------------------------------------------------


def _response(run: NodeRun, index: int) -> Any:
    return next(
        line["result"]
        for line in run.lines
        if line["type"] == "response" and line.get("index") == index
    )


def test_set_title_through_the_sdk_beats_every_agent_title() -> None:
    """The SDK's unstable ``session/set_title`` (its schema requires the ``{title}`` result):
    confirmed before the response, then the agent's ``/title`` never reaches the client, and
    the listing and the resync carry the client's title."""
    run = run_node_client("set-title")
    session = _session_id(run)
    assert _response(run, 2) == {"title": "Mine"}
    assert info_updates(run.step_received(2)) == [
        {"sessionUpdate": "session_info_update", "title": "Mine"}
    ]
    assert all("title" not in u for u in info_updates(run.step_received(3)))
    assert [u.get("_meta") for u in info_updates(run.step_received(3))] == [{"b": 2}]
    assert [e.get("title") for e in _response(run, 4)["sessions"]] == ["Mine"]
    resync = info_updates(run.step_received(5))
    assert resync[-1]["title"] == "Mine"
    assert _response(run, 6) == {"title": "Renamed"}
    assert [e.get("title") for e in _response(run, 7)["sessions"]] == ["Renamed"]
    mirror = _fold(run.received())
    assert (mirror.info(session).title, mirror.meta(session)) == ("Renamed", {"a": 1, "b": 2})
    handled = [p["update"].get("title") for p in run.handled_updates() if "title" in p["update"]]
    assert "Generated again" not in handled
