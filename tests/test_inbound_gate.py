"""What a connection answers before a handler runs (sansio/inbound/_gate.py), decided synchronously.

Each decision of :class:`InboundGate` (and of the two pure functions it shares with the rest of
agent_meta: the replay question, and the error an exception earns) is tested here on its own,
message by message; ``tests/test_gate_runtimes.py`` plays the same decisions through both
connections.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_meta import (
    ConnectionClosedError,
    JsonRpcError,
    LifetimeTakenOverError,
    MetaValueError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
    UnknownSessionError,
)
from agent_meta.core._errors import STORE_FAILED_MESSAGE
from agent_meta.sansio._lines import IncompleteLineError, LineTooLongError
from agent_meta.sansio.inbound._gate import Admission, Answer, InboundGate
from agent_meta.sansio.inbound._handler_errors import failure_of
from agent_meta.wire import Replay, replay_of
from agent_meta.wire._decode import InvalidMessageError, MessageParseError

LIMIT = 1 << 20


def gate(**options: Any) -> InboundGate:
    return InboundGate(max_frame_bytes=options.pop("max_frame_bytes", LIMIT), **options)


def request(request_id: object, method: str, **params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def notification(method: str, params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def result(request_id: object, value: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def parsed(frame: bytes | None) -> Any:
    assert frame is not None
    assert frame.endswith(b"\n")
    return json.loads(frame)


def error_of(admission: Admission) -> dict[str, Any]:
    """The error a refused request is answered with."""
    assert admission.message is None
    answer = parsed(admission.answer)
    assert set(answer) == {"jsonrpc", "id", "error"}
    error: dict[str, Any] = answer["error"]
    return error


def answered(inbound: InboundGate, response: dict[str, Any]) -> Answer:
    """The agent answers, and the answer is queued."""
    answer = inbound.respond(response)
    inbound.sent(answer)
    return answer


def initialized(inbound: InboundGate, version: int = 1) -> InboundGate:
    assert inbound.admit(request(0, "initialize", protocolVersion=version)).message is not None
    answered(inbound, result(0, {"protocolVersion": version}))
    assert inbound.initialized
    return inbound


# -- lines that are no message ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "answer"),
    [
        (
            MessageParseError("not a JSON message: Expecting value"),
            {"code": -32700, "message": "Parse error: not a JSON message: Expecting value"},
        ),
        (
            LineTooLongError(100),
            {"code": -32700, "message": "Parse error: message longer than the 100-byte line limit"},
        ),
        (
            IncompleteLineError(b"{"),
            {
                "code": -32700,
                "message": "Parse error: the stream ended inside a message (1 bytes, no newline)",
            },
        ),
        (
            InvalidMessageError('"jsonrpc" must be "2.0"'),
            {"code": -32600, "message": 'Invalid Request: "jsonrpc" must be "2.0"'},
        ),
    ],
    ids=["not-json", "over-the-line-limit", "cut-short", "no-message"],
)
def test_a_line_that_is_no_message_is_answered_with_its_code_and_a_null_id(
    failure: Any, answer: dict[str, Any]
) -> None:
    inbound = gate()
    assert parsed(inbound.refuse(failure)) == {"jsonrpc": "2.0", "id": None, "error": answer}
    assert inbound.statistics.refused_lines == 1


def test_a_line_that_is_no_message_is_answered_with_its_id_when_it_can_be_read() -> None:
    refused = gate().refuse(InvalidMessageError("bad", request_id=5))
    assert parsed(refused)["id"] == 5


def test_a_malformed_response_is_never_answered() -> None:
    inbound = gate()
    assert inbound.refuse(InvalidMessageError("bad", request_id=5, is_response=True)) is None
    assert inbound.statistics.refused_lines == 1


def test_the_answer_to_a_line_stays_short_whatever_the_decoder_says() -> None:
    refused = parsed(gate().refuse(InvalidMessageError("x" * 100_000)))
    assert len(refused["error"]["message"]) == 1000


# -- requests refused before any handler runs -------------------------------------------------


def test_a_request_before_initialize_is_refused_and_a_notification_passes() -> None:
    inbound = gate()
    refused = inbound.admit(request(1, "session/new", cwd="/", mcpServers=[]))
    assert parsed(refused.answer)["id"] == 1
    assert error_of(refused) == {"code": -32600, "message": "'session/new' before 'initialize'"}
    cancel = notification("session/cancel", {"sessionId": "s"})
    assert inbound.admit(cancel).message is cancel
    assert inbound.statistics.refused_requests == 1


def test_an_initialize_still_running_does_not_admit_other_requests() -> None:
    inbound = gate()
    assert inbound.admit(request(0, "initialize", protocolVersion=1)).message is not None
    assert inbound.admit(request(1, "session/list")).answer is not None
    answered(inbound, result(0, {"protocolVersion": 1}))
    assert inbound.admit(request(2, "session/list")).message is not None


def test_an_error_answer_to_initialize_leaves_the_connection_uninitialized() -> None:
    inbound = gate()
    inbound.admit(request(0, "initialize", protocolVersion=1))
    answered(inbound, {"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": "no"}})
    assert not inbound.initialized
    assert inbound.admit(request(1, "session/list")).answer is not None


def test_an_id_still_unanswered_is_refused_until_it_is_answered() -> None:
    inbound = initialized(gate())
    assert inbound.admit(request(7, "session/list")).message is not None
    again = inbound.admit(request(7, "session/list"))
    assert error_of(again) == {"code": -32600, "message": "request id 7 is already in flight"}
    answered(inbound, result(7, {"sessions": []}))
    assert inbound.admit(request(7, "session/list")).message is not None


@pytest.mark.parametrize("request_id", [True, 1.5, [1], {"a": 1}])
def test_an_id_that_is_no_request_id_is_refused_with_a_null_id(request_id: object) -> None:
    admission = initialized(gate()).admit(request(request_id, "session/list"))
    assert parsed(admission.answer)["id"] is None
    assert error_of(admission)["code"] == -32600


def test_a_null_id_is_refused_under_v2_only() -> None:
    assert initialized(gate(), 1).admit(request(None, "session/list")).message is not None
    v2 = initialized(gate(versions=(2,)), 2)
    assert error_of(v2.admit(request(None, "session/list"))) == {
        "code": -32600,
        "message": "a request id must not be null in ACP v2",
    }
    fresh = gate(versions=(1, 2))
    assert fresh.admit(request(None, "initialize", protocolVersion=2)).answer is not None
    assert fresh.admit(request(None, "initialize", protocolVersion=1)).message is not None


def test_array_params_are_refused_on_a_request_and_drop_a_notification() -> None:
    inbound = initialized(gate())
    refused = inbound.admit({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": [1]})
    assert error_of(refused) == {
        "code": -32602,
        "message": "invalid params: ACP params are an object",
    }
    dropped = inbound.admit(notification("_vendor/ping", [1]))
    assert (dropped.message, dropped.answer) == (None, None)
    assert dropped.ignored == "'_vendor/ping': params are an array, not an object"
    assert inbound.statistics.ignored_notifications == 1


@pytest.mark.parametrize("session_id", [None, 7, ["s"]])
def test_a_session_cancel_of_no_session_is_dropped(session_id: object) -> None:
    inbound = initialized(gate())
    assert inbound.admit(notification("session/cancel", {"sessionId": session_id})).ignored
    assert inbound.admit(notification("session/cancel", {})).ignored


@pytest.mark.parametrize(
    ("session_id", "flaw"),
    [("x\x00y", "a NUL character (U+0000)"), ("x\ud800", "a lone surrogate (U+D800)")],
)
def test_a_session_id_no_store_can_hold_is_refused(session_id: str, flaw: str) -> None:
    admission = initialized(gate()).admit(request(1, "session/load", sessionId=session_id))
    error = error_of(admission)
    assert error["code"] == -32602
    assert error["message"].endswith(f"holds {flaw}")


@pytest.mark.parametrize(
    ("versions", "requested", "outcome"),
    [
        ((2,), 1, -32022),
        ((2,), 0, -32022),
        ((1, 2), 0, -32022),
        ((2,), 2, 2),
        ((2,), 3, 2),  # offered the highest: the SDK's v2 side refuses any other version
        ((1, 2), 7, 2),
        ((1,), 2, 1),  # the handler is asked for the version to answer
        (None, 0, 0),  # a v1 SDK agent negotiates on its own
        ((2,), 70000, -32602),
        ((1, 2), "2", -32602),
    ],
)
def test_initialize_is_negotiated_when_the_versions_are_known(
    versions: tuple[int, ...] | None, requested: object, outcome: int
) -> None:
    admission = gate(versions=versions).admit(
        request(0, "initialize", protocolVersion=requested, info={"name": "c"})
    )
    if outcome < 0:
        error = error_of(admission)
        assert error["code"] == outcome
        if outcome == -32022:
            assert error["data"] == {"requested": requested, "supported": list(versions or ())}
        return
    assert admission.message is not None
    assert admission.message["params"] == {"protocolVersion": outcome, "info": {"name": "c"}}


def test_a_second_initialize_is_negotiated_under_the_rules_of_the_first() -> None:
    inbound = initialized(gate(versions=(1, 2)), 1)
    again = inbound.admit(request(None, "initialize", protocolVersion=2))  # v1: null ids pass
    assert again.message is not None
    assert again.message["params"]["protocolVersion"] == 2


def test_a_second_initialize_is_refused_where_the_runtime_takes_one_only() -> None:
    inbound = initialized(gate(versions=(2,), initializes_once=True), 2)
    assert error_of(inbound.admit(request(9, "initialize", protocolVersion=1))) == {
        "code": -32600,
        "message": "'initialize' again: the connection is initialized",
    }


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
def test_mcp_servers_are_filled_in_where_the_runtime_needs_them(method: str) -> None:
    inbound = initialized(gate(completes_params=True))
    admission = inbound.admit(request(1, method, sessionId="s", cwd="/"))
    assert admission.message is not None
    assert admission.message["params"] == {"sessionId": "s", "cwd": "/", "mcpServers": []}
    given = request(2, method, sessionId="s", cwd="/", mcpServers=[{"name": "x"}])
    assert inbound.admit(given).message is given
    assert inbound.statistics.completed_params == 1
    untouched = request(3, method, sessionId="s", cwd="/")
    assert initialized(gate()).admit(untouched).message is untouched


@pytest.mark.parametrize(
    ("cursor", "refused"),
    [("start", True), ({}, True), ({"type": 7}, True), ({"type": "start"}, False), (None, False)],
)
def test_a_v2_resume_with_a_malformed_replay_cursor_is_refused(
    cursor: object, refused: bool
) -> None:
    inbound = initialized(gate(versions=(2,)), 2)
    resume = request(1, "session/resume", sessionId="s", cwd="/", replayFrom=cursor)
    admission = inbound.admit(resume)
    if refused:
        assert error_of(admission) == {
            "code": -32602,
            "message": "invalid params: 'replayFrom' is an object with a string 'type', or null",
        }
    else:
        assert admission.message is resume
    v1 = initialized(gate(), 1)  # v1 has no replayFrom: the agent decides
    assert v1.admit(resume).message is resume


# -- $/cancel_request -------------------------------------------------------------------------


def cancel_request(request_id: object) -> dict[str, Any]:
    return notification("$/cancel_request", {"requestId": request_id})


def test_a_cancel_request_reaches_the_runtime_only_for_a_request_still_unanswered() -> None:
    inbound = initialized(gate())
    inbound.admit(request(5, "session/prompt", sessionId="s1", prompt=[]))
    inbound.admit(request("r", "session/list"))
    for running in (5, "r"):
        sent = cancel_request(running)
        assert inbound.admit(sent).message is sent
    answered(inbound, result(5, {"stopReason": "end_turn"}))  # answered: ignored from now on
    for target in (5, 6, None, True, 5.0, [5]):
        dropped = inbound.admit(cancel_request(target))
        assert dropped == Admission(ignored="$/cancel_request: no request of that id is unanswered")
    assert inbound.admit(notification("$/cancel_request", {})).ignored
    assert inbound.statistics.ignored_notifications == 7
    assert inbound.statistics.translated_cancels == 0


def test_a_cancel_request_reaches_a_request_whose_answer_is_not_queued_yet() -> None:
    """Its client has no answer yet (the answer waits for queue room, say): for it the request
    is still running, so its cancellation counts (a v2 prompt's turn then ends cancelled)."""
    inbound = initialized(gate())
    inbound.admit(request("p", "session/prompt", sessionId="s1", prompt=[]))
    answer = inbound.respond(result("p", {"messageId": "m"}))
    sent = cancel_request("p")
    assert inbound.admit(sent).message is sent
    assert error_of(inbound.admit(request("p", "session/list")))["code"] == -32600
    inbound.sent(answer)
    assert inbound.admit(cancel_request("p")).message is None


def test_where_the_runtime_ignores_it_a_cancel_request_of_a_prompt_is_its_session_cancel() -> None:
    inbound = initialized(gate(cancels_prompts=True))
    inbound.admit(request(5, "session/prompt", sessionId="s1", prompt=[]))
    inbound.admit(request(6, "session/list"))
    assert inbound.admit(cancel_request(5)).message == notification(
        "session/cancel", {"sessionId": "s1"}
    )
    not_a_prompt = inbound.admit(cancel_request(6))
    assert not_a_prompt.message is None
    why = "$/cancel_request of 'session/list': the runtime cannot cancel it"
    assert not_a_prompt.ignored == why
    answered(inbound, result(5, {"stopReason": "cancelled"}))
    assert inbound.admit(cancel_request(5)).message is None
    assert inbound.statistics.translated_cancels == 1


# -- batches ----------------------------------------------------------------------------------


def test_a_batch_is_answered_as_one_array_once_its_last_request_is() -> None:
    inbound = initialized(gate())
    admitted = inbound.admit_batch(
        [
            request(1, "session/list"),
            notification("session/cancel", {"sessionId": "s"}),
            InvalidMessageError("bad"),
            InvalidMessageError("bad answer", request_id=9, is_response=True),  # never answered
            request(2, "session/list", cursor=[1]),  # fine for the gate: the handler decides
            {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": [1]},
        ]
    )
    assert admitted.answer is None
    assert [m.get("id") for m in admitted.messages] == [1, None, 2]
    held = inbound.respond(result(2, {"sessions": []}))
    assert (held.frame, held.answered) == (None, ())
    done = inbound.respond(result(1, {"sessions": []}))
    assert done.answered == (2, 1)
    assert parsed(done.frame) == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request: bad"},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32602, "message": "invalid params: ACP params are an object"},
        },
        {"jsonrpc": "2.0", "id": 2, "result": {"sessions": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}},
    ]
    alone = inbound.respond(result(9, {}))  # no request of the batch: written at once
    assert parsed(alone.frame) == result(9, {})
    assert inbound.statistics.batches == 1
    assert inbound.statistics.refused_lines == 2


