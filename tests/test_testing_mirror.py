"""ClientMirror: the one client-side fold, checked against literal wire frames, the RFD's
conformance cases, and the library's patch core."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import (
    OMITTED,
    SessionInfo,
    SessionInfoPatch,
    apply_meta_patch,
    apply_session_info_patch,
)
from agent_meta.testing import ClientMirror, MirrorError
from agent_meta.testing._mirror import fold_meta
from tests.strategies import meta_updates, session_info_patches, stored_meta


def info_frame(session_id: str = "s", *, params_meta: Any = OMITTED, **update: Any) -> str:
    """A session_info_update line; ``meta=`` stands for the update's ``_meta``."""
    body: dict[str, Any] = {"sessionUpdate": "session_info_update"}
    if "meta" in update:
        update["_meta"] = update.pop("meta")
    body.update(update)
    params: dict[str, Any] = {"sessionId": session_id, "update": body}
    if params_meta is not OMITTED:
        params["_meta"] = params_meta
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return json.dumps(message, ensure_ascii=False) + "\n"


def fold(version: int, *lines: str, session_id: str = "s") -> dict[str, Any] | None:
    mirror = ClientMirror(version)
    for line in lines:
        mirror.feed(line)
    return mirror.meta(session_id)


# --- v2: the shallow patch rule -------------------------------------------------------------

V2_CASES = [
    pytest.param([], None, id="nothing"),
    pytest.param(['{"a": 1}'], {"a": 1}, id="object"),
    pytest.param(['{"a": 1}', '{"b": 2}'], {"a": 1, "b": 2}, id="keys-merge"),
    pytest.param(
        ['{"a": {"x": 1, "y": 2}}', '{"a": {"x": 3}}'], {"a": {"x": 3}}, id="no-deep-merge"
    ),
    pytest.param(['{"a": 1, "b": 2}', '{"a": null}'], {"b": 2}, id="null-key-removes"),
    pytest.param(['{"a": null}'], None, id="null-key-first-update"),
    pytest.param(['{"a": 1}', '{"a": null}'], None, id="empty-result-is-none"),
    pytest.param(
        ['{"a": {"n": null, "l": [null]}}'], {"a": {"n": None, "l": [None]}}, id="nested-nulls-kept"
    ),
    pytest.param(['{"a": 1}', "null"], None, id="clear"),
    pytest.param(['{"a": 1}', "null", '{"b": 2}'], {"b": 2}, id="clear-then-object"),
    pytest.param(['{"a": 1}', "OMIT"], {"a": 1}, id="omitted-unchanged"),
    pytest.param(['{"a": 1}', "{}"], {"a": 1}, id="empty-object-noop"),
    pytest.param(["{}"], None, id="empty-object-first"),
]


@pytest.mark.parametrize(("metas", "expected"), V2_CASES)
def test_v2_fold(metas: list[str], expected: object) -> None:
    lines = [info_frame() if m == "OMIT" else info_frame(meta=json.loads(m)) for m in metas]
    assert fold(2, *lines) == expected


# --- v1: a receiver that stores the field ---------------------------------------------------

V1_CASES = [
    pytest.param(['{"a": 1}', '{"b": 2}'], {"b": 2}, id="object-replaces-whole"),
    pytest.param(['{"a": 1, "b": 2}', '{"a": null}'], {"a": None}, id="null-key-stored-literally"),
    pytest.param(['{"a": 1}', "null"], {"a": 1}, id="null-is-unchanged"),
    pytest.param(['{"a": 1}', "OMIT"], {"a": 1}, id="omitted-unchanged"),
    pytest.param(['{"a": 1}', "{}"], None, id="empty-object-means-none"),
    pytest.param(['{"a": {"x": null}}'], {"a": {"x": None}}, id="nested-nulls-kept"),
]


@pytest.mark.parametrize(("metas", "expected"), V1_CASES)
def test_v1_fold(metas: list[str], expected: object) -> None:
    lines = [info_frame() if m == "OMIT" else info_frame(meta=json.loads(m)) for m in metas]
    assert fold(1, *lines) == expected


def render(patch: SessionInfoPatch) -> str:
    """The wire line for ``patch``, written here by hand (not by the library's wire code)."""
    texts = (("title", patch.title), ("updatedAt", patch.updated_at))
    fields: dict[str, Any] = {name: value for name, value in texts if value is not OMITTED}
    if patch.meta is not OMITTED:
        fields["meta"] = patch.meta
    return info_frame(**fields)


