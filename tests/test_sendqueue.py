"""Synchronous tests of the pure send queue: events in, exact frames out.

Every frame is compared as parsed JSON against the message a client must receive. The queue is
driven by hand (``next_frame`` then ``written`` / ``lost``), so each interleaving of producers
and the writer is spelled out in the test instead of depending on a scheduler.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agent_meta import OMITTED, FrameTooLargeError, MetaValueError, SessionExistsError
from agent_meta._sendqueue import Outgoing, SendQueue
from agent_meta._state import EncodedUpdate, LifetimeState, encode_update

SID = "s1"


def enc(**fields: Any) -> EncodedUpdate:
    return encode_update(**fields)


def info(update: dict[str, Any], *, sid: str = SID, nmeta: Any = OMITTED) -> dict[str, Any]:
    """The exact ``session/update`` message carrying a ``session_info_update``."""
    params: dict[str, Any] = {
        "sessionId": sid,
        "update": {"sessionUpdate": "session_info_update", **update},
    }
    if nmeta is not OMITTED:
        params["_meta"] = nmeta
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def take(q: SendQueue) -> Outgoing:
    out = q.next_frame()
    assert out is not None
    return out


def drain(q: SendQueue) -> list[dict[str, Any]]:
    """Write everything queued, as a writer that never fails would."""
    frames = []
    while (out := q.next_frame()) is not None:
        q.written(out)
        frames.append(parse(out))
    return frames


def parse(out: Outgoing) -> dict[str, Any]:
    assert out.frame.endswith(b"\n")
    assert out.frame.count(b"\n") == 1
    message: dict[str, Any] = json.loads(out.frame)
    return message


def raw_frame(request_id: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % request_id


def opened(q: SendQueue, sid: str = SID) -> LifetimeState:
    return q.open_lifetime(sid)


# -- exact frames and the known state (R1) ------------------------------------------------


def test_publication_becomes_one_exact_frame() -> None:
    q = SendQueue()
    s = opened(q)
    assert q.publish(
        s, enc(title="T", updated_at="2025-01-01T00:00:00Z", meta={"a": {"b": None}, "gone": None})
    )
    assert drain(q) == [
        info(
            {
                "title": "T",
                "updatedAt": "2025-01-01T00:00:00Z",
                "_meta": {"a": {"b": None}, "gone": None},
            }
        )
    ]
    assert s.snapshot().meta == {"a": {"b": None}}
    assert q.next_frame() is None


def test_omitted_fields_are_absent_and_null_fields_are_sent_as_null() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(title=None))
    assert drain(q) == [info({"title": None})]
    q.publish(s, enc(meta=None))
    assert drain(q) == [info({"_meta": None})]


def test_known_state_folds_the_rfd_rule() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1, "b": {"x": 1}}))
    q.publish(s, enc(meta={"b": {"y": 2}, "c": None, "d": [1, None]}))
    q.publish(s, enc(meta={"a": None}))
    snap = s.snapshot()
    assert snap.meta == {"b": {"y": 2}, "d": [1, None]}
    assert snap.title is OMITTED
    assert snap.updated_at is OMITTED
    q.publish(s, enc(meta=None))
    assert s.snapshot().meta is None


def test_encoded_values_are_json_copies() -> None:
    value: dict[str, Any] = {"list": [1, 2]}
    update = enc(meta={"k": value})
    value["list"].append(3)
    value["new"] = True
    q = SendQueue()
    s = opened(q)
    q.publish(s, update)
    assert s.snapshot().meta == {"k": {"list": [1, 2]}}
    assert drain(q) == [info({"_meta": {"k": {"list": [1, 2]}}})]


def test_snapshot_is_a_fresh_copy() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"k": {"v": 1}}))
    snap = s.snapshot()
    assert snap.meta is not None
    inner = snap.meta["k"]
    assert isinstance(inner, dict)
    inner["v"] = 2
    assert s.snapshot().meta == {"k": {"v": 1}}


# -- coalescing normal form (R3) ------------------------------------------------------------


def test_queued_patches_merge_into_one_frame() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1, "b": 1}))
    q.publish(s, enc(title="x", meta={"b": 2}))
    q.publish(s, enc(meta={"c": 3}))
    assert q.counters.coalesced == 2
    assert q.queued_frames == 1
    assert drain(q) == [info({"title": "x", "_meta": {"a": 1, "b": 2, "c": 3}})]


def test_merged_removals_are_kept() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.publish(s, enc(meta={"a": None, "never-seen": None}))
    assert drain(q) == [info({"_meta": {"a": None, "never-seen": None}})]
    assert s.snapshot().meta is None


def test_clear_then_object_stays_two_frames() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.publish(s, enc(title="t", meta=None))
    q.publish(s, enc(meta={"b": 2}))
    q.publish(s, enc(meta={"c": None}))
    assert q.queued_frames == 2
    assert drain(q) == [
        info({"title": "t", "_meta": None}),
        info({"_meta": {"b": 2, "c": None}}),
    ]
    assert s.snapshot().meta == {"b": 2}


def test_object_then_clear_collapses_to_the_clear() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.publish(s, enc(meta=None))
    assert drain(q) == [info({"_meta": None})]


def test_notification_meta_frame_is_never_merged_and_is_a_barrier() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.publish(s, enc(meta={"b": 1}, notification_meta={"traceparent": "00-1"}))
    q.publish(s, enc(meta={"c": 1}))
    q.publish(s, enc(meta={"d": 1}, notification_meta={"traceparent": "00-2"}))
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": {"b": 1}}, nmeta={"traceparent": "00-1"}),
        info({"_meta": {"c": 1}}),
        info({"_meta": {"d": 1}}, nmeta={"traceparent": "00-2"}),
    ]
    assert q.counters.coalesced == 0


def test_entry_in_flight_is_not_merged_into() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    first = take(q)
    q.publish(s, enc(meta={"a": 2}))
    q.written(first)
    assert parse(first) == info({"_meta": {"a": 1}})
    assert drain(q) == [info({"_meta": {"a": 2}})]


def test_sessions_are_merged_separately() -> None:
    q = SendQueue()
    s1 = opened(q, "s1")
    s2 = opened(q, "s2")
    q.publish(s1, enc(meta={"a": 1}))
    q.publish(s2, enc(meta={"a": 2}))
    q.publish(s1, enc(meta={"b": 1}))
    assert drain(q) == [
        info({"_meta": {"a": 1, "b": 1}}, sid="s1"),
        info({"_meta": {"a": 2}}, sid="s2"),
    ]


def test_coalesce_off_every_update_is_its_own_frame() -> None:
    q = SendQueue(coalesce=False)
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.publish(s, enc(meta={"a": 2}))
    assert drain(q) == [info({"_meta": {"a": 1}}), info({"_meta": {"a": 2}})]


# -- resync (R4) ------------------------------------------------------------------------------


def test_resync_is_clear_then_snapshot() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(title="T", meta={"a": 1}))
    drain(q)
    assert q.resync(s)
    assert drain(q) == [info({"_meta": None}), info({"title": "T", "_meta": {"a": 1}})]
    assert q.counters.resyncs == 1


def test_resync_snapshot_is_rendered_at_write_time() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    q.publish(s, enc(meta={"a": 2, "b": None}))
    clear = take(q)
    q.publish(s, enc(meta={"c": 3}))  # after the clear was taken, before the snapshot
    q.written(clear)
    assert parse(clear) == info({"_meta": None})
    assert drain(q) == [
        info({"_meta": {"a": 2, "c": 3}}),
        info({"_meta": {"a": 2, "b": None, "c": 3}}),
    ]


def test_pending_resyncs_are_deduplicated() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    q.resync(s)
    q.resync(s)
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]


def test_resync_of_an_empty_state_is_the_clear_only() -> None:
    q = SendQueue()
    s = opened(q)
    q.resync(s)
    assert drain(q) == [info({"_meta": None})]


def test_resync_snapshot_omits_unknown_title() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.resync(s)
    frames = drain(q)
    assert frames[-1] == info({"_meta": {"a": 1}})
    assert "title" not in frames[-1]["params"]["update"]
    assert "updatedAt" not in frames[-1]["params"]["update"]


def test_resync_restores_a_known_null_title() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(title=None))
    q.resync(s)
    assert drain(q)[-2:] == [info({"_meta": None}), info({"title": None})]


def test_publication_after_resync_is_not_merged_before_it() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.resync(s)
    q.raw(raw_frame(7))
    q.publish(s, enc(meta={"b": 2}))
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": None}),
        info({"_meta": {"a": 1, "b": 2}}),
        {"jsonrpc": "2.0", "id": 7, "result": {}},
        info({"_meta": {"b": 2}}),
    ]


def test_seed_is_known_but_not_sent() -> None:
    q = SendQueue()
    s = q.open_lifetime(SID, enc(title="seeded", meta={"thread": {"status": "idle"}}))
    assert q.next_frame() is None
    assert s.snapshot().meta == {"thread": {"status": "idle"}}
    q.resync(s)
    assert drain(q) == [
        info({"_meta": None}),
        info({"title": "seeded", "_meta": {"thread": {"status": "idle"}}}),
    ]


# -- lifetimes and fencing (R5, R6) -----------------------------------------------------------


def test_reopening_a_live_lifetime_raises() -> None:
    q = SendQueue()
    opened(q)
    with pytest.raises(SessionExistsError):
        opened(q)


def test_close_drops_queued_frames_and_fences_later_calls() -> None:
    q = SendQueue()
    s = opened(q)
    other = opened(q, "other")
    q.publish(s, enc(meta={"a": 1}))
    q.publish(other, enc(meta={"o": 1}))
    q.resync(s)
    q.raw(raw_frame(1))
    assert q.close_lifetime(s) == 3
    assert s.closed
    assert not q.publish(s, enc(meta={"late": 1}))
    assert not q.resync(s)
    assert q.counters.fenced == 5
    assert drain(q) == [
        info({"_meta": {"o": 1}}, sid="other"),
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]


def test_close_stops_a_resync_between_its_two_frames() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    clear = take(q)
    assert parse(clear) == info({"_meta": None})
    q.close_lifetime(s)
    q.written(clear)
    assert q.next_frame() is None


def test_close_stops_the_second_frame_of_clear_then_object() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta=None))
    q.publish(s, enc(meta={"b": 1}))
    clear = take(q)
    q.close_lifetime(s)
    q.written(clear)
    assert q.next_frame() is None


def test_reopened_lifetime_starts_fresh() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(title="old", meta={"old": 1}))
    q.close_lifetime(s)
    fresh = opened(q)
    assert fresh is not s
    assert fresh.is_empty()
    q.resync(fresh)
    assert drain(q) == [info({"_meta": None})]
    assert not q.publish(s, enc(meta={"x": 1}))
    assert fresh.snapshot().meta is None


# -- write outcomes (R11) ----------------------------------------------------------------------


def test_lost_frame_is_repaired_by_a_resync() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.lost(take(q))
    assert s.needs_repair
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]
    assert q.counters.write_failures == 1
    assert q.counters.repairs == 1
    assert not s.needs_repair


def test_repair_precedes_the_lifetimes_next_frame() -> None:
    q = SendQueue()
    s = opened(q)
    other = opened(q, "other")
    q.publish(s, enc(meta={"a": 1}))
    lost = take(q)
    q.publish(other, enc(meta={"o": 1}))
    q.publish(s, enc(meta={"b": 2}))
    q.lost(lost)
    assert drain(q) == [
        info({"_meta": {"o": 1}}, sid="other"),
        info({"_meta": None}),
        info({"_meta": {"a": 1, "b": 2}}),
        info({"_meta": {"b": 2}}),
    ]
    assert q.counters.repairs == 1


def test_lost_first_frame_of_a_resync_drops_the_rest_and_repairs() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    q.lost(take(q))
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]


def test_lost_raw_frame_is_only_counted() -> None:
    q = SendQueue()
    s = opened(q)
    q.raw(raw_frame(3))
    q.lost(take(q))
    assert q.counters.write_failures == 1
    assert not s.needs_repair
    assert q.next_frame() is None


def test_written_frames_are_counted() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    out = take(q)
    q.written(out)
    assert q.counters.frames_written == 1
    assert q.counters.bytes_written == len(out.frame)


# -- capacity (R3) ---------------------------------------------------------------------------


def test_raw_frames_count_against_capacity() -> None:
    q = SendQueue(capacity=2)
    opened(q)
    assert q.has_room()
    q.raw(raw_frame(1))
    q.raw(raw_frame(2))
    assert not q.has_room()
    q.written(take(q))
    assert q.has_room()


def test_merged_publications_and_resyncs_never_need_room() -> None:
    q = SendQueue(capacity=1)
    s = opened(q)
    q.raw(raw_frame(1))
    assert not q.has_room()
    update = enc(meta={"a": 1})
    assert not q.publication_needs_room(s, update)
    for i in range(100):
        q.publish(s, enc(meta={"a": i}))
        q.resync(s)
    assert q.queued_entries <= 4


def test_notification_meta_and_coalesce_off_need_room() -> None:
    q = SendQueue(capacity=1)
    s = opened(q)
    assert q.publication_needs_room(s, enc(meta={"a": 1}, notification_meta={"t": 1}))
    off = SendQueue(coalesce=False)
    s_off = opened(off)
    assert off.publication_needs_room(s_off, enc(meta={"a": 1}))


def test_merge_that_would_overflow_the_frame_needs_room() -> None:
    q = SendQueue(max_frame_bytes=2000)
    s = opened(q)
    q.publish(s, enc(meta={"a": "x" * 500}))
    assert not q.publication_needs_room(s, enc(meta={"b": "y" * 100}))
    assert q.publication_needs_room(s, enc(meta={"b": "y" * 600}))


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SendQueue(capacity=0)


# -- protocol v1 (R10) -----------------------------------------------------------------------


def test_v1_merged_sends_the_complete_object_on_every_frame() -> None:
    q = SendQueue(protocol_version=1)
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    assert drain(q) == [info({"_meta": {"a": 1}})]
    q.publish(s, enc(meta={"b": 2}, protocol_version=1))
    assert drain(q) == [info({"_meta": {"a": 1, "b": 2}})]
    q.publish(s, enc(meta={"a": None, "b": None}, protocol_version=1))
    assert drain(q) == [info({"_meta": {}})]
    q.publish(s, enc(meta=None, protocol_version=1))
    assert drain(q) == [info({"_meta": {}})]


def test_v1_merged_title_only_frame_carries_the_whole_object() -> None:
    q = SendQueue(protocol_version=1)
    s = opened(q)
    q.publish(s, enc(title="t", protocol_version=1))
    assert drain(q) == [info({"title": "t", "_meta": {}})]
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    drain(q)
    q.publish(s, enc(title="u", protocol_version=1))
    assert drain(q) == [info({"title": "u", "_meta": {"a": 1}})]


def test_v1_merged_clear_then_object_is_one_frame() -> None:
    q = SendQueue(protocol_version=1)
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    q.publish(s, enc(meta=None, protocol_version=1))
    q.publish(s, enc(meta={"b": 2}, protocol_version=1))
    assert drain(q) == [info({"_meta": {"b": 2}})]


def test_v1_merged_resync_is_one_complete_frame() -> None:
    q = SendQueue(protocol_version=1)
    s = opened(q)
    q.resync(s)
    assert drain(q) == [info({"_meta": {}})]
    q.publish(s, enc(title="t", meta={"a": 1}, protocol_version=1))
    drain(q)
    q.resync(s)
    assert drain(q) == [info({"title": "t", "_meta": {"a": 1}})]


def test_v1_passthrough_sends_patches_as_published_without_resync() -> None:
    q = SendQueue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    q.publish(s, enc(meta={"b": None}, protocol_version=1))
    q.resync(s)
    assert drain(q) == [info({"_meta": {"a": 1}}), info({"_meta": {"b": None}})]
    assert q.counters.coalesced == 0
    assert s.snapshot().meta == {"a": 1}


def test_v1_passthrough_lost_frame_queues_no_repair() -> None:
    q = SendQueue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    q.lost(take(q))
    assert q.next_frame() is None


# -- bad input and limits (R12) ---------------------------------------------------------------


class _Key:
    pass


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    "fields",
    [
        {"meta": {"a": math.nan}},
        {"meta": {"a": [math.inf]}},
        {"meta": {"a": b"bytes"}},
        {"meta": {"a": {1, 2}}},
        {"meta": {1: "non-str key"}},
        {"meta": {"a": {_Key(): 1}}},
        {"meta": {"a": _cycle()}},
        {"meta": [("a", 1)]},
        {"meta": "text"},
        {"title": 3},
        {"updated_at": "2025-01-01T00:00:00"},
        {"updated_at": "yesterday"},
        {"notification_meta": {"a": math.nan}},
    ],
    ids=repr,
)
def test_bad_input_raises_before_anything_changes(fields: dict[str, Any]) -> None:
    with pytest.raises(MetaValueError):
        enc(**fields)


def test_v1_accepts_updated_at_without_offset() -> None:
    update = enc(updated_at="2025-01-01T00:00:00", protocol_version=1)
    assert update.updated_at == '"2025-01-01T00:00:00"'


def test_oversized_publication_raises_before_anything_changes() -> None:
    q = SendQueue(max_frame_bytes=1000)
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    with pytest.raises(FrameTooLargeError):
        q.publish(s, enc(meta={"big": "x" * 2000}))
    assert s.snapshot().meta == {"a": 1}
    assert q.counters.publications == 1
    assert drain(q) == [info({"_meta": {"a": 1}})]


def test_growing_state_past_the_limit_raises() -> None:
    q = SendQueue(max_frame_bytes=1000)
    s = opened(q)
    for i in range(3):
        q.publish(s, enc(meta={f"k{i}": "x" * 250}))
    with pytest.raises(FrameTooLargeError):
        q.publish(s, enc(meta={"k9": "x" * 250}))
    assert sorted(s.snapshot().meta or {}) == ["k0", "k1", "k2"]


def test_oversized_seed_and_raw_frames_raise() -> None:
    q = SendQueue(max_frame_bytes=500)
    with pytest.raises(FrameTooLargeError):
        q.open_lifetime(SID, enc(meta={"a": "x" * 1000}))
    assert SID not in q.sessions
    with pytest.raises(FrameTooLargeError):
        q.raw(b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 1000 + b'"}\n')
    assert q.next_frame() is None


def test_removal_of_an_escaped_key_respects_the_frame_limit() -> None:
    q = SendQueue(max_frame_bytes=1000)
    s = opened(q)
    key = "\x01" * 400
    try:
        q.publish(s, enc(meta={key: None}))
    except FrameTooLargeError:
        return
    out = take(q)
    assert len(out.frame) <= 1000


# -- flushing ----------------------------------------------------------------------------------


def test_is_flushed_once_everything_up_to_the_target_is_written() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    q.raw(raw_frame(1))
    target = q.position
    assert not q.is_flushed(target)
    first = take(q)
    q.written(first)
    second = take(q)
    assert not q.is_flushed(target)
    q.written(second)
    assert q.next_frame() is None
    assert q.is_flushed(target)


def test_merge_does_not_flush_frames_queued_after_the_merged_entry() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"x": 0}))
    in_flight = take(q)
    q.publish(s, enc(meta={"a": 1}))
    q.raw(raw_frame(1))
    q.publish(s, enc(meta={"a": 2}))  # merged into the entry before the response
    target = q.position
    q.written(in_flight)
    merged = take(q)
    q.written(merged)
    response = take(q)
    assert parse(response) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert not q.is_flushed(target)  # the response is not written yet
