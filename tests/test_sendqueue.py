"""Synchronous tests of the pure send queue: events in, exact frames out.

Every frame is compared as parsed JSON against the message a client must receive. The queue is
driven by hand (``next_frame`` then ``written`` / ``lost``), so each interleaving of producers
and the writer is spelled out in the test instead of depending on a scheduler.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import OMITTED, FrameTooLargeError, MetaValueError, SessionExistsError
from agent_meta.sansio._queue import Outgoing, SendQueue
from agent_meta.sansio._state import EncodedUpdate, LifetimeState, encode_update

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


# -- publish_now: the queue skipped, the same frame -------------------------------------------


def _counters(q: SendQueue) -> tuple[int, ...]:
    c = q.counters
    return (
        c.publications,
        c.frames_written,
        c.bytes_written,
        c.fenced,
        c.coalesced,
        c.write_failures,
        c.resyncs,
        c.repairs,
    )


def _drain_frames(q: SendQueue) -> list[bytes]:
    frames = []
    while (out := q.next_frame()) is not None:
        q.written(out)
        frames.append(out.frame)
    return frames


def _clear_with(update: EncodedUpdate) -> EncodedUpdate:
    """``_meta: null`` plus members: encode_update never makes one, but the queue takes it."""
    return EncodedUpdate(
        update.title, update.updated_at, True, update.meta_patch, update.notification_meta
    )


_small_json = st.one_of(
    st.none(),  # a removal at the top level
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), st.one_of(st.none(), st.integers(0, 3))),
)


@st.composite
def _updates(draw: st.DrawFn, protocol_version: int) -> EncodedUpdate:
    keys = st.sampled_from(["a", "b", "c", "zed.dev/x"])
    update = encode_update(
        title=draw(st.one_of(st.just(OMITTED), st.none(), st.text(max_size=4))),
        updated_at=draw(st.sampled_from([OMITTED, None, "2026-11-30T12:00:00Z"])),
        meta=draw(st.one_of(st.just(OMITTED), st.none(), st.dictionaries(keys, _small_json))),
        notification_meta=draw(
            st.one_of(st.none(), st.dictionaries(keys, st.integers(0, 3), max_size=2))
        ),
        protocol_version=protocol_version,
    )
    if update.meta_patch and draw(st.sampled_from(range(4))) == 0:
        update = _clear_with(update)
    return update


@given(
    data=st.data(),
    protocol_version=st.sampled_from([1, 2]),
    v1_meta_mode=st.sampled_from(["merged", "passthrough"]),
    coalesce=st.booleans(),
)
def test_publish_now_is_publish_then_drain(
    data: st.DataObject,
    protocol_version: int,
    v1_meta_mode: Literal["merged", "passthrough"],
    coalesce: bool,
) -> None:
    """On an idle queue publish_now must be exactly publish followed by the writer draining
    the queue: the same bytes, known state, counters and flushed position. It declines only
    what publish would render as two frames."""
    a, b = (
        SendQueue(protocol_version=protocol_version, v1_meta_mode=v1_meta_mode, coalesce=coalesce)
        for _ in range(2)
    )
    a.dirty, b.dirty = {}, {}
    sa, sb = opened(a), opened(b)
    for update in data.draw(st.lists(_updates(protocol_version), min_size=1, max_size=6)):
        assert a.publish(sa, update)
        expected = _drain_frames(a)
        frame = b.publish_now(sb, update)
        if frame is None:
            assert b.publish(sb, update)
            got = _drain_frames(b)
        else:
            b.written(Outgoing(frame, sb))
            assert b.next_frame() is None
            got = [frame]
        assert got == expected
        assert (frame is None) == (len(expected) == 2)
        assert sb.snapshot() == sa.snapshot()
        assert _counters(b) == _counters(a)
        assert b.position == a.position
        for q in (a, b):
            assert q.is_flushed(q.position)
            assert q.queued_entries == 0
        assert list(b.dirty) == [sb]
        assert list(a.dirty) == [sa]
        a.dirty.clear()
        b.dirty.clear()


def _observed(q: SendQueue, s: LifetimeState) -> tuple[object, ...]:
    return (
        s.snapshot(),
        s.needs_repair,
        _counters(q),
        q.counters.peak_queued_frames,
        q.position,
        q.queued_entries,
        q.queued_frames,
        q.is_flushed(q.position),
        None if q.dirty is None else list(q.dirty),
    )


def _assert_declined(q: SendQueue, s: LifetimeState, update: EncodedUpdate) -> None:
    before = _observed(q, s)
    assert q.publish_now(s, update) is None
    assert _observed(q, s) == before


def test_publish_now_declines_behind_queued_entries() -> None:
    """A queued entry must go first (R2), and a publication might have merged into it."""
    q = SendQueue()
    q.dirty = {}
    s = opened(q)
    other = opened(q, "other")
    q.publish(s, enc(meta={"a": 1}))
    _assert_declined(q, s, enc(meta={"b": 2}))
    _assert_declined(q, other, enc(meta={"o": 1}))
    assert drain(q) == [info({"_meta": {"a": 1}})]
    q.raw(raw_frame(1))
    _assert_declined(q, s, enc(title="T"))


def test_publish_now_declines_while_a_frame_is_being_written() -> None:
    """The writer holds a frame (or is between a resync's two frames): a direct write would
    overtake it or interleave with it."""
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    out = take(q)
    _assert_declined(q, s, enc(meta={"b": 2}))
    q.written(out)
    _assert_declined(q, s, enc(meta={"b": 2}))  # taken, but not yet finished by next_frame
    assert q.next_frame() is None
    q.resync(s)
    q.written(take(q))  # the clear
    _assert_declined(q, s, enc(meta={"b": 2}))
    assert drain(q) == [info({"_meta": {"a": 1}})]
    assert q.publish_now(s, enc(meta={"b": 2})) is not None


def test_publish_now_frame_is_in_flight_until_reported() -> None:
    """An unreported direct frame is one entry still to be written: flushing waits for it and
    a second direct frame must not overtake it."""
    q = SendQueue()
    s = opened(q)
    frame = q.publish_now(s, enc(meta={"a": 1}))
    assert frame is not None
    assert json.loads(frame) == info({"_meta": {"a": 1}})
    target = q.position
    assert not q.is_flushed(target)
    assert q.queued_entries == 1
    _assert_declined(q, s, enc(meta={"b": 2}))
    q.written(Outgoing(frame, s))
    assert q.is_flushed(target)
    assert q.queued_entries == 0
    assert q.counters.frames_written == 1
    assert q.counters.bytes_written == len(frame)
    assert q.publish_now(s, enc(meta={"b": 2})) is not None


def test_no_queued_frame_is_taken_before_the_direct_frame_is_reported() -> None:
    """Taking a queued frame while a direct frame is unreported would let it overtake the
    direct frame's unwritten rest: the queue refuses loudly instead."""
    q = SendQueue()
    s = opened(q)
    frame = q.publish_now(s, enc(meta={"a": 1}))
    assert frame is not None
    assert q.publish(s, enc(meta={"b": 2}))
    with pytest.raises(RuntimeError, match="report the last frame"):
        q.next_frame()
    q.written(Outgoing(frame, s))
    out = q.next_frame()
    assert out is not None
    assert json.loads(out.frame) == info({"_meta": {"b": 2}})


def test_close_stops_a_resync_between_its_two_frames() -> None:
    """Closing a lifetime while one of its frames is being written drops what follows it (the
    resync's snapshot), but that frame may be half on the wire: it is not counted as dropped,
    and nothing is flushed until the writer reports it (an owner leaving then would cut the
    line)."""
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    clear = take(q)
    assert parse(clear) == info({"_meta": None})
    assert q.close_lifetime(s) == 0
    assert not q.is_flushed(q.position)
    assert q.queued_entries == 1
    q.written(clear)
    assert q.next_frame() is None  # the snapshot frame is not sent
    assert q.is_flushed(q.position)
    assert q.counters.fenced == 0


def test_a_frame_handed_out_must_be_reported_before_the_next() -> None:
    q = SendQueue()
    s = opened(q)
    q.publish(s, enc(meta=None))
    q.publish(s, enc(meta={"b": 1}))  # merged: a clear, then the object (two frames)
    clear = take(q)
    with pytest.raises(RuntimeError, match="report the last frame"):
        q.next_frame()
    q.lost(clear)
    assert take(q).frame  # the repair resync, rendered only now


def test_a_direct_frame_dropped_unwritten_is_fenced_and_finished() -> None:
    q = SendQueue()
    s = opened(q)
    frame = q.publish_now(s, enc(meta={"a": 1}))
    assert frame is not None
    q.close_lifetime(s)
    assert not q.is_flushed(q.position)  # the frame may be half written: it is not dropped
    q.dropped(Outgoing(frame, s))
    assert q.is_flushed(q.position)
    assert q.counters.fenced == 1


def test_publish_now_declines_a_closed_lifetime() -> None:
    """Fencing (R6) and its count stay with publish, which the caller falls back to."""
    q = SendQueue()
    s = opened(q)
    q.close_lifetime(s)
    _assert_declined(q, s, enc(meta={"a": 1}))
    assert not q.publish(s, enc(meta={"a": 1}))
    assert q.counters.fenced == 1
    assert q.next_frame() is None


def test_publish_now_declines_a_lifetime_that_needs_repair() -> None:
    """The repair must run first; v1 pass-through queues no resync, so the queue is empty."""
    q = SendQueue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    q.publish(s, enc(meta={"a": 1}, protocol_version=1))
    q.lost(take(q))
    assert s.needs_repair
    assert q.next_frame() is None
    _assert_declined(q, s, enc(meta={"b": 2}, protocol_version=1))
    q.publish(s, enc(meta={"b": 2}, protocol_version=1))
    assert drain(q) == [info({"_meta": {"b": 2}})]
    assert q.counters.repairs == 1
    assert q.publish_now(s, enc(meta={"c": 3}, protocol_version=1)) is not None
    assert not s.needs_repair


@pytest.mark.parametrize(("protocol_version", "v1_meta_mode"), [(2, "merged"), (1, "passthrough")])
def test_publish_now_declines_a_clear_with_members(
    protocol_version: int, v1_meta_mode: Literal["merged", "passthrough"]
) -> None:
    """A clear with members is two frames; only the queue can send both in order."""
    q = SendQueue(protocol_version=protocol_version, v1_meta_mode=v1_meta_mode)
    s = opened(q)
    update = _clear_with(enc(meta={"a": 1}, protocol_version=protocol_version))
    _assert_declined(q, s, update)
    q.publish(s, update)
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]


def test_lost_publish_now_frame_is_finished_and_repaired() -> None:
    """lost() ends the direct frame like written() does, and on v2 repairs the client (R11)."""
    q = SendQueue()
    s = opened(q)
    frame = q.publish_now(s, enc(meta={"a": 1}))
    assert frame is not None
    target = q.position
    q.lost(Outgoing(frame, s))
    assert s.needs_repair
    assert q.counters.write_failures == 1
    assert q.queued_entries == 1  # the repair only
    assert not q.is_flushed(target)  # until the repair is delivered
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]
    assert q.is_flushed(target)
    assert q.queued_entries == 0
    assert not s.needs_repair


def test_lost_publish_now_frame_is_finished_without_repair_on_v1_passthrough() -> None:
    """Pass-through has no repair frames: the lost direct frame simply ends."""
    q = SendQueue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    frame = q.publish_now(s, enc(meta={"a": 1}, protocol_version=1))
    assert frame is not None
    target = q.position
    q.lost(Outgoing(frame, s))
    assert q.queued_entries == 0
    assert q.is_flushed(target)
    assert q.next_frame() is None