def test_a_batch_that_reaches_no_handler_with_a_request_is_answered_at_once() -> None:
    inbound = gate()  # not initialized: the request is refused
    cancel = notification("session/cancel", {"sessionId": "s"})
    admitted = inbound.admit_batch([request(1, "session/list"), cancel])
    assert admitted.messages == (cancel,)
    assert parsed(admitted.answer) == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32600, "message": "'session/list' before 'initialize'"},
        }
    ]
    assert inbound.admit_batch([cancel]).answer is None  # nothing to answer at all


# -- responses on their way out ---------------------------------------------------------------


def test_a_response_that_can_be_sent_is_written_as_it_is() -> None:
    inbound = initialized(gate())
    inbound.admit(request(1, "session/list"))
    answer = inbound.respond(result(1, {"sessions": []}))
    assert answer.response == result(1, {"sessions": []})
    assert parsed(answer.frame) == result(1, {"sessions": []})
    assert (answer.answered, answer.replaced) == ((1,), None)


def test_a_result_over_the_frame_limit_is_replaced_by_an_internal_error() -> None:
    inbound = initialized(gate(max_frame_bytes=300))
    inbound.admit(request(1, "_big"))
    answer = inbound.respond(result(1, {"blob": "x" * 300}))
    error = {
        "code": -32603,
        "message": (
            "internal error: the result cannot be sent (a response of 346 bytes is over the "
            "frame limit of 300 bytes)"
        ),
    }
    assert answer.response == {"jsonrpc": "2.0", "id": 1, "error": error}
    assert parsed(answer.frame) == answer.response
    assert answer.replaced is not None
    assert inbound.statistics.replaced_responses == 1