@given(st.lists(session_info_patches(), max_size=8))
def test_v2_mirror_agrees_with_the_core(patches: list[SessionInfoPatch]) -> None:
    # Two independent implementations of the same rule must agree on every sequence.
    mirror = ClientMirror(2)
    expected = SessionInfo()
    for patch in patches:
        mirror.feed(render(patch))
        expected = apply_session_info_patch(expected, patch)
        assert mirror.info("s") == expected


@given(stored_meta, st.lists(meta_updates, max_size=8))
def test_the_v2_rule_is_the_cores_from_any_stored_state(
    stored: dict[str, Any] | None, updates: list[Any]
) -> None:
    """The mirror's rule and ``apply_meta_patch`` agree update by update, whatever the client
    held first (keys no update mentions included)."""
    held = copy.deepcopy(stored) or None  # fold_meta changes it; a client never holds {}
    expected: Any = stored
    for update in updates:
        held = fold_meta(held, copy.deepcopy(update), 2)
        expected = apply_meta_patch(expected, update)
        assert held == expected


# The conformance cases of the ACP RFD "v2 Metadata Patches": stored, incoming, result.
RFD_CONFORMANCE = [
    pytest.param({"a": 1, "b": 2}, OMITTED, {"a": 1, "b": 2}, id="omitted"),
    pytest.param({"a": 1, "b": 2}, None, None, id="null-clears"),
    pytest.param({"a": 1, "b": 2}, {}, {"a": 1, "b": 2}, id="empty-object"),
    pytest.param({"a": 1, "b": 2}, {"a": 3}, {"a": 3, "b": 2}, id="replace-one-key"),
    pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="remove-one-key"),
    pytest.param(None, {"a": None}, None, id="remove-on-nothing"),
    pytest.param({"a": {"x": 1, "y": 2}}, {"a": {"x": 3}}, {"a": {"x": 3}}, id="no-nested-merge"),
    pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="arrays-replace"),
    pytest.param(None, {"a": {"x": None}}, {"a": {"x": None}}, id="nested-null-is-data"),
    # ... "They should also cover unknown keys, a clear followed by an object":
    pytest.param({"a": 1}, {"zed.dev/new": True}, {"a": 1, "zed.dev/new": True}, id="unknown-key"),
    pytest.param({"a": 1}, {"never-sent": None}, {"a": 1}, id="remove-unknown-key"),
    pytest.param(
        {"zed.dev/progress": 0.5, "acme.dev/review": {"state": "pending"}},
        {"zed.dev/progress": None, "acme.dev/review": {"reviewer": "sam"}, "proxy.dev/route": "e"},
        {"acme.dev/review": {"reviewer": "sam"}, "proxy.dev/route": "e"},
        id="the-rfd-example",
    ),
]


@pytest.mark.parametrize(("stored", "incoming", "result"), RFD_CONFORMANCE)
def test_the_rfd_conformance_cases(stored: Any, incoming: Any, result: Any) -> None:
    mirror = ClientMirror(2)
    if stored is not None:
        mirror.feed(info_frame(meta=stored))
    mirror.feed(info_frame() if incoming is OMITTED else info_frame(meta=incoming))
    assert mirror.meta("s") == result
    assert apply_meta_patch(stored, incoming) == result


def test_a_clear_followed_by_an_object_keeps_only_the_object() -> None:
    assert fold(
        2, info_frame(meta={"a": 1, "b": 2}), info_frame(meta=None), info_frame(meta={"c": 3})
    ) == {"c": 3}


def test_a_replay_over_stale_metadata_resets_nothing_on_its_own() -> None:
    """The RFD: replay applies patches as live delivery does and never resets metadata
    implicitly. A client that held ``{"stale", "live"}`` keeps the stale key through a replay of
    history that does not remove it; ``_meta: null`` and the snapshot after the replay (R4)
    leave exactly the current state."""
    mirror = ClientMirror(2)
    mirror.feed(info_frame(meta={"stale": 1, "live": 2}))
    mirror.feed(info_frame(meta={"live": 1}))  # replayed history
    assert mirror.meta("s") == {"stale": 1, "live": 1}
    mirror.feed(info_frame(meta=None))
    mirror.feed(info_frame(meta={"live": 2}))
    assert mirror.meta("s") == {"live": 2}


