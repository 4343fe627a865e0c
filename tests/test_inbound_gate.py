"""The decisions in front of an SDK agent (sansio/_gate.py), without any SDK."""

from __future__ import annotations

from typing import Any

import pytest

from agent_meta.sansio._gate import InboundGate, InvalidEntry, Release


def request(request_id: object, method: str, **params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def result(request_id: object, value: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def initialized(gate: InboundGate, version: int = 1) -> InboundGate:
    assert gate.admit(request(0, "initialize", protocolVersion=version)).message is not None
    assert gate.outbound(result(0, {"protocolVersion": version})) is Release.WRITE
    return gate


def test_a_request_before_initialize_is_refused_and_a_notification_passes() -> None:
    gate = InboundGate()
    refused = gate.admit(request(1, "session/new", cwd="/", mcpServers=[]))
    assert refused.message is None
    assert refused.request_id == 1
    assert refused.error == {"code": -32600, "message": "'session/new' before 'initialize'"}
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    assert gate.admit(cancel).message is cancel
    assert gate.statistics.refused_requests == 1


def test_an_initialize_still_running_does_not_admit_other_requests() -> None:
    gate = InboundGate()
    assert gate.admit(request(0, "initialize", protocolVersion=1)).message is not None
    assert gate.admit(request(1, "session/list")).error is not None
    gate.outbound(result(0, {"protocolVersion": 1}))
    assert gate.admit(request(2, "session/list")).message is not None


def test_an_error_answer_to_initialize_leaves_the_connection_uninitialized() -> None:
    gate = InboundGate()
    gate.admit(request(0, "initialize", protocolVersion=1))
    gate.outbound({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": "no"}})
    assert not gate.initialized
    assert gate.admit(request(1, "session/list")).error is not None


def test_an_id_already_in_flight_is_refused_until_it_is_answered() -> None:
    gate = initialized(InboundGate())
    assert gate.admit(request(7, "session/list")).message is not None
    again = gate.admit(request(7, "session/list"))
    assert again.error is not None
    assert again.error["message"] == "request id 7 is already in flight"
    gate.outbound(result(7, {"sessions": []}))
    assert gate.admit(request(7, "session/list")).message is not None


@pytest.mark.parametrize("request_id", [True, 1.5, [1], {"a": 1}])
def test_an_id_that_is_no_request_id_is_refused_with_a_null_id(request_id: object) -> None:
    admission = initialized(InboundGate()).admit(request(request_id, "session/list"))
    assert (admission.request_id, admission.error is not None) == (None, True)


def test_a_null_id_is_refused_under_v2_only() -> None:
    assert initialized(InboundGate(), 1).admit(request(None, "session/list")).message is not None
    v2 = initialized(InboundGate(versions=(2,)), 2)
    assert v2.admit(request(None, "session/list")).error is not None
    fresh = InboundGate(versions=(1, 2))
    assert fresh.admit(request(None, "initialize", protocolVersion=2)).error is not None
    assert fresh.admit(request(None, "initialize", protocolVersion=1)).message is not None


def test_array_params_are_refused() -> None:
    admission = initialized(InboundGate()).admit(
        {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": [1]}
    )
    assert admission.error is not None
    assert admission.error["code"] == -32602


@pytest.mark.parametrize(
    ("versions", "requested", "outcome"),
    [
        ((2,), 1, -32022),
        ((2,), 0, -32022),
        ((1, 2), 0, -32022),
        ((2,), 2, 2),
        ((2,), 3, 2),  # offered the highest: the SDK's v2 side refuses any other version
        ((1, 2), 7, 2),
        ((1,), 2, 2),  # a v1-only router converts a v2 request itself
        (None, 0, 0),  # a v1 agent negotiates on its own
        ((2,), 70000, -32602),
    ],
)
def test_initialize_is_negotiated_when_the_versions_are_known(
    versions: tuple[int, ...] | None, requested: int, outcome: int
) -> None:
    admission = InboundGate(versions=versions).admit(
        request(0, "initialize", protocolVersion=requested, info={"name": "c"})
    )
    if outcome < 0:
        assert admission.error is not None
        assert admission.error["code"] == outcome
        if outcome == -32022:
            assert admission.error["data"] == {
                "requested": requested,
                "supported": list(versions or ()),
            }
        return
    assert admission.message is not None
    assert admission.message["params"] == {"protocolVersion": outcome, "info": {"name": "c"}}


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
def test_mcp_servers_are_filled_in_when_left_out(method: str) -> None:
    gate = initialized(InboundGate())
    admission = gate.admit(request(1, method, sessionId="s", cwd="/"))
    assert admission.message is not None
    assert admission.message["params"] == {"sessionId": "s", "cwd": "/", "mcpServers": []}
    given = request(2, method, sessionId="s", cwd="/", mcpServers=[{"name": "x"}])
    assert gate.admit(given).message is given
    assert gate.statistics.completed_params == 1


@pytest.mark.parametrize(
    ("cursor", "refused"),
    [("start", True), ({}, True), ({"type": 7}, True), ({"type": "start"}, False), (None, False)],
)
def test_a_v2_resume_with_a_malformed_replay_cursor_is_refused(
    cursor: object, refused: bool
) -> None:
    gate = initialized(InboundGate(versions=(2,)), 2)
    admission = gate.admit(request(1, "session/resume", sessionId="s", cwd="/", replayFrom=cursor))
    assert (admission.error is not None) is refused
    if refused:
        assert admission.error is not None
        assert admission.error["code"] == -32602
    v1 = initialized(InboundGate(), 1)  # v1 has no replayFrom: the agent decides
    assert (
        v1.admit(request(1, "session/resume", sessionId="s", cwd="/", replayFrom=cursor)).error
        is None
    )


def cancel_request(request_id: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}}


def test_a_cancel_request_for_a_running_prompt_becomes_its_session_cancel() -> None:
    gate = initialized(InboundGate(cancels_prompts=True))
    gate.admit(request(5, "session/prompt", sessionId="s1", prompt=[]))
    gate.admit(request(6, "session/list"))
    translated = gate.admit(cancel_request(5))
    assert translated.message == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "s1"},
    }
    untouched = cancel_request(6)  # not a prompt: the runtime decides (it ignores it)
    assert gate.admit(untouched).message is untouched
    gate.outbound(result(5, {"stopReason": "cancelled"}))
    answered = cancel_request(5)
    assert gate.admit(answered).message is answered
    assert gate.statistics.translated_cancels == 1


def test_a_runtime_that_cancels_requests_gets_the_cancel_request_as_sent() -> None:
    gate = initialized(InboundGate(cancels_prompts=False))
    gate.admit(request(5, "session/prompt", sessionId="s1", prompt=[]))
    sent = cancel_request(5)
    assert gate.admit(sent).message is sent


def test_a_batch_is_answered_as_one_array_once_its_last_request_is() -> None:
    gate = initialized(InboundGate())
    notification = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    admitted = gate.admit_batch(
        [
            request(1, "session/list"),
            notification,
            InvalidEntry({"code": -32600, "message": "bad"}),
            request(2, "session/list", cursor=[1]),  # fine for the gate: the agent decides
            {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": [1]},
        ]
    )
    assert admitted.answer is None
    assert [m.get("id") for m in admitted.messages] == [1, None, 2]
    assert gate.outbound(result(2, {"sessions": []})) is Release.HOLD
    assert gate.outbound(result(1, {"sessions": []})) is Release.BATCH
    assert gate.completed == [
        {"id": None, "error": {"code": -32600, "message": "bad"}},
        {"id": 3, "error": {"code": -32602, "message": "invalid params: ACP params are an object"}},
        {"id": 2, "result": {"sessions": []}},
        {"id": 1, "result": {"sessions": []}},
    ]
    assert gate.outbound(result(9, {})) is Release.WRITE  # not a request of the batch
    assert gate.statistics.batches == 1


def test_a_batch_that_reaches_the_agent_with_no_request_is_answered_at_once() -> None:
    gate = InboundGate()  # not initialized: the request is refused
    notification = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    admitted = gate.admit_batch([request(1, "session/list"), notification])
    assert admitted.messages == (notification,)
    assert admitted.answer == [
        {"id": 1, "error": {"code": -32600, "message": "'session/list' before 'initialize'"}}
    ]
    only_notifications = gate.admit_batch([notification])
    assert only_notifications.answer is None  # nothing to answer at all


def stops(gate: InboundGate) -> bool:
    return gate.may_stop  # read afresh each time (mypy would narrow the property)


def test_the_end_of_the_input_waits_for_requests_unless_the_agent_waits_for_the_client() -> None:
    gate = initialized(InboundGate())
    assert not stops(gate)  # the input has not ended
    gate.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    gate.input_ended()
    assert not stops(gate)
    permission = request(0, "session/request_permission", sessionId="s1")
    assert gate.outbound(permission) is Release.WRITE
    assert stops(gate)  # the client can no longer answer it
    gate.admit(result(0, {"outcome": {"outcome": "cancelled"}}))  # it did, after all
    assert not stops(gate)
    gate.outbound(result(1, {"stopReason": "end_turn"}))
    assert stops(gate)
    assert gate.in_flight == 0