def test_a_result_that_is_not_json_is_replaced_by_an_internal_error() -> None:
    answer = initialized(gate()).respond(result(1, {"x": float("nan")}))
    assert parsed(answer.frame)["error"]["code"] == -32603
    assert "cannot be sent" in parsed(answer.frame)["error"]["message"]


def test_an_error_whose_data_cannot_be_sent_goes_out_without_it() -> None:
    inbound = initialized(gate(max_frame_bytes=400))
    unsendable = {"code": -32602, "message": "m" * 2000, "data": {"blob": "x" * 400}}
    answer = inbound.respond({"jsonrpc": "2.0", "id": 1, "error": unsendable})
    assert parsed(answer.frame)["error"] == {"code": -32602, "message": "m" * 1000}
    not_json = {"code": -32602, "message": "m", "data": {1, 2}}
    answer = inbound.respond({"jsonrpc": "2.0", "id": 2, "error": not_json})
    assert parsed(answer.frame)["error"] == {"code": -32602, "message": "m"}


def test_a_response_with_an_id_no_frame_can_carry_is_refused() -> None:
    with pytest.raises(MetaValueError):
        initialized(gate()).respond(result(2**70, {}))


# -- the end of the input ---------------------------------------------------------------------


def stops(inbound: InboundGate) -> bool:
    return inbound.may_stop  # read afresh each time (mypy would narrow the property)


