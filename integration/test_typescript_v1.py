"""The official TypeScript SDK as an ACP v1 client (its main entry), against both runtimes of
the reference agent (trio, and ``--runtime sdk`` on the official Python SDK).

``integration/node/ts_client.mjs`` with ``AGENT_META_ACP=1`` runs the same scenarios as the v2
tests: ``resume`` is v1 ``session/resume`` (no replay), and ``resume`` with replay is
``session/load``. v1 renders every ``session_info_update`` as the whole known object (R10
merged mode), so a resync is one frame with the current state, after the replay and before the
response, and the client's state is the last object it got.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_meta.testing import ClientMirror
from integration.harness import NodeRun, info_updates, run_node_client

pytestmark = pytest.mark.usefixtures("node", "agent_runtime")

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _run(scenario: str) -> NodeRun:
    return run_node_client(scenario, protocol_version=1)


def _fold(messages: list[dict[str, Any]]) -> ClientMirror:
    mirror = ClientMirror(protocol_version=1)
    for message in messages:
        mirror.feed(message)
    return mirror


def _session_id(run: NodeRun) -> str:
    created = next(line for line in run.lines if line["type"] == "response" and line["op"] == "new")
    session_id = created["result"]["sessionId"]
    assert isinstance(session_id, str)
    return session_id


def _is_replay(update: dict[str, Any]) -> bool:
    return str(update.get("sessionUpdate", "")).endswith("_message_chunk")


def assert_resync(received: list[dict[str, Any]], meta: Any, title: Any, *, replay: bool) -> None:
    """Before a v1 resume or load response: [replay...] then the whole state, in one frame."""
    updates = [m["params"]["update"] for m in received if m.get("method") == "session/update"]
    infos = [i for i, u in enumerate(updates) if u["sessionUpdate"] == "session_info_update"]
    assert infos, f"no resync before the response: {updates}"
    replayed = [i for i, u in enumerate(updates) if _is_replay(u)]
    if replay:
        assert replayed, f"session/load replayed nothing: {updates}"
        assert max(replayed) < infos[-1], f"the resync came before the end of the replay: {updates}"
    else:
        assert not replayed, f"v1 session/resume replayed history: {updates}"
    last = updates[infos[-1]]
    assert last.get("_meta") == meta, last
    assert last.get("title") == title, last


def test_resume_and_load_resync_the_whole_state() -> None:
    run = _run("resume")
    session = _session_id(run)
    expected = {"a": {"x": 1}}
    states = [u["_meta"] for u in info_updates(run.step_received(1)) if "_meta" in u]
    assert states[-1] == expected, states
    assert all(isinstance(state, dict) for state in states), states  # v1: never null
    assert_resync(run.step_received(2), expected, "Plan", replay=False)
    assert_resync(run.step_received(3), expected, "Plan", replay=True)
    mirror = _fold(run.received())
    assert mirror.meta(session) == expected
    assert mirror.info(session).title == "Plan"
    # The SDK's own handler was given the same objects.
    handled = [p["update"] for p in run.handled_updates() if p["sessionId"] == session]
    infos = [u for u in handled if u["sessionUpdate"] == "session_info_update"]
    assert infos[-1]["_meta"] == expected


def test_nested_nulls_survive_the_wire_the_sdk_and_the_resync() -> None:
    run = _run("nested-null")
    session = _session_id(run)
    value = {"a": None, "b": {"c": None}, "d": [None]}
    assert_resync(run.step_received(2), {"k": value}, None, replay=True)
    handled = [p["update"].get("_meta") for p in run.handled_updates()]
    assert {"k": value} in handled
    assert _fold(run.received()).meta(session) == {"k": value}


def test_notification_meta_is_forwarded_on_its_frame_only() -> None:
    run = _run("notification-meta")
    traced = [
        m for m in run.received() if m.get("method") == "session/update" and "_meta" in m["params"]
    ]
    assert [m["params"]["_meta"] for m in traced] == [{"traceparent": TRACEPARENT}]
    handled = [p["_meta"] for p in run.handled_updates() if "_meta" in p]
    assert handled == [{"traceparent": TRACEPARENT}]
    assert_resync(run.step_received(3), {"a": 1, "b": 2}, None, replay=True)


def test_a_permission_request_reaches_the_sdk_and_its_answer_the_agent() -> None:
    run = _run("ask")
    asked = [line["params"] for line in run.lines if line["type"] == "permission"]
    assert len(asked) == 1
    assert asked[0]["toolCall"]["title"] == "Ship it?"  # v1: the question is a tool call
    turn = next(line for line in run.lines if line["type"] == "response" and line["index"] == 4)
    assert turn["result"] == {"stopReason": "end_turn"}
    replies = [
        u["content"]["text"]
        for u in (p["update"] for p in run.handled_updates())
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "answer: allow\n" in replies, replies


def test_close_then_load_starts_a_fresh_lifetime() -> None:
    run = _run("close")  # new, prompt, close, load, prompt, resume
    session = _session_id(run)
    # The load of the closed session: its history, then the fresh lifetime's state (R5): the
    # old title and metadata do not come back.
    assert_resync(run.step_received(3), {}, None, replay=True)
    assert_resync(run.step_received(5), {"b": 2}, None, replay=False)
    mirror = _fold(run.received())
    assert mirror.meta(session) == {"b": 2}
    assert mirror.info(session).title is None


# --- client-set titles (R13) ---------------------------------------------------------------


def _response(run: NodeRun, index: int) -> Any:
    return next(
        line["result"]
        for line in run.lines
        if line["type"] == "response" and line.get("index") == index
    )


def test_set_title_through_the_sdk_beats_every_agent_title() -> None:
    """v1: every frame after the client set the title carries it (the whole object), the
    agent's ``/title`` never; the listing and the ``session/load`` resync carry it too."""
    run = _run("set-title")
    session = _session_id(run)
    assert _response(run, 2) == {"title": "Mine"}
    assert [u.get("title") for u in info_updates(run.step_received(2))] == ["Mine"]
    assert {u.get("title") for u in info_updates(run.step_received(3))} == {"Mine"}
    assert [e.get("title") for e in _response(run, 4)["sessions"]] == ["Mine"]
    assert info_updates(run.step_received(5))[-1]["title"] == "Mine"
    assert _response(run, 6) == {"title": "Renamed"}
    assert [e.get("title") for e in _response(run, 7)["sessions"]] == ["Renamed"]
    assert _fold(run.received()).info(session).title == "Renamed"