def test_same_frames_differ_between_v1_and_v2() -> None:
    lines = [
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        '{"sessionUpdate":"session_info_update","_meta":{"a":1,"b":2}}}}\n',
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        '{"sessionUpdate":"session_info_update","_meta":{"b":null,"c":3}}}}\n',
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        '{"sessionUpdate":"session_info_update","_meta":null}}}\n',
    ]
    assert fold(2, *lines[:2]) == {"a": 1, "c": 3}
    assert fold(1, *lines[:2]) == {"b": None, "c": 3}
    assert fold(2, *lines) is None
    assert fold(1, *lines) == {"b": None, "c": 3}


def test_protocol_version_validated() -> None:
    with pytest.raises(ValueError, match="protocol_version"):
        ClientMirror(3)
    assert ClientMirror().protocol_version == 2
    assert ClientMirror(1).protocol_version == 1


def test_the_protocol_version_set_once_negotiated_rules_later_frames() -> None:
    mirror = ClientMirror(1)  # as a proxy starts, before initialize is answered
    mirror.feed(info_frame(meta={"a": 1}))
    mirror.protocol_version = 2
    mirror.feed(info_frame(meta={"b": 2}))
    assert mirror.meta("s") == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="protocol_version"):
        mirror.protocol_version = 3
    assert mirror.protocol_version == 2


# --- title / updatedAt ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_title_and_updated_at_three_state(version: int) -> None:
    mirror = ClientMirror(version)
    assert mirror.info("s") == SessionInfo()
    mirror.feed(info_frame(meta={"a": 1}))
    assert mirror.info("s") == SessionInfo(meta={"a": 1})
    assert mirror.info("s").title is OMITTED
    mirror.feed(info_frame(title="T", updatedAt="2026-01-01T00:00:00Z"))
    assert mirror.info("s") == SessionInfo(
        title="T", updated_at="2026-01-01T00:00:00Z", meta={"a": 1}
    )
    mirror.feed(info_frame(title=None))
    assert mirror.info("s") == SessionInfo(
        title=None, updated_at="2026-01-01T00:00:00Z", meta={"a": 1}
    )
    mirror.feed(info_frame(updatedAt=None, title="U"))
    assert mirror.info("s") == SessionInfo(title="U", updated_at=None, meta={"a": 1})


@pytest.mark.parametrize("field", ["title", "updatedAt"])
def test_non_string_text_field_raises(field: str) -> None:
    mirror = ClientMirror()
    with pytest.raises(MirrorError, match=field):
        mirror.feed(info_frame("s", **{field: 5}))
    assert mirror.session_ids == []


# --- malformed _meta ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("bad", [[1, 2], "oops", 3, True])
def test_malformed_meta_raises_and_changes_nothing(version: int, bad: object) -> None:
    mirror = ClientMirror(version)
    mirror.feed(info_frame(meta={"a": 1}))
    line = info_frame(meta=bad)
    with pytest.raises(MirrorError, match="_meta") as caught:
        mirror.feed(line)
    assert isinstance(caught.value, AssertionError)
    assert json.dumps(bad) in str(caught.value)  # the frame is quoted
    assert caught.value.reason.startswith("update._meta is a")  # the same, without the frame
    assert json.dumps(bad) not in caught.value.reason
    assert mirror.meta("s") == {"a": 1}
    assert len(mirror.messages) == 1
    assert len(mirror.frames_for("s")) == 1


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="array"),
        pytest.param('{"method": "x"}', id="no-jsonrpc"),
        pytest.param('{"jsonrpc": "2.0", "a": 1, "a": 2}', id="duplicate-key"),
        pytest.param('{"jsonrpc": "2.0", "result": NaN, "id": 1}', id="nan"),
        pytest.param('{"jsonrpc": "2.0", "id": 1}\n{"jsonrpc": "2.0", "id": 2}', id="two-lines"),
        pytest.param("", id="empty"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(
            '{"jsonrpc":"2.0","method":"session/update","params":[1]}', id="params-not-object"
        ),
        pytest.param(
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}',
            id="no-update",
        ),
        pytest.param(
            '{"jsonrpc":"2.0","method":"session/update","params":{"update":'
            '{"sessionUpdate":"session_info_update"}}}',
            id="no-session-id",
        ),
    ],
)
def test_malformed_frames_raise(line: str | bytes) -> None:
    mirror = ClientMirror()
    with pytest.raises(MirrorError):
        mirror.feed(line)
    assert mirror.messages == []