def test_the_end_of_the_input_waits_for_requests_unless_the_agent_waits_for_the_client() -> None:
    inbound = initialized(gate())
    assert not stops(inbound)  # the input has not ended
    inbound.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    inbound.input_ended()
    assert not stops(inbound)
    inbound.sent_request(0)  # session/request_permission
    assert stops(inbound)  # the client can no longer answer it
    inbound.admit(result(0, {"outcome": {"outcome": "cancelled"}}))  # it did, after all
    assert not stops(inbound)
    answered(inbound, result(1, {"stopReason": "end_turn"}))
    assert stops(inbound)
    assert inbound.in_flight == 0


def state(session_id: str, value: str) -> dict[str, Any]:
    update = {"sessionUpdate": "state_update", "state": value}
    return notification("session/update", {"sessionId": session_id, "update": update})


def test_the_end_of_the_input_waits_for_a_v2_turn_that_runs_on_after_its_answer() -> None:
    """Issue 27 (d): a v2 prompt is answered as soon as it is accepted; its turn runs on until
    its session reports idle, and the runtime must not stop under it."""
    inbound = initialized(gate(), 2)
    inbound.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    answered(inbound, result(1, {"messageId": "user-1"}))
    inbound.input_ended()
    assert inbound.in_flight == 0
    assert not stops(inbound)
    assert len(inbound.turns) == 1
    inbound.sent_notification(state("s1", "running"))
    inbound.sent_notification(state("s2", "idle"))  # another session's
    assert not stops(inbound)
    inbound.sent_request(0)  # the turn asks the client, which can no longer answer
    assert stops(inbound)
    inbound.admit(result(0, {"outcome": {"outcome": "cancelled"}}))
    assert not stops(inbound)
    inbound.sent_notification(state("s1", "idle"))
    assert stops(inbound)


