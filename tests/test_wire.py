"""Wire models: golden frames, three-state round trips, updatedAt rules, NDJSON encode/decode."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_meta import OMITTED, AgentMetaError, MetaValueError, SessionInfoPatch
from agent_meta.wire import (
    JsonRpcErrorResponse,
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcSuccessResponse,
    MessageDecodeError,
    SessionInfoUpdate,
    SessionInfoUpdateV1,
    encode_frame,
    patch_from_update,
)
from agent_meta.wire import decode as decode_line
from agent_meta.wire._convert import encode_session_update, update_from_patch
from agent_meta.wire._decode import (
    InvalidMessageError,
    MessageParseError,
    decode_message,
    message_from_json,
    parse_json_line,
)
from agent_meta.wire._models import (
    MISSING,
    JsonRpcErrorObject,
    SessionNotification,
    SessionNotificationV1,
    WireModel,
)

if TYPE_CHECKING:
    from collections.abc import Callable

GOLDEN = Path(__file__).parent / "golden"

SID = "sess_abc123def456"
SID_V1 = "sess_v1"
NESTED_META: dict[str, Any] = {
    "tags": ["feature", "auth"],
    "stale": None,
    "agent-meta": {"failure": None, "note": "nested nulls are data"},
    "list": [None, 1, 2.5, True, {"x": None}],
}
TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "requestId": None,
}


def _info_frame(
    session_id: str, version: int, patch: SessionInfoPatch, notification_meta: Any = None
) -> bytes:
    return encode_session_update(session_id, patch, version, notification_meta)


# Each golden file and how we build it. session/update frames go through the core converter
# (SessionInfoPatch -> wire model -> bytes); the rest are built from the envelope models.
BUILDERS: dict[str, Callable[[], bytes]] = {
    "v2_info_meta_omitted": lambda: _info_frame(
        SID,
        2,
        SessionInfoPatch(title="Implement user authentication", updated_at="2026-11-30T12:00:00Z"),
    ),
    "v2_info_meta_null": lambda: _info_frame(SID, 2, SessionInfoPatch(meta=None)),
    "v2_info_meta_object": lambda: _info_frame(SID, 2, SessionInfoPatch(meta=NESTED_META)),
    "v2_info_meta_empty": lambda: _info_frame(SID, 2, SessionInfoPatch(meta={})),
    "v2_info_title_null": lambda: _info_frame(
        SID, 2, SessionInfoPatch(title=None, updated_at=None)
    ),
    "v2_info_notification_meta": lambda: _info_frame(
        SID,
        2,
        SessionInfoPatch(
            title="Traced", updated_at="2026-11-30T12:00:00.250+01:00", meta={"counter": 1}
        ),
        TRACE,
    ),
    "v1_info_meta_omitted": lambda: _info_frame(
        SID_V1, 1, SessionInfoPatch(title="Legacy", updated_at="yesterday")
    ),
    "v1_info_meta_null": lambda: _info_frame(SID_V1, 1, SessionInfoPatch(meta=None)),
    "v1_info_meta_object": lambda: _info_frame(
        SID_V1,
        1,
        SessionInfoPatch(
            updated_at="2026-01-01T00:00:00", meta={"kept": {"deep": None}, "removed": None}
        ),
    ),
    "v1_info_title_null": lambda: _info_frame(
        SID_V1, 1, SessionInfoPatch(title=None, updated_at=None, meta={})
    ),
    "v1_info_notification_meta": lambda: _info_frame(
        SID_V1,
        1,
        SessionInfoPatch(title='multi\nline "quoted" \u00e9\u2028'),
        {"case": "I", "n": None},
    ),
    "request": lambda: encode_frame(
        JsonRpcRequest(
            id=1, method="session/new", params={"cwd": "/home/user/project", "mcpServers": []}
        )
    ),
    "request_string_id_no_params": lambda: encode_frame(
        JsonRpcRequest(id="req-7", method="_vendor/ping")
    ),
    "resume_v2_replay": lambda: encode_frame(
        JsonRpcRequest(
            id=3,
            method="session/resume",
            params={
                "sessionId": "sess_789xyz",
                "cwd": "/home/user/project",
                "replayFrom": {"type": "start"},
            },
        )
    ),
    "notification": lambda: encode_frame(
        JsonRpcNotification(method="session/cancel", params={"sessionId": "sess_789xyz"})
    ),
    "response_result": lambda: encode_frame(
        JsonRpcSuccessResponse(id=1, result={"sessionId": SID})
    ),
    "response_result_null": lambda: encode_frame(JsonRpcSuccessResponse(id=2, result=None)),
    "response_error": lambda: encode_frame(
        JsonRpcErrorResponse(
            id="req-7",
            error=JsonRpcErrorObject(
                code=-32602, message="Invalid params", data={"field": "sessionId", "detail": None}
            ),
        )
    ),
    "response_error_null_id": lambda: encode_frame(
        JsonRpcErrorResponse(id=None, error=JsonRpcErrorObject(code=-32700, message="Parse error"))
    ),
    "response_error_null_data": lambda: encode_frame(
        JsonRpcErrorResponse(
            id=4, error=JsonRpcErrorObject(code=-32603, message="Internal error", data=None)
        )
    ),
}

EXPECTED_TYPES: dict[str, type[WireModel]] = {
    "request": JsonRpcRequest,
    "request_string_id_no_params": JsonRpcRequest,
    "resume_v2_replay": JsonRpcRequest,
    "notification": JsonRpcNotification,
    "response_result": JsonRpcSuccessResponse,
    "response_result_null": JsonRpcSuccessResponse,
    "response_error": JsonRpcErrorResponse,
    "response_error_null_id": JsonRpcErrorResponse,
    "response_error_null_data": JsonRpcErrorResponse,
}


def _golden(name: str) -> Any:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def test_every_golden_file_has_a_builder() -> None:
    assert {path.stem for path in GOLDEN.glob("*.json")} == set(BUILDERS)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_encoding_matches_golden(name: str) -> None:
    frame = BUILDERS[name]()
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    assert json.loads(frame) == _golden(name)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_golden_decodes_and_reencodes_unchanged(name: str) -> None:
    expected = _golden(name)
    message = decode_message(_compact(expected))
    assert type(message) is EXPECTED_TYPES.get(name, JsonRpcNotification)
    assert json.loads(encode_frame(message)) == expected
    if name.startswith(("v1_", "v2_")):
        assert isinstance(message, JsonRpcNotification)
        assert message.method == "session/update"
        model = SessionNotificationV1 if name.startswith("v1_") else SessionNotification
        params = model.model_validate(message.params)
        rebuilt = JsonRpcNotification(
            method="session/update", params=params.model_dump(mode="json")
        )
        assert json.loads(encode_frame(rebuilt)) == expected


def test_golden_session_info_patches() -> None:
    """Decoding a golden frame gives back the core patch the builder started from."""

    def patch_of(name: str) -> SessionInfoPatch:
        params = _golden(name)["params"]
        model = SessionNotificationV1 if name.startswith("v1_") else SessionNotification
        return patch_from_update(model.model_validate(params).update)

    assert patch_of("v2_info_meta_omitted").meta is OMITTED
    assert patch_of("v2_info_meta_null") == SessionInfoPatch(meta=None)
    assert patch_of("v2_info_meta_object") == SessionInfoPatch(meta=NESTED_META)
    assert patch_of("v2_info_meta_empty") == SessionInfoPatch(meta={})
    assert patch_of("v2_info_title_null") == SessionInfoPatch(title=None, updated_at=None)
    assert patch_of("v1_info_meta_null") == SessionInfoPatch(meta=None)
    assert patch_of("v1_info_meta_omitted") == SessionInfoPatch(
        title="Legacy", updated_at="yesterday"
    )


# --------------------------------------------------------------------------- three states


def test_meta_three_states_are_distinct_models_and_dumps() -> None:
    omitted, null, empty = (
        SessionInfoUpdate(),
        SessionInfoUpdate(field_meta=None),
        SessionInfoUpdate(field_meta={}),
    )
    assert omitted != null != empty != omitted
    assert omitted.model_dump() == {"sessionUpdate": "session_info_update"}
    assert json.loads(encode_frame(null)) == {"sessionUpdate": "session_info_update", "_meta": None}
    assert json.loads(encode_frame(empty)) == {"sessionUpdate": "session_info_update", "_meta": {}}


def test_meta_three_states_parse_from_wire() -> None:
    base = '{"sessionUpdate":"session_info_update"%s}'
    assert SessionInfoUpdate.model_validate_json(base % "").field_meta is MISSING
    assert SessionInfoUpdate.model_validate_json(base % ',"_meta":null').field_meta is None
    assert SessionInfoUpdate.model_validate_json(base % ',"_meta":{"k":null}').field_meta == {
        "k": None
    }
    assert SessionInfoUpdateV1.model_validate_json(base % ',"_meta":null').field_meta is None


def test_meta_uses_wire_alias_and_python_name_only() -> None:
    assert SessionInfoUpdate.model_validate({"_meta": {"a": 1}}).field_meta == {"a": 1}
    assert SessionInfoUpdate.model_validate({"field_meta": {"a": 1}}).field_meta == {"a": 1}
    with pytest.raises(ValidationError, match="fieldMeta"):
        SessionInfoUpdate.model_validate({"fieldMeta": {"a": 1}})
    with pytest.raises(ValidationError, match="extra"):
        SessionInfoUpdate.model_validate({"sessionUpdate": "session_info_update", "extra": 1})


def test_wrong_discriminator_is_rejected() -> None:
    with pytest.raises(ValidationError):
        SessionInfoUpdate.model_validate({"sessionUpdate": "agent_message_chunk"})


def test_models_are_frozen_and_detached_from_caller_objects() -> None:
    meta: dict[str, Any] = {"a": {"b": [1]}}
    update = SessionInfoUpdate(field_meta=meta)
    meta["a"]["b"].append(2)
    meta["c"] = 3
    assert update.field_meta == {"a": {"b": [1]}}
    with pytest.raises(ValidationError):
        update.title = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "bad",
    [{"x": float("nan")}, {"x": float("inf")}, {1: "int key"}, {"x": {1, 2}}, {"x": b"bytes"}],
)
def test_meta_must_be_json(bad: Any) -> None:
    with pytest.raises(ValidationError):
        SessionInfoUpdate(field_meta=bad)
    with pytest.raises(ValidationError):
        JsonRpcNotification(method="m", params=bad)


@pytest.mark.parametrize("bad", [[1, 2], "oops", 3])
def test_meta_that_is_not_an_object_is_rejected(bad: Any) -> None:
    with pytest.raises(ValidationError):
        SessionInfoUpdate.model_validate({"_meta": bad})


def test_notification_meta_null_means_omitted() -> None:
    params = SessionNotification.model_validate({"sessionId": "s", "update": {}, "_meta": None})
    assert params.field_meta is MISSING
    assert params == SessionNotification(session_id="s", update=SessionInfoUpdate())
    assert "_meta" not in json.loads(encode_frame(params))
    kept = SessionNotification(session_id="s", update=SessionInfoUpdate(), field_meta={"n": None})
    assert json.loads(encode_frame(kept))["_meta"] == {"n": None}


# --------------------------------------------------------------------------- updatedAt


@pytest.mark.parametrize(
    "text", ["2026-01-01T00:00:00", "2026-01-01", "yesterday", "", "2026-13-01T00:00:00Z"]
)
def test_v2_rejects_updated_at_without_offset(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SessionInfoUpdate(updated_at=text)
    (error,) = caught.value.errors()
    assert error["loc"] == ("updated_at",)
    assert "RFC 3339" in error["msg"]
    assert "offset" in error["msg"]
    with pytest.raises(ValidationError, match="RFC 3339"):
        SessionInfoUpdate.model_validate({"updatedAt": text})
    with pytest.raises(ValidationError, match="RFC 3339"):
        update_from_patch(SessionInfoPatch(updated_at=text), 2)


@pytest.mark.parametrize(
    "text", ["2026-11-30T12:00:00Z", "2026-11-30t12:00:00.5+05:30", "1999-01-01T00:00:00-00:00"]
)
def test_v2_accepts_rfc3339_with_offset(text: str) -> None:
    assert SessionInfoUpdate(updated_at=text).updated_at == text


@given(st.text())
def test_v1_accepts_any_updated_at_string(text: str) -> None:
    assert SessionInfoUpdateV1(updated_at=text).updated_at == text
    assert update_from_patch(SessionInfoPatch(updated_at=text), 1).updated_at == text


# --------------------------------------------------------------------------- hypothesis round trips

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_objects = st.dictionaries(_text, _json, max_size=5)
_offsets = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes))
)
_rfc3339 = st.builds(
    lambda moment, zone, zulu: (
        moment.replace(tzinfo=datetime.UTC).isoformat().replace("+00:00", "Z")
        if zulu
        else moment.replace(tzinfo=zone).isoformat()
    ),
    st.datetimes(),
    _offsets,
    st.booleans(),
)


def _three(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.just(MISSING) | st.none() | values


_v2_updates = st.builds(
    SessionInfoUpdate, title=_three(_text), updated_at=_three(_rfc3339), field_meta=_three(_objects)
)
_v1_updates = st.builds(
    SessionInfoUpdateV1, title=_three(_text), updated_at=_three(_text), field_meta=_three(_objects)
)
_notification_meta = st.just(MISSING) | _objects


@given(_v2_updates, _notification_meta, _text)
def test_v2_wire_round_trip_keeps_every_three_state_field(
    update: SessionInfoUpdate, meta: Any, session_id: str
) -> None:
    params = SessionNotification(session_id=session_id, update=update, field_meta=meta)
    frame = encode_frame(
        JsonRpcNotification(method="session/update", params=params.model_dump(mode="json"))
    )
    assert frame.count(b"\n") == 1
    message = decode_message(frame)
    assert isinstance(message, JsonRpcNotification)
    back = SessionNotification.model_validate(message.params)
    assert back == params
    for field in ("title", "updated_at", "field_meta"):
        assert (getattr(back.update, field) is MISSING) == (getattr(update, field) is MISSING)
        assert (getattr(back.update, field) is None) == (getattr(update, field) is None)


@given(_v1_updates, _notification_meta, _text)
def test_v1_wire_round_trip_keeps_every_three_state_field(
    update: SessionInfoUpdateV1, meta: Any, session_id: str
) -> None:
    params = SessionNotificationV1(session_id=session_id, update=update, field_meta=meta)
    back = SessionNotificationV1.model_validate_json(encode_frame(params))
    assert back == params


@given(_v2_updates)
def test_core_conversion_round_trip_v2(update: SessionInfoUpdate) -> None:
    patch = patch_from_update(update)
    assert update_from_patch(patch, 2) == update
    assert (patch.meta is OMITTED) == (update.field_meta is MISSING)
    assert (patch.title is OMITTED) == (update.title is MISSING)
    assert (patch.updated_at is OMITTED) == (update.updated_at is MISSING)


@given(_v1_updates)
def test_core_conversion_round_trip_v1(update: SessionInfoUpdateV1) -> None:
    assert update_from_patch(patch_from_update(update), 1) == update


@given(_v2_updates, _notification_meta)
def test_reference_encoder_matches_hand_built_frame(update: SessionInfoUpdate, meta: Any) -> None:
    params = SessionNotification(session_id="s", update=update, field_meta=meta)
    by_hand = encode_frame(
        JsonRpcNotification(method="session/update", params=params.model_dump(mode="json"))
    )
    notification_meta = None if meta is MISSING else meta
    assert encode_session_update("s", patch_from_update(update), 2, notification_meta) == by_hand


def test_update_from_patch_rejects_unknown_versions() -> None:
    with pytest.raises(ValueError, match="protocol version"):
        update_from_patch(SessionInfoPatch(), 3)


def test_v1_update_from_patch_keeps_null_meta() -> None:
    # The encoder sends what it is given; the v1 merged mode is the owner's business.
    assert update_from_patch(SessionInfoPatch(meta=None), 1).field_meta is None


# --------------------------------------------------------------------------- encode_frame


@given(st.text(st.sampled_from('a\n\r\u2028\u2029\x00\t"\\\u00e9\U0001f600'), max_size=30))
def test_frame_is_one_line_whatever_the_strings_hold(text: str) -> None:
    frame = encode_frame(
        SessionNotification(
            session_id=text,
            update=SessionInfoUpdate(title=text, field_meta={text: text}),
            field_meta={"n": text},
        )
    )
    assert frame.endswith(b"\n")
    assert b"\n" not in frame[:-1]
    assert b"\r" not in frame
    frame.decode("utf-8")
    assert json.loads(frame)["update"]["title"] == text


def test_frame_is_compact_utf8() -> None:
    frame = encode_frame(JsonRpcNotification(method="m", params={"t": "é"}))
    assert frame == '{"jsonrpc":"2.0","method":"m","params":{"t":"é"}}\n'.encode()


def test_frame_with_lone_surrogate_raises_meta_value_error() -> None:
    with pytest.raises(MetaValueError, match="UTF-8"):
        encode_frame(SessionInfoUpdate(title="\ud800"))


# --------------------------------------------------------------------------- decode errors


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"\n",
        b"not json\n",
        b'{"jsonrpc":"2.0",',
        b"\xff\xfe{}",
        b'{"jsonrpc":"2.0","method":"m","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"x":-Infinity}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"x":1e400}}',
        "{'single': 'quotes'}",
    ],
)
def test_not_json_is_a_parse_error(line: bytes | str) -> None:
    with pytest.raises(MessageParseError) as caught:
        decode_message(line)
    assert caught.value.code == -32700
    assert isinstance(caught.value, MessageDecodeError)
    assert isinstance(caught.value, AgentMetaError)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        ("[]", None),
        ('[{"jsonrpc":"2.0","method":"m"}]', None),
        ("42", None),
        ('"text"', None),
        ("null", None),
        ("{}", None),
        ('{"jsonrpc":"2.0","id":5}', 5),
        ('{"id":1,"method":"m"}', 1),
        ('{"jsonrpc":"1.0","id":"a","method":"m"}', "a"),
        ('{"jsonrpc":2.0,"id":1,"method":"m"}', 1),
        ('{"jsonrpc":"2.0","id":1.0,"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":true,"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":[1],"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":7,"method":5}', 7),
        ('{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":7,"method":"m","params":null}', 7),
        ('{"jsonrpc":"2.0","id":7,"method":"m","extra":1}', 7),
        ('{"jsonrpc":"2.0","method":"m","params":"x"}', None),
        ('{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":1,"message":"m"}}', 8),
        ('{"jsonrpc":"2.0","id":null,"result":{}}', None),
        ('{"jsonrpc":"2.0","id":9,"error":{"code":"1","message":"m"}}', 9),
        ('{"jsonrpc":"2.0","id":9,"error":{"code":1}}', 9),
        ('{"jsonrpc":"2.0","id":9,"error":null}', 9),
    ],
)
def test_json_but_not_json_rpc_is_an_invalid_request(line: str, request_id: Any) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        decode_message(line)
    assert caught.value.code == -32600
    assert caught.value.request_id == request_id
    assert isinstance(caught.value, MessageDecodeError)
    assert isinstance(caught.value, AgentMetaError)


@pytest.mark.parametrize(
    ("line", "is_response"),
    [
        ('{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":1,"message":"m"}}', True),
        ('{"jsonrpc":"2.0","id":8,"result":{},"extra":1}', True),
        ('{"jsonrpc":"1.0","id":8,"result":{}}', True),
        ('{"jsonrpc":"2.0","id":9,"error":{"code":1}}', True),
        ('{"jsonrpc":"2.0","id":5}', True),
        ('{"result":{}}', True),
        ("{}", False),
        ('{"jsonrpc":"2.0","id":7,"method":"m","extra":1}', False),
        ('{"jsonrpc":"2.0","method":"m","params":"x"}', False),
    ],
)
def test_an_invalid_message_says_whether_it_is_shaped_like_a_response(
    line: str, is_response: bool
) -> None:
    """JSON-RPC never answers a response: the receiver needs to know which invalid messages
    are responses (no ``method``; an ``id``, a ``result`` or an ``error``)."""
    with pytest.raises(InvalidMessageError) as caught:
        decode_message(line)
    assert caught.value.is_response is is_response


@pytest.mark.parametrize("result", ["allow", [1], 0, None, True, {"a": [None]}])
def test_a_success_response_result_is_any_json_value(result: Any) -> None:
    """JSON-RPC 2.0 section 5: ``result`` is required on success and its value is defined by
    the method: any JSON value is a valid response."""
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "result": result})
    assert decode_message(line) == JsonRpcSuccessResponse(id=3, result=result)
    assert json.loads(encode_frame(JsonRpcSuccessResponse(id=3, result=result)))["result"] == result


def test_an_invalid_request_says_what_is_wrong() -> None:
    with pytest.raises(InvalidMessageError) as caught:
        decode_message('{"jsonrpc":"2.0","id":1,"method":"m","params":7}')
    assert "params must be an object or an array" in str(caught.value)
    assert caught.value.request_id == 1


def test_decode_accepts_str_bytes_and_surrounding_whitespace() -> None:
    line = '  {"jsonrpc":"2.0","id":"x","method":"session/prompt","params":{"a":"é"}}\r\n'
    for raw in (line, line.encode()):
        message = decode_message(raw)
        assert message == JsonRpcRequest(id="x", method="session/prompt", params={"a": "é"})


def test_batches_decode_element_by_element() -> None:
    data = parse_json_line(
        b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"result":null},{"bad":1}]'
    )
    assert isinstance(data, list)
    assert message_from_json(data[0]) == JsonRpcNotification(method="a")
    assert message_from_json(data[1]) == JsonRpcSuccessResponse(id=2, result=None)
    with pytest.raises(InvalidMessageError):
        message_from_json(data[2])


def test_error_data_three_states() -> None:
    omitted = JsonRpcErrorObject(code=1, message="m")
    null = JsonRpcErrorObject(code=1, message="m", data=None)
    assert omitted != null
    assert "data" not in json.loads(encode_frame(omitted))
    assert json.loads(encode_frame(null))["data"] is None
    with pytest.raises(ValidationError):
        JsonRpcErrorObject(code=1, message="m", data=float("nan"))


def test_request_ids_are_strict() -> None:
    with pytest.raises(ValidationError):
        JsonRpcRequest(id=True, method="m")
    with pytest.raises(ValidationError):
        JsonRpcRequest(id=1.0, method="m")
    with pytest.raises(ValidationError):
        JsonRpcRequest(id=2**63, method="m")  # ACP ids are int64
    assert JsonRpcRequest(id=2**63 - 1, method="m").id == 2**63 - 1
    assert JsonRpcRequest(id=None, method="m").id is None  # v1 allows it; the connection decides


def test_array_params_and_null_ids_decode_for_the_connection_to_judge() -> None:
    message = decode_message('{"jsonrpc":"2.0","id":null,"method":"m","params":[1,"x"]}')
    assert isinstance(message, JsonRpcRequest)
    assert (message.id, message.params) == (None, [1, "x"])


def test_an_overflowing_number_keeps_the_readable_id() -> None:
    with pytest.raises(MessageParseError) as caught:
        decode_message('{"jsonrpc":"2.0","id":77,"method":"m","params":{"n":1e400}}')
    assert caught.value.request_id == 77
    with pytest.raises(MessageParseError) as caught:
        decode_message('{"jsonrpc":"2.0","id":1e400,"method":"m"}')
    assert caught.value.request_id is None


def test_decode_line_splits_batches_entry_by_entry() -> None:
    entries = decode_line(
        '[{"jsonrpc":"2.0","id":1,"method":"a"}, 42, {"jsonrpc":"2.0","id":2,"method":5},'
        ' {"jsonrpc":"2.0","id":3}]'
    )
    assert isinstance(entries, list)
    assert entries[0] == JsonRpcRequest(id=1, method="a")
    assert isinstance(entries[1], InvalidMessageError)
    assert isinstance(entries[2], InvalidMessageError)
    assert entries[2].request_id is None  # inside a batch, an invalid entry is answered id: null
    assert isinstance(entries[3], InvalidMessageError)
    assert entries[3].is_response  # never answered: it keeps the id of what it answers
    assert entries[3].request_id == 3
    with pytest.raises(InvalidMessageError):
        decode_line("[]")
    assert decode_line('{"jsonrpc":"2.0","method":"n"}') == JsonRpcNotification(method="n")