def test_params_meta_must_be_object_or_null() -> None:
    mirror = ClientMirror()
    with pytest.raises(MirrorError, match=r"params\._meta"):
        mirror.feed(info_frame(meta={"a": 1}, params_meta=[1]))
    assert mirror.meta("s") is None


def test_feed_rejects_other_types() -> None:
    with pytest.raises(MirrorError, match="int"):
        ClientMirror().feed(5)  # type: ignore[arg-type]


# --- notification meta, sessions, messages --------------------------------------------------


def test_notification_meta_kept_apart() -> None:
    mirror = ClientMirror()
    mirror.feed(info_frame(meta={"a": 1}, params_meta={"traceparent": "00-x", "n": None}))
    mirror.feed(info_frame(title="T"))
    mirror.feed(info_frame(params_meta=None))
    assert mirror.meta("s") == {"a": 1}
    assert mirror.notification_meta("s") == [{"traceparent": "00-x", "n": None}, None]
    assert mirror.info("s") == SessionInfo(title="T", meta={"a": 1})
    assert mirror.notification_meta("other") == []


def test_sessions_are_separate_and_reset_forgets_one() -> None:
    mirror = ClientMirror()
    mirror.feed(info_frame("s1", meta={"a": 1}))
    mirror.feed(info_frame("s2", meta={"b": 2}, title="two"))
    assert mirror.session_ids == ["s1", "s2"]
    assert mirror.meta("s1") == {"a": 1}
    assert mirror.info("s2") == SessionInfo(title="two", meta={"b": 2})
    mirror.reset("s2")
    mirror.reset("never-seen")
    assert mirror.session_ids == ["s1"]
    assert mirror.info("s2") == SessionInfo()
    assert mirror.frames_for("s2") == []
    assert len(mirror.messages) == 2  # the transcript survives a reset
    mirror.feed(info_frame("s2", meta={"c": 3}))
    assert mirror.meta("s2") == {"c": 3}


def test_other_messages_recorded_but_not_folded() -> None:
    mirror = ClientMirror()
    chunk = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "_meta": {"a": 1}},
        },
    }
    response = {"jsonrpc": "2.0", "id": 3, "result": {"_meta": {"x": 1}}}
    other = {"jsonrpc": "2.0", "method": "_vendor/thing", "params": {"sessionId": "s"}}
    request = {"jsonrpc": "2.0", "id": 4, "method": "session/update", "params": None}
    for message in (chunk, response, other, request):
        assert mirror.feed(message) == message
    assert mirror.messages == [chunk, response, other, request]
    assert mirror.session_ids == []
    assert mirror.meta("s") is None


def test_frames_for_returns_whole_messages_in_order() -> None:
    mirror = ClientMirror()
    first = mirror.feed(info_frame(meta={"a": 1}))
    mirror.feed(info_frame("other", title="x"))
    second = mirror.feed(info_frame(meta=None))
    assert mirror.frames_for("s") == [first, second]
    assert mirror.frames_for("s")[1]["params"]["update"]["_meta"] is None
    assert "_meta" not in mirror.frames_for("other")[0]["params"]["update"]


def test_returned_values_are_copies() -> None:
    mirror = ClientMirror()
    given = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {"sessionUpdate": "session_info_update", "_meta": {"a": {"x": 1}}},
        },
    }
    mirror.feed(given)
    given["params"]["update"]["_meta"]["a"]["x"] = 99  # type: ignore[index]
    got = mirror.meta("s")
    assert got == {"a": {"x": 1}}
    assert got is not None
    got["a"]["x"] = 5
    mirror.frames_for("s")[0]["params"]["update"]["_meta"] = None
    assert mirror.meta("s") == {"a": {"x": 1}}
    info = mirror.info("s")
    assert info.meta == {"a": {"x": 1}}


def test_state_does_not_alias_fed_messages() -> None:
    for version in (1, 2):
        mirror = ClientMirror(version)
        message = mirror.feed(info_frame(meta={"a": {"x": 1}}))
        message["params"]["update"]["_meta"]["a"]["x"] = 2
        mirror.messages[0]["params"]["update"]["_meta"]["a"]["y"] = 3
        assert mirror.meta("s") == {"a": {"x": 1}}