def test_a_turn_that_went_idle_before_its_answer_was_sent_holds_nothing() -> None:
    """An SDK sends the answer from another task than the turn's: the idle may come first."""
    inbound = initialized(gate(), 2)
    inbound.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    inbound.sent_notification(state("s1", "idle"))
    answered(inbound, result(1, {"messageId": "user-1"}))
    inbound.input_ended()
    assert stops(inbound)
    # The next prompt of the session runs on again.
    inbound.admit(request(2, "session/prompt", sessionId="s1", prompt=[]))
    answered(inbound, result(2, {"messageId": "user-2"}))
    assert not stops(inbound)


@pytest.mark.parametrize("version", [1, 2])
def test_no_turn_holds_after_a_close_a_refused_prompt_or_on_v1(version: int) -> None:
    inbound = initialized(gate(), version)
    inbound.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    answered(inbound, result(1, {"messageId": "user-1"} if version >= 2 else {}))
    inbound.admit(request(2, "session/prompt", sessionId="s2", prompt=[]))
    answered(inbound, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32800, "message": "x"}})
    inbound.admit(request(3, "session/close", sessionId="s1"))
    answered(inbound, result(3, {}))
    inbound.input_ended()
    assert stops(inbound)


# -- the replay question ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "version", "replay"),
    [
        ("session/load", {"sessionId": "s"}, 1, Replay.ASKED),
        ("session/load", {"sessionId": "s"}, 2, Replay.ASKED),
        ("session/resume", {"sessionId": "s"}, 1, Replay.ALLOWED),
        ("session/resume", {"replayFrom": {"type": "start"}}, 1, Replay.ALLOWED),
        ("session/resume", {"sessionId": "s"}, 2, Replay.NONE),
        ("session/resume", {"replayFrom": None}, 2, Replay.NONE),
        ("session/resume", {"replayFrom": {"type": "start"}}, 2, Replay.ASKED),
        ("session/resume", {"replayFrom": {"type": "_later", "at": 3}}, 2, Replay.ASKED),
        ("session/resume", {"replayFrom": "start"}, 2, Replay.MALFORMED),
        ("session/resume", {"replayFrom": {}}, 2, Replay.MALFORMED),
        ("session/resume", {"replayFrom": {"type": 7}}, 2, Replay.MALFORMED),
        ("session/resume", None, 2, Replay.NONE),
        ("session/new", {"replayFrom": {"type": "start"}}, 2, Replay.NONE),
    ],
)
def test_the_replay_question_has_one_answer(
    method: str, params: object, version: int, replay: Replay
) -> None:
    assert replay_of(method, params, protocol_version=version) is replay
    assert replay.may_replay is (replay in (Replay.ASKED, Replay.ALLOWED))


# -- what an exception out of a request's handling earns --------------------------------------


@pytest.mark.parametrize(
    ("exc", "error", "report"),
    [
        (JsonRpcError(-32001, "custom", {"k": 1}), (-32001, "custom"), False),
        (UnknownSessionError("'s'"), (-32002, "session not found: 's'"), False),
        (LifetimeTakenOverError("'s'"), (-32002, "session not found: 's'"), False),
        (ConnectionClosedError("gone"), (-32603, "internal error: gone"), False),
        (StoreError("postgresql://db/x", "lost"), (-32603, STORE_FAILED_MESSAGE), True),
        (MetaValueError("bad", path="_meta"), (-32602, "invalid params: _meta: bad"), False),
        (KeyError("secret"), (-32603, "internal error: KeyError"), True),
    ],
)
def test_an_exception_earns_the_error_of_its_class(
    exc: Exception, error: tuple[int, str], report: bool
) -> None:
    failure = failure_of(exc)
    assert failure is not None
    assert (failure.error.code, failure.error.message) == error
    assert failure.report is report
    assert "postgresql" not in json.dumps(failure.error.to_error())


@pytest.mark.parametrize("exc", [OwnerClosedError("stopped"), TransportBrokenError("broken")])
def test_the_connection_failing_earns_no_error_response(exc: Exception) -> None:
    assert failure_of(exc) is None


def test_a_v2_prompt_answered_with_its_stop_reason_has_no_turn_left() -> None:
    """A v1-shaped answer (``stopReason``) under v2 says the turn is over: nothing runs on to
    hold the end of the input (the SDK's v1 agent classes answer so on a v2 connection)."""
    inbound = initialized(gate(), 2)
    inbound.admit(request(1, "session/prompt", sessionId="s1", prompt=[]))
    answered(inbound, result(1, {"stopReason": "end_turn"}))
    inbound.input_ended()
    assert len(inbound.turns) == 0
    assert stops(inbound)