def test_later_object_does_not_alias_earlier_frame() -> None:
    mirror = ClientMirror()
    mirror.feed(info_frame(meta={"a": [1]}))
    mirror.feed(info_frame(meta={"b": 2}))
    assert mirror.frames_for("s")[0]["params"]["update"]["_meta"] == {"a": [1]}
    assert mirror.meta("s") == {"a": [1], "b": 2}


# --- byte stream input ----------------------------------------------------------------------


def test_feed_accepts_bytes_and_str_with_or_without_newline() -> None:
    line = info_frame(meta={"a": 1})
    for form in (line, line.rstrip("\n"), line.encode(), line.rstrip("\n").encode()):
        mirror = ClientMirror()
        mirror.feed(form)
        assert mirror.meta("s") == {"a": 1}


def test_feed_bytes_buffers_partial_lines() -> None:
    data = (info_frame(meta={"a": 1}) + info_frame(meta={"b": "é"})).encode()
    mirror = ClientMirror()
    cut = len(info_frame(meta={"a": 1}).encode()) + 10
    assert mirror.feed_bytes(data[:5]) == []
    assert mirror.partial == data[:5]
    assert mirror.messages == []
    done = mirror.feed_bytes(data[5:cut])
    assert len(done) == 1
    assert mirror.meta("s") == {"a": 1}
    assert mirror.partial == data[len(info_frame(meta={"a": 1}).encode()) : cut]
    # split inside the two-byte "é"
    split = data.index("é".encode()) + 1
    assert mirror.feed_bytes(data[cut:split]) == []
    assert len(mirror.feed_bytes(data[split:])) == 1
    assert mirror.partial == b""
    assert mirror.meta("s") == {"a": 1, "b": "é"}


def test_feed_bytes_many_lines_in_one_chunk_and_blank_lines() -> None:
    data = (info_frame(meta={"a": 1}) + "\n  \n" + info_frame(meta={"a": None})).encode()
    mirror = ClientMirror()
    assert len(mirror.feed_bytes(data)) == 2
    assert mirror.meta("s") is None
    assert len(mirror.frames_for("s")) == 2


def test_feed_bytes_rejects_str() -> None:
    with pytest.raises(TypeError):
        ClientMirror().feed_bytes("text")  # type: ignore[arg-type]


# --- without a transcript: the proxy's fold ---------------------------------------------------


def test_without_a_transcript_only_each_sessions_view_is_kept() -> None:
    mirror = ClientMirror(2, transcript=False)
    message = json.loads(info_frame(meta={"a": {"x": 1}}, title="T"))
    assert mirror.feed(message) is message  # not copied
    view = mirror.view("s")
    assert view is not None
    assert view is mirror.view("s")  # the mirror's own record: reading it costs nothing
    assert view.meta is not None
    assert view.meta["a"] is message["params"]["update"]["_meta"]["a"]  # values are adopted
    assert (view.title, view.updated_at) == ("T", OMITTED)
    mirror.feed_bytes(info_frame(meta={"b": 2}).encode())
    assert mirror.meta("s") == {"a": {"x": 1}, "b": 2}
    assert mirror.info("s") == SessionInfo(title="T", meta={"a": {"x": 1}, "b": 2})
    with pytest.raises(RuntimeError, match="transcript"):
        _ = mirror.messages
    with pytest.raises(RuntimeError, match="transcript"):
        mirror.frames_for("s")
    with pytest.raises(RuntimeError, match="transcript"):
        mirror.notification_meta("s")
    mirror.reset("s")
    assert mirror.view("s") is None
    assert mirror.session_ids == []


def test_without_a_transcript_a_malformed_update_still_changes_nothing() -> None:
    mirror = ClientMirror(1, transcript=False)
    mirror.feed(info_frame(meta={"a": 1}, title="T"))
    with pytest.raises(MirrorError, match="title is a number, not a string or null"):
        mirror.feed(json.loads(info_frame(meta={"b": 2}, title=5)))
    assert mirror.info("s") == SessionInfo(title="T", meta={"a": 1})


def test_the_v1_rule_leaves_what_was_held_as_it_was() -> None:
    """The watcher reads what a v1 client held before a frame after folding it."""
    held = {"a": 1}
    assert fold_meta(held, {"b": None}, 1) == {"b": None}
    assert fold_meta(held, None, 1) is held
    assert fold_meta(held, {}, 1) is None
    assert held == {"a": 1}
