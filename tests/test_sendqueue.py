"""Synchronous tests of the pure send queue: events in, exact frames out.

Every frame is compared as parsed JSON against the message a client must receive. The queue is
driven by hand (``next_action`` then ``written`` / ``lost`` / ``stored``), so each interleaving
of producers and the writer is spelled out in the test instead of depending on a scheduler.
Sections follow the rules (R1-R12); ``docs/architecture.md`` is checked against their names.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import (
    OMITTED,
    FailureIncident,
    FrameTooLargeError,
    MetaPathError,
    MetaValueError,
    OwnerOptions,
    SessionExistsError,
    SessionInfoPatch,
)
from agent_meta.sansio._encode import EncodedUpdate, encode_update
from agent_meta.sansio._modes import V1MetaMode, wire_mode
from agent_meta.sansio.queue._edits import DomainEdit, Outcome, ReportFailure, ResolveFailure
from agent_meta.sansio.queue._entries import StoreBatch
from agent_meta.sansio.queue._queue import SendQueue
from tests.strategies import session_info_patches

if TYPE_CHECKING:
    from agent_meta.sansio.queue._state import LifetimeState

SID = "s1"


def enc(**fields: Any) -> EncodedUpdate:
    return encode_update(**fields)


def make_queue(*, durable: bool = False, **options: Any) -> SendQueue:
    return SendQueue(OwnerOptions(**options), durable=durable)


def publish(q: SendQueue, state: LifetimeState, update: EncodedUpdate) -> bool:
    """Submit a publication; True when accepted (never FULL in these tests unless asked)."""
    outcome = q.submit(state, update)
    assert outcome is not Outcome.FULL
    return outcome is Outcome.ACCEPTED


def next_frame(q: SendQueue) -> bytes | None:
    action = q.next_action()
    assert not isinstance(action, StoreBatch)
    return action


def info(update: dict[str, Any], *, sid: str = SID, nmeta: Any = OMITTED) -> dict[str, Any]:
    """The exact ``session/update`` message carrying a ``session_info_update``."""
    params: dict[str, Any] = {
        "sessionId": sid,
        "update": {"sessionUpdate": "session_info_update", **update},
    }
    if nmeta is not OMITTED:
        params["_meta"] = nmeta
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def take(q: SendQueue) -> bytes:
    out = next_frame(q)
    assert out is not None
    return out


def drain(q: SendQueue) -> list[dict[str, Any]]:
    """Write everything queued, as a writer that never fails would."""
    frames = []
    while (out := next_frame(q)) is not None:
        q.written()
        frames.append(parse(out))
    return frames


def parse(frame: bytes) -> dict[str, Any]:
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    message: dict[str, Any] = json.loads(frame)
    return message


def raw_frame(request_id: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % request_id


def opened(q: SendQueue, sid: str = SID) -> LifetimeState:
    return q.open_lifetime(sid)


# -- exact frames and the known state (R1) ------------------------------------------------


def test_publication_becomes_one_exact_frame() -> None:
    q = make_queue()
    s = opened(q)
    assert publish(
        q,
        s,
        enc(title="T", updated_at="2025-01-01T00:00:00Z", meta={"a": {"b": None}, "gone": None}),
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
    assert next_frame(q) is None


def test_omitted_fields_are_absent_and_null_fields_are_sent_as_null() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title=None))
    assert drain(q) == [info({"title": None})]
    publish(q, s, enc(meta=None))
    assert drain(q) == [info({"_meta": None})]


def test_known_state_folds_the_rfd_rule() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1, "b": {"x": 1}}))
    publish(q, s, enc(meta={"b": {"y": 2}, "c": None, "d": [1, None]}))
    publish(q, s, enc(meta={"a": None}))
    snap = s.snapshot()
    assert snap.meta == {"b": {"y": 2}, "d": [1, None]}
    assert snap.title is OMITTED
    assert snap.updated_at is OMITTED
    publish(q, s, enc(meta=None))
    assert s.snapshot().meta is None


def test_encoded_values_are_json_copies() -> None:
    value: dict[str, Any] = {"list": [1, 2]}
    update = enc(meta={"k": value})
    value["list"].append(3)
    value["new"] = True
    q = make_queue()
    s = opened(q)
    publish(q, s, update)
    assert s.snapshot().meta == {"k": {"list": [1, 2]}}
    assert drain(q) == [info({"_meta": {"k": {"list": [1, 2]}}})]


def test_snapshot_is_a_fresh_copy() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"k": {"v": 1}}))
    snap = s.snapshot()
    assert snap.meta is not None
    inner = snap.meta["k"]
    assert isinstance(inner, dict)
    inner["v"] = 2
    assert s.snapshot().meta == {"k": {"v": 1}}


# -- coalescing normal form (R3) ------------------------------------------------------------


def test_queued_patches_merge_into_one_frame() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1, "b": 1}))
    publish(q, s, enc(title="x", meta={"b": 2}))
    publish(q, s, enc(meta={"c": 3}))
    assert q.statistics().coalesced == 2
    assert q.queued_frames == 1
    assert drain(q) == [info({"title": "x", "_meta": {"a": 1, "b": 2, "c": 3}})]


def test_merged_removals_are_kept() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"a": None, "never-seen": None}))
    assert drain(q) == [info({"_meta": {"a": None, "never-seen": None}})]
    assert s.snapshot().meta is None


def test_clear_then_object_stays_two_frames() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(title="t", meta=None))
    publish(q, s, enc(meta={"b": 2}))
    publish(q, s, enc(meta={"c": None}))
    assert q.queued_frames == 2
    assert drain(q) == [
        info({"title": "t", "_meta": None}),
        info({"_meta": {"b": 2, "c": None}}),
    ]
    assert s.snapshot().meta == {"b": 2}


def test_object_then_clear_collapses_to_the_clear() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta=None))
    assert drain(q) == [info({"_meta": None})]


def test_notification_meta_frame_is_never_merged_and_is_a_barrier() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"b": 1}, notification_meta={"traceparent": "00-1"}))
    publish(q, s, enc(meta={"c": 1}))
    publish(q, s, enc(meta={"d": 1}, notification_meta={"traceparent": "00-2"}))
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": {"b": 1}}, nmeta={"traceparent": "00-1"}),
        info({"_meta": {"c": 1}}),
        info({"_meta": {"d": 1}}, nmeta={"traceparent": "00-2"}),
    ]
    assert q.statistics().coalesced == 0


def test_entry_in_flight_is_not_merged_into() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    first = take(q)
    publish(q, s, enc(meta={"a": 2}))
    q.written()
    assert parse(first) == info({"_meta": {"a": 1}})
    assert drain(q) == [info({"_meta": {"a": 2}})]


def test_sessions_are_merged_separately() -> None:
    q = make_queue()
    s1 = opened(q, "s1")
    s2 = opened(q, "s2")
    publish(q, s1, enc(meta={"a": 1}))
    publish(q, s2, enc(meta={"a": 2}))
    publish(q, s1, enc(meta={"b": 1}))
    assert drain(q) == [
        info({"_meta": {"a": 1, "b": 1}}, sid="s1"),
        info({"_meta": {"a": 2}}, sid="s2"),
    ]


def test_coalesce_off_every_update_is_its_own_frame() -> None:
    q = make_queue(coalesce=False)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"a": 2}))
    assert drain(q) == [info({"_meta": {"a": 1}}), info({"_meta": {"a": 2}})]


def test_coalesce_off_on_v1_every_update_is_its_own_whole_object() -> None:
    """Behind a busy writer, v1 with coalescing off still writes one frame per publication,
    each the whole object as it was after that publication (issue 30: a v1 frame rendered at
    write time used to carry the newest object and silence every entry behind it)."""
    q = make_queue(coalesce=False, protocol_version=1)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"a": 2}))
    publish(q, s, enc(meta={"b": 3, "a": None}))
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": {"a": 2}}),
        info({"_meta": {"b": 3}}),
    ]
    publish(q, s, enc(meta={"c": 4}))
    assert q.resync(s) is Outcome.ACCEPTED
    publish(q, s, enc(meta={"d": 5}))
    # The resync's object is rendered when written and carries d: the frame queued for d
    # behind it would take the client back, so it sends nothing.
    assert drain(q) == [
        info({"_meta": {"b": 3, "c": 4}}),
        info({"_meta": {"b": 3, "c": 4, "d": 5}}),
    ]


# -- resync (R4) ------------------------------------------------------------------------------


def test_resync_is_clear_then_snapshot() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title="T", meta={"a": 1}))
    drain(q)
    assert q.resync(s) is Outcome.ACCEPTED
    assert drain(q) == [info({"_meta": None}), info({"title": "T", "_meta": {"a": 1}})]
    assert q.statistics().resyncs == 1


def test_resync_snapshot_is_rendered_at_write_time() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    publish(q, s, enc(meta={"a": 2, "b": None}))
    clear = take(q)
    publish(q, s, enc(meta={"c": 3}))  # after the clear was taken, before the snapshot
    q.written()
    assert parse(clear) == info({"_meta": None})
    # The snapshot carries both later publications; their own entry sends nothing more.
    assert drain(q) == [info({"_meta": {"a": 2, "c": 3}})]
    assert q.statistics().frames_written == 3  # {a: 1}, the clear, the snapshot


def test_pending_resyncs_are_deduplicated() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    q.resync(s)
    q.resync(s)
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]


def test_resync_of_an_empty_state_is_the_clear_only() -> None:
    q = make_queue()
    s = opened(q)
    q.resync(s)
    assert drain(q) == [info({"_meta": None})]


def test_resync_snapshot_omits_unknown_title() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    q.resync(s)
    frames = drain(q)
    assert frames[-1] == info({"_meta": {"a": 1}})
    assert "title" not in frames[-1]["params"]["update"]
    assert "updatedAt" not in frames[-1]["params"]["update"]


def test_resync_restores_a_known_null_title() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title=None))
    q.resync(s)
    assert drain(q)[-2:] == [info({"_meta": None}), info({"title": None})]


def test_publication_after_resync_is_not_merged_before_it() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    q.resync(s)
    q.submit_raw(raw_frame(7))
    publish(q, s, enc(meta={"b": 2}))
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": None}),
        info({"_meta": {"a": 1, "b": 2}}),  # the snapshot carries the publication behind it
        {"jsonrpc": "2.0", "id": 7, "result": {}},
    ]


def test_seed_is_known_but_not_sent() -> None:
    q = make_queue()
    s = q.open_lifetime(SID, enc(title="seeded", meta={"thread": {"status": "idle"}}))
    assert next_frame(q) is None
    assert s.snapshot().meta == {"thread": {"status": "idle"}}
    q.resync(s)
    assert drain(q) == [
        info({"_meta": None}),
        info({"title": "seeded", "_meta": {"thread": {"status": "idle"}}}),
    ]


# -- lifetimes and fencing (R5, R6) -----------------------------------------------------------


def test_reopening_a_live_lifetime_raises() -> None:
    q = make_queue()
    opened(q)
    with pytest.raises(SessionExistsError):
        opened(q)


def session_frame(sid: str = SID) -> bytes:
    """A notification of session ``sid`` that is no ``session_info_update`` (a message chunk)."""
    return b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s"}}\n' % (
        sid.encode()
    )


def test_close_writes_what_was_queued_before_it_and_fences_what_comes_after() -> None:
    """Issue 33, item 4: fencing begins at the close. The publication, the resync and the
    response queued before it go out in order (R2, R4); every call after it is refused and
    counted, and nothing of the session is written after the response queued after it."""
    q = make_queue()
    s = opened(q)
    other = opened(q, "other")
    publish(q, s, enc(meta={"a": 1}))
    publish(q, other, enc(meta={"o": 1}))
    q.resync(s)
    q.submit_raw(session_frame())
    q.submit_raw(raw_frame(1))
    q.close_lifetime(s)
    q.submit_raw(raw_frame(2))  # the session/close response, queued after the close
    assert s.books.closed
    assert not publish(q, s, enc(meta={"late": 1}))
    assert q.resync(s) is Outcome.FENCED
    assert q.seed(s, enc(title="late")) is Outcome.FENCED
    assert q.submit_raw(session_frame(), SID) is Outcome.FENCED
    assert q.statistics().fenced == 4  # the four calls after the close; no frame dropped
    assert drain(q) == [
        info({"_meta": {"a": 1}}),
        info({"_meta": {"o": 1}}, sid="other"),
        info({"_meta": None}),
        info({"_meta": {"a": 1}}),  # the snapshot at write time: the state at the close
        parse(session_frame()),
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]
    assert q.statistics().fenced == 4
    assert q.is_flushed(q.flush_target())


def test_close_writes_a_merged_publication_still_open_to_merges() -> None:
    """A pending merged frame queued before the close (R3) is written whole, and takes no
    publication after the close."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"b": 2}, title="t"))  # merged into the entry above
    assert q.queued_entries == 1
    q.close_lifetime(s)
    assert not publish(q, s, enc(meta={"c": 3}))
    assert drain(q) == [info({"title": "t", "_meta": {"a": 1, "b": 2}})]
    assert q.statistics().coalesced == 1


@pytest.mark.parametrize("mode", [(1, "merged"), (1, "passthrough")])
def test_close_under_v1_writes_what_was_queued_as_v1_renders_it(
    mode: tuple[Literal[1, 2], V1MetaMode],
) -> None:
    """v1 (R10): the queued frames of a closed lifetime are rendered as v1 renders them: the
    whole merged object (the state at the close), or the patch as published."""
    version, v1_meta_mode = mode
    q = make_queue(protocol_version=version, v1_meta_mode=v1_meta_mode)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    drain(q)
    publish(q, s, enc(meta={"b": 2}))
    q.resync(s)
    q.close_lifetime(s)
    assert not publish(q, s, enc(meta={"c": 3}))
    if v1_meta_mode == "merged":
        whole = info({"_meta": {"a": 1, "b": 2}})
        assert drain(q) == [whole, whole]  # the publication, then the resync: whole objects
    else:
        assert drain(q) == [info({"_meta": {"b": 2}})]  # pass-through sends no resync


def test_close_finishes_the_second_frame_of_clear_then_object() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta=None))
    publish(q, s, enc(meta={"b": 1}))
    assert parse(take(q)) == info({"_meta": None})
    q.close_lifetime(s)
    q.written()
    assert drain(q) == [info({"_meta": {"b": 1}})]
    assert next_frame(q) is None


def test_reopened_lifetime_starts_fresh() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title="old", meta={"old": 1}))
    q.close_lifetime(s)
    fresh = opened(q)
    assert fresh is not s
    assert fresh.is_empty()
    q.resync(fresh)
    assert drain(q) == [info({"title": "old", "_meta": {"old": 1}}), info({"_meta": None})]
    assert not publish(q, s, enc(meta={"x": 1}))
    assert fresh.snapshot().meta is None


# -- write outcomes (R11) ----------------------------------------------------------------------


def test_lost_frame_is_repaired_by_a_resync() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    take(q)
    q.lost()
    assert s.books.needs_repair
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]
    assert q.statistics().write_failures == 1
    assert q.statistics().repairs == 1
    assert not s.books.needs_repair


def test_repair_precedes_the_lifetimes_next_frame() -> None:
    q = make_queue()
    s = opened(q)
    other = opened(q, "other")
    publish(q, s, enc(meta={"a": 1}))
    take(q)
    publish(q, other, enc(meta={"o": 1}))
    publish(q, s, enc(meta={"b": 2}))
    q.lost()
    assert drain(q) == [
        info({"_meta": {"o": 1}}, sid="other"),
        info({"_meta": None}),
        info({"_meta": {"a": 1, "b": 2}}),  # the repair's snapshot carries {"b": 2}
    ]
    assert q.statistics().repairs == 1


def test_lost_first_frame_of_a_resync_drops_the_rest_and_repairs() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    take(q)
    q.lost()
    assert drain(q) == [info({"_meta": None}), info({"_meta": {"a": 1}})]


def test_a_repair_owed_at_the_close_is_written_before_what_follows_the_close() -> None:
    """A frame lost before the close owes its lifetime a repair (R11): queued before the close,
    it is written in its place, ahead of the close response (R2, R6)."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    take(q)
    q.lost()
    q.close_lifetime(s)
    q.submit_raw(raw_frame(4))
    assert drain(q) == [
        info({"_meta": None}),
        info({"_meta": {"a": 1}}),
        {"jsonrpc": "2.0", "id": 4, "result": {}},
    ]
    assert q.statistics().repairs == 1
    assert q.is_flushed(q.flush_target())


def test_a_frame_lost_after_the_close_is_not_repaired() -> None:
    """After the close nothing new of the lifetime is queued, a repair included (R6): the rest
    of the lost frame's entry is dropped, the frames queued before the close still go out,
    and the queue flushes (no repair is left pending)."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta=None))
    publish(q, s, enc(meta={"a": 1}))  # merged: one entry of two frames, clear then object
    publish(q, s, enc(meta={"b": 2}, notification_meta={"t": 1}))  # an entry of its own (R9)
    q.close_lifetime(s)
    q.submit_raw(raw_frame(5))
    assert parse(take(q)) == info({"_meta": None})
    assert q.lost() == SID
    assert drain(q) == [
        info({"_meta": {"b": 2}}, nmeta={"t": 1}),
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    ]
    c = q.statistics()
    assert (c.write_failures, c.repairs, c.resyncs, c.fenced) == (1, 0, 0, 0)
    assert q.is_flushed(q.flush_target())


def test_a_repair_lost_after_the_close_is_given_up() -> None:
    """The owed repair's own clear lost after the close: no second repair, and nothing is left
    pending that would keep the queue from flushing."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    take(q)
    q.lost()
    q.close_lifetime(s)
    assert parse(take(q)) == info({"_meta": None})  # the repair's clear
    q.lost()
    assert drain(q) == []
    assert q.statistics().repairs == 1
    assert q.is_flushed(q.flush_target())


def test_lost_raw_frame_is_only_counted() -> None:
    q = make_queue()
    s = opened(q)
    q.submit_raw(raw_frame(3))
    take(q)
    q.lost()
    assert q.statistics().write_failures == 1
    assert not s.books.needs_repair
    assert next_frame(q) is None


def test_written_frames_are_counted() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    out = take(q)
    q.written()
    assert q.statistics().frames_written == 1
    assert q.statistics().bytes_written == len(out)


# -- capacity (R3) ---------------------------------------------------------------------------


def test_raw_frames_count_against_capacity() -> None:
    q = make_queue(capacity=2)
    opened(q)
    assert q.has_room()
    q.submit_raw(raw_frame(1))
    q.submit_raw(raw_frame(2))
    assert not q.has_room()
    take(q)
    q.written()
    assert q.has_room()


def test_merged_publications_and_resyncs_never_need_room() -> None:
    q = make_queue(capacity=1)
    s = opened(q)
    assert q.submit_raw(raw_frame(1)) is Outcome.ACCEPTED
    assert not q.has_room()
    assert q.submit_raw(raw_frame(2)) is Outcome.FULL
    for i in range(100):
        assert publish(q, s, enc(meta={"a": i}))
        q.resync(s)
    assert q.queued_entries <= 4


def test_a_publication_that_needs_room_is_full_and_changes_nothing() -> None:
    q = make_queue(capacity=1)
    s = opened(q)
    q.submit_raw(raw_frame(1))
    traced = enc(meta={"a": 1}, notification_meta={"t": 1})
    assert q.submit(s, traced) is Outcome.FULL
    assert s.snapshot().meta is None
    assert q.statistics().publications == 0
    off = make_queue(coalesce=False, capacity=1)
    s_off = opened(off)
    assert off.submit(s_off, enc(meta={"a": 1})) is Outcome.ACCEPTED
    assert off.submit(s_off, enc(meta={"a": 2})) is Outcome.FULL
    assert s_off.snapshot().meta == {"a": 1}
    take(off)
    off.written()
    assert off.submit(s_off, enc(meta={"a": 2})) is Outcome.ACCEPTED


def test_merge_that_would_overflow_the_frame_needs_room() -> None:
    q = make_queue(max_frame_bytes=2000, capacity=1)
    s = opened(q)
    q.submit_raw(raw_frame(1))  # takes the only room
    publish(q, s, enc(meta={"a": "x" * 500}))  # the open entry: mergeable, so no room needed
    assert q.submit(s, enc(meta={"b": "y" * 100})) is Outcome.ACCEPTED  # merged
    assert q.submit(s, enc(meta={"b": "y" * 600})) is Outcome.FULL


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        make_queue(capacity=0)


# -- protocol v1 (R10) -----------------------------------------------------------------------


def test_v1_merged_sends_the_complete_object_on_every_frame() -> None:
    q = make_queue(protocol_version=1)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}, offset_timestamps=False))
    assert drain(q) == [info({"_meta": {"a": 1}})]
    publish(q, s, enc(meta={"b": 2}, offset_timestamps=False))
    assert drain(q) == [info({"_meta": {"a": 1, "b": 2}})]
    publish(q, s, enc(meta={"a": None, "b": None}, offset_timestamps=False))
    assert drain(q) == [info({"_meta": {}})]
    publish(q, s, enc(meta=None, offset_timestamps=False))
    assert drain(q) == [info({"_meta": {}})]


def test_v1_merged_title_only_frame_carries_the_whole_object() -> None:
    q = make_queue(protocol_version=1)
    s = opened(q)
    publish(q, s, enc(title="t", offset_timestamps=False))
    assert drain(q) == [info({"title": "t", "_meta": {}})]
    publish(q, s, enc(meta={"a": 1}, offset_timestamps=False))
    drain(q)
    publish(q, s, enc(title="u", offset_timestamps=False))
    assert drain(q) == [info({"title": "u", "_meta": {"a": 1}})]


def test_v1_merged_clear_then_object_is_one_frame() -> None:
    q = make_queue(protocol_version=1)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}, offset_timestamps=False))
    publish(q, s, enc(meta=None, offset_timestamps=False))
    publish(q, s, enc(meta={"b": 2}, offset_timestamps=False))
    assert drain(q) == [info({"_meta": {"b": 2}})]


def test_v1_merged_resync_is_one_complete_frame() -> None:
    q = make_queue(protocol_version=1)
    s = opened(q)
    q.resync(s)
    assert drain(q) == [info({"_meta": {}})]
    publish(q, s, enc(title="t", meta={"a": 1}, offset_timestamps=False))
    drain(q)
    q.resync(s)
    assert drain(q) == [info({"title": "t", "_meta": {"a": 1}})]


def test_v1_passthrough_sends_patches_as_published_without_resync() -> None:
    q = make_queue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}, offset_timestamps=False))
    publish(q, s, enc(meta={"b": None}, offset_timestamps=False))
    q.resync(s)
    assert drain(q) == [info({"_meta": {"a": 1}}), info({"_meta": {"b": None}})]
    assert q.statistics().coalesced == 0
    assert s.snapshot().meta == {"a": 1}


def test_v1_passthrough_lost_frame_queues_no_repair() -> None:
    q = make_queue(protocol_version=1, v1_meta_mode="passthrough")
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}, offset_timestamps=False))
    take(q)
    q.lost()
    assert next_frame(q) is None


# -- bad input and limits (R12) ---------------------------------------------------------------


class _Key:
    """A dict key that is no string; its repr is fixed, so the test id is the same in every
    process (pytest-xdist's workers must collect the same tests)."""

    def __repr__(self) -> str:
        return "_Key()"


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
    update = enc(updated_at="2025-01-01T00:00:00", offset_timestamps=False)
    assert update.updated_at == '"2025-01-01T00:00:00"'


def test_oversized_publication_raises_before_anything_changes() -> None:
    q = make_queue(max_frame_bytes=1000)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    with pytest.raises(FrameTooLargeError):
        publish(q, s, enc(meta={"big": "x" * 2000}))
    assert s.snapshot().meta == {"a": 1}
    assert q.statistics().publications == 1
    assert drain(q) == [info({"_meta": {"a": 1}})]


def test_growing_state_past_the_limit_raises() -> None:
    q = make_queue(max_frame_bytes=1000)
    s = opened(q)
    for i in range(3):
        publish(q, s, enc(meta={f"k{i}": "x" * 250}))
    with pytest.raises(FrameTooLargeError):
        publish(q, s, enc(meta={"k9": "x" * 250}))
    assert sorted(s.snapshot().meta or {}) == ["k0", "k1", "k2"]


def test_oversized_seed_and_raw_frames_raise() -> None:
    q = make_queue(max_frame_bytes=500)
    with pytest.raises(FrameTooLargeError):
        q.open_lifetime(SID, enc(meta={"a": "x" * 1000}))
    assert SID not in q.lifetimes.sessions
    with pytest.raises(FrameTooLargeError):
        q.submit_raw(b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 1000 + b'"}\n')
    assert next_frame(q) is None


def test_removal_of_an_escaped_key_respects_the_frame_limit() -> None:
    q = make_queue(max_frame_bytes=1000)
    s = opened(q)
    key = "\x01" * 400
    try:
        publish(q, s, enc(meta={key: None}))
    except FrameTooLargeError:
        return
    out = take(q)
    assert len(out) <= 1000


# -- flushing ----------------------------------------------------------------------------------


def test_is_flushed_once_everything_up_to_the_target_is_written() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    q.submit_raw(raw_frame(1))
    target = q.flush_target()
    assert not q.is_flushed(target)
    take(q)
    q.written()
    take(q)
    assert not q.is_flushed(target)
    q.written()
    assert next_frame(q) is None
    assert q.is_flushed(target)


def test_merge_does_not_flush_frames_queued_after_the_merged_entry() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"x": 0}))
    take(q)
    publish(q, s, enc(meta={"a": 1}))
    q.submit_raw(raw_frame(1))
    publish(q, s, enc(meta={"a": 2}))  # merged into the entry before the response
    target = q.flush_target()
    q.written()
    take(q)
    q.written()
    response = take(q)
    assert parse(response) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert not q.is_flushed(target)  # the response is not written yet


# -- the writer protocol: one frame at a time, held frames, persist before write (R2, R11) ---


def test_a_frame_handed_out_must_be_reported_before_the_next() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta=None))
    publish(q, s, enc(meta={"b": 1}))  # merged: a clear, then the object (two frames)
    take(q)
    with pytest.raises(RuntimeError, match="report the frame handed out"):
        q.next_action()
    q.lost()
    assert take(q)  # the repair resync, rendered only now


def test_close_lets_a_resync_in_flight_finish_with_the_state_at_the_close() -> None:
    """A resync requested before the close and in flight when it comes (its clear being
    written) still sends its snapshot, rendered at write time: the state at the close, which
    no call after the close changes (R4, R6)."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    drain(q)
    q.resync(s)
    clear = take(q)
    assert parse(clear) == info({"_meta": None})
    publish(q, s, enc(meta={"b": 2}))  # before the close: carried by the snapshot
    q.close_lifetime(s)
    assert not publish(q, s, enc(meta={"late": 1}))  # after it: refused
    assert not q.is_flushed(q.flush_target())
    q.written()
    assert drain(q) == [info({"_meta": {"a": 1, "b": 2}})]
    assert q.is_flushed(q.flush_target())
    assert q.statistics().fenced == 1


def test_a_held_frame_is_handed_out_again_first_and_never_cut() -> None:
    """A frame written in part (a direct write the pipe took only in part) comes back before
    anything else, and is finished even if its lifetime closes meanwhile (R2, R6)."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    out = take(q)
    q.hold(5)
    q.submit_raw(raw_frame(9))
    q.close_lifetime(s)
    assert not q.is_flushed(q.flush_target())
    assert take(q) == out[5:]  # the rest, before anything else
    q.hold(3)  # in part again
    assert take(q) == out[8:]
    q.written()
    assert parse(take(q)) == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_durable_queue_stores_before_the_frame_that_depends_on_it() -> None:
    q = make_queue(durable=True)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    batch = q.next_action()
    assert isinstance(batch, StoreBatch)
    assert [r.meta for r in batch.saves] == ['{"a":1}']
    target = q.flush_target()
    with pytest.raises(RuntimeError, match="store batch"):
        q.next_action()
    q.stored(batch)
    assert not q.is_flushed(target)  # the frame is taken, not written
    out = take(q)  # the frame taken before the batch, handed out again
    assert parse(out) == info({"_meta": {"a": 1}})
    q.written()
    assert q.next_action() is None
    assert q.is_flushed(target)
    assert q.store_batches == 1


def test_a_frame_waits_only_for_the_changes_it_was_rendered_from() -> None:
    """Publications that keep coming while a batch is stored do not hold the frame back: it
    needs the batch of the state it shows, not of every change since (else a session that
    publishes faster than the store writes would starve the wire)."""
    q = make_queue(durable=True)
    s = opened(q)
    publish(q, s, enc(meta={"n": 1}))
    first = q.next_action()
    assert isinstance(first, StoreBatch)
    publish(q, s, enc(meta={"n": 2}))  # while the first batch is being stored
    q.stored(first)
    out = take(q)
    assert parse(out) == info({"_meta": {"n": 1}})
    q.written()
    second = q.next_action()  # n=2's frame was rendered after its change: stored first
    assert isinstance(second, StoreBatch)
    assert [r.meta for r in second.saves] == ['{"n":2}']
    q.stored(second)
    assert parse(take(q)) == info({"_meta": {"n": 2}})


def test_a_frame_whose_lifetime_closed_while_stored_is_written_before_the_close() -> None:
    """A frame queued before the close, its state being stored when the close comes, is
    written once that batch is stored; the record is deleted before the frame queued after
    the close (the ``session/close`` response) is written."""
    q = make_queue(durable=True)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    batch = q.next_action()
    assert isinstance(batch, StoreBatch)
    q.close_lifetime(s)
    q.submit_raw(raw_frame(3))  # the close response
    q.stored(batch)
    assert parse(take(q)) == info({"_meta": {"a": 1}})
    q.written()
    deletes = q.next_action()  # the close is stored before the response is written
    assert isinstance(deletes, StoreBatch)
    assert deletes.deletes == [(SID, 1)]  # its first record, stored under epoch 1
    q.stored(deletes)
    assert parse(take(q)) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    q.written()
    assert q.next_action() is None
    assert q.statistics().fenced == 0
    assert q.statistics().frames_written == 2


def test_a_closed_lifetime_taken_over_drops_what_it_had_queued() -> None:
    """A takeover, unlike a close, drops what the lifetime had queued: its state was not
    stored (the other holder's epoch came first). Found on a lifetime already closed, it still
    drops its queued frame; the response queued after the close goes out."""
    q = make_queue(durable=True)
    s = opened(q)
    created = q.next_action()
    assert isinstance(created, StoreBatch)
    q.stored(created)
    publish(q, s, enc(meta={"a": 1}))
    batch = q.next_action()  # the frame is rendered, and waits for this batch
    assert isinstance(batch, StoreBatch)
    q.close_lifetime(s)
    q.submit_raw(raw_frame(6))
    assert q.stored(batch, frozenset({SID})) == [s]
    assert s.books.taken_over
    frames = []
    while (action := q.next_action()) is not None:
        if isinstance(action, StoreBatch):
            q.stored(action)
        else:
            frames.append(parse(action))
            q.written()
    assert frames == [{"jsonrpc": "2.0", "id": 6, "result": {}}]
    c = q.statistics()
    assert (c.taken_over, c.fenced, c.frames_written) == (1, 1, 1)


def test_a_change_without_a_frame_is_stored_and_flushing_waits_for_it() -> None:
    q = make_queue(durable=True)
    s = opened(q)
    created = q.next_action()  # a new lifetime is stored before anything else
    assert isinstance(created, StoreBatch)
    assert [(r.session_id, r.epoch) for r in created.saves] == [(SID, 0)]
    q.stored(created)
    assert s.books.epoch == 1
    assert q.submit(s, ResolveFailure(FailureIncident("none", 1))) is Outcome.REFUSED
    assert q.next_action() is None  # nothing changed, nothing to store
    q.submit(s, ReportFailure(FailureIncident("i", 1), {"m": 1}))
    drained = []
    while (action := q.next_action()) is not None:
        if isinstance(action, StoreBatch):
            drained.append(action)
            q.stored(action)
        else:
            q.written()
    target = q.flush_target()
    assert q.is_flushed(target)
    # resolving clears the record (a frame) and the incident: both stored
    q.submit(s, ResolveFailure(FailureIncident("i", 1)))
    target = q.flush_target()
    assert not q.is_flushed(target)
    batch = q.next_action()
    assert isinstance(batch, StoreBatch)
    assert batch.saves[0].failure is None
    q.stored(batch)
    take(q)
    q.written()
    assert q.next_action() is None  # the writer asks again: the entry is finished
    assert q.is_flushed(target)


def test_a_batch_reported_twice_is_refused() -> None:
    q = make_queue(durable=True)
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    batch = q.next_action()
    assert isinstance(batch, StoreBatch)
    q.stored(batch)
    with pytest.raises(RuntimeError, match="not handed out"):
        q.stored(batch)


# -- failure incidents (R7) -------------------------------------------------------------------


def incident(incident_id: str, revision: int) -> FailureIncident:
    return FailureIncident(incident_id, revision)


def failure_meta(q: SendQueue, s: LifetimeState) -> Any:
    meta: Any = s.snapshot().meta or {}
    return meta.get("agent-meta", {}).get("failure")


def test_r7_report_writes_the_record_inside_its_key_keeping_siblings() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"agent-meta": {"status": "ok"}}))
    assert q.submit(s, ReportFailure(incident("i1", 1), {"m": "boom"})) is Outcome.ACCEPTED
    assert s.failure == incident("i1", 1)
    assert s.snapshot().meta == {"agent-meta": {"status": "ok", "failure": {"m": "boom"}}}
    # one shallow patch of the whole top-level value, merged with the queued publication
    assert drain(q) == [info({"_meta": {"agent-meta": {"status": "ok", "failure": {"m": "boom"}}}})]


def test_r7_a_stale_revision_of_the_current_incident_is_refused() -> None:
    q = make_queue()
    s = opened(q)
    q.submit(s, ReportFailure(incident("i1", 2), {"rev": 2}))
    before = s.snapshot()
    assert q.submit(s, ReportFailure(incident("i1", 1), {"rev": 1})) is Outcome.REFUSED
    assert s.snapshot() == before
    assert s.failure == incident("i1", 2)
    # a newer revision, or another incident, replaces it
    assert q.submit(s, ReportFailure(incident("i1", 3), {"rev": 3})) is Outcome.ACCEPTED
    assert q.submit(s, ReportFailure(incident("i2", 1), {"other": 1})) is Outcome.ACCEPTED
    assert failure_meta(q, s) == {"other": 1}


@pytest.mark.parametrize(
    ("resolved", "outcome"),
    [
        (("i1", 2), Outcome.ACCEPTED),
        (("i1", 1), Outcome.REFUSED),  # a late resolution of an older revision
        (("i0", 2), Outcome.REFUSED),  # another incident
    ],
)
def test_r7_resolution_clears_only_when_id_and_revision_match(
    resolved: tuple[str, int], outcome: Outcome
) -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"agent-meta": {"status": "ok"}}))
    q.submit(s, ReportFailure(incident("i1", 2), {"rev": 2}))
    drain(q)
    assert q.submit(s, ResolveFailure(incident(*resolved))) is outcome
    if outcome is Outcome.ACCEPTED:
        assert s.failure is None
        assert s.snapshot().meta == {"agent-meta": {"status": "ok"}}  # sibling kept
        assert drain(q) == [info({"_meta": {"agent-meta": {"status": "ok"}}})]
    else:
        assert s.failure == incident("i1", 2)
        assert failure_meta(q, s) == {"rev": 2}
        assert drain(q) == []


def test_r7_clearing_the_last_member_removes_the_emptied_key() -> None:
    q = make_queue()
    s = opened(q)
    q.submit(s, ReportFailure(incident("i", 1), {"m": 1}))
    drain(q)
    q.submit(s, ResolveFailure(incident("i", 1)))
    assert drain(q) == [info({"_meta": {"agent-meta": None}})]
    assert s.snapshot().meta is None


def test_r7_a_top_level_failure_path_is_one_key() -> None:
    q = make_queue(failure_path=("failure",))
    s = opened(q)
    q.submit(s, ReportFailure(incident("i", 1), {"m": 1}))
    q.submit(s, ResolveFailure(incident("i", 1)))
    assert drain(q) == [info({"_meta": {"failure": None}})]


def test_r7_an_ended_lifetime_is_fenced() -> None:
    q = make_queue()
    s = opened(q)
    q.close_lifetime(s)
    assert q.submit(s, ReportFailure(incident("i", 1), {"m": 1})) is Outcome.FENCED
    assert q.submit(s, ResolveFailure(incident("i", 1))) is Outcome.FENCED
    assert q.statistics().fenced == 2


# -- domain patches (R8) ----------------------------------------------------------------------


def test_r8_domain_edits_read_the_state_at_submit_time() -> None:
    """Two writers sharing a key: each edit is computed from the state when it is applied, so
    neither loses the other's value, and the wire carries whole top-level values."""
    q = make_queue()
    s = opened(q)
    first = DomainEdit("acme", ("review", "state"), "pending")
    second = DomainEdit("acme", ("ci",), "green")
    assert q.submit(s, first) is Outcome.ACCEPTED
    assert q.submit(s, second) is Outcome.ACCEPTED
    assert s.snapshot().meta == {"acme": {"review": {"state": "pending"}, "ci": "green"}}
    assert drain(q) == [info({"_meta": {"acme": {"review": {"state": "pending"}, "ci": "green"}}})]


def test_r8_an_edit_that_waited_for_room_is_computed_afresh() -> None:
    q = make_queue(coalesce=False, capacity=1)
    s = opened(q)
    publish(q, s, enc(meta={"acme": {"a": 1}}))
    waiting = DomainEdit("acme", ("b",), 2)
    assert q.submit(s, waiting) is Outcome.FULL  # nothing changed
    assert s.snapshot().meta == {"acme": {"a": 1}}
    take(q)
    q.written()
    publish(q, s, enc(meta={"acme": {"a": 10}}))  # another writer got the room first
    take(q)
    q.written()
    assert q.submit(s, waiting) is Outcome.ACCEPTED  # submitted again: sees a=10
    assert s.snapshot().meta == {"acme": {"a": 10, "b": 2}}


def test_r8_removing_what_is_not_there_sends_nothing() -> None:
    q = make_queue()
    s = opened(q)
    assert q.submit(s, DomainEdit("acme", ("x",), OMITTED)) is Outcome.ACCEPTED
    assert q.statistics().publications == 0
    assert drain(q) == []
    publish(q, s, enc(meta={"acme": {"x": 1, "y": 2}}))
    q.submit(s, DomainEdit("acme", ("x",), OMITTED))
    q.submit(s, DomainEdit("acme", (), OMITTED))
    assert s.snapshot().meta is None
    assert drain(q) == [info({"_meta": {"acme": None}})]


def test_r8_a_step_that_is_not_an_object_raises_and_changes_nothing() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"acme": {"x": [1]}}))
    with pytest.raises(MetaPathError):
        q.submit(s, DomainEdit("acme", ("x", "y"), 1))
    assert s.snapshot().meta == {"acme": {"x": [1]}}
    assert q.statistics().publications == 1


# -- protocol versions (R10): one table -------------------------------------------------------


def test_r10_modes_come_from_one_table() -> None:
    assert wire_mode(2, "merged") is wire_mode(2, "passthrough")
    v2, merged, passthrough = (
        wire_mode(2, "merged"),
        wire_mode(1, "merged"),
        wire_mode(1, "passthrough"),
    )
    assert (v2.resync_frames, merged.resync_frames, passthrough.resync_frames) == (2, 1, 0)
    assert (v2.full_object, merged.full_object, passthrough.full_object) == (False, True, False)
    assert (v2.merges, merged.merges, passthrough.merges) == (True, True, False)
    assert (v2.repairs, merged.repairs, passthrough.repairs) == (True, True, False)
    assert v2.requires_offset_timestamps
    assert not merged.requires_offset_timestamps


def test_r10_the_version_set_at_initialize_switches_the_rendering() -> None:
    q = make_queue(protocol_version=2)
    q.set_protocol_version(1)
    s = opened(q)
    publish(q, s, q.encode(meta={"a": 1}, updated_at="yesterday"))
    publish(q, s, q.encode(meta={"a": None}))
    assert drain(q) == [info({"updatedAt": "yesterday", "_meta": {}})]


# -- express frames: a lone publication skips the entry, never the rules ----------------------


def _counters(q: SendQueue) -> tuple[int, ...]:
    c = q.statistics()
    return (c.publications, c.frames_written, c.bytes_written, c.fenced, c.coalesced)


@given(
    st.lists(st.tuples(session_info_patches(), st.booleans()), min_size=1, max_size=6),
    st.sampled_from([(2, "merged"), (1, "merged"), (1, "passthrough")]),
    st.booleans(),
)
def test_express_frames_are_the_frames_the_queue_would_write(
    steps: list[tuple[SessionInfoPatch, bool]],
    mode: tuple[Literal[1, 2], V1MetaMode],
    coalesce: bool,
) -> None:
    """Publications submitted with ``express=True`` (when the caller takes the frame at once)
    write exactly the bytes, states and counters of the same publications queued as entries,
    also when earlier ones still wait in the queue."""
    version, v1_meta_mode = mode
    queues = [
        make_queue(protocol_version=version, v1_meta_mode=v1_meta_mode, coalesce=coalesce)
        for _ in range(2)
    ]
    lifetimes = [q.open_lifetime(SID) for q in queues]
    written: list[list[bytes]] = [[], []]
    for patch, take_now in [*steps, (SessionInfoPatch(), True)]:
        for index, (q, s) in enumerate(zip(queues, lifetimes, strict=True)):
            update = q.encode(title=patch.title, updated_at=patch.updated_at, meta=patch.meta)
            express = index == 1 and take_now  # as a driver: only when it writes at once
            assert q.submit(s, update, express=express) is Outcome.ACCEPTED
            while take_now and (out := next_frame(q)) is not None:
                q.written()
                written[index].append(out)
    assert all(q.is_flushed(q.flush_target()) for q in queues)
    assert written[0] == written[1]
    assert lifetimes[0].snapshot() == lifetimes[1].snapshot()
    assert _counters(queues[0]) == _counters(queues[1])


def test_express_is_declined_whenever_something_must_go_first() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))  # queued as an entry
    assert q.submit(s, enc(meta={"b": 2}), express=True) is Outcome.ACCEPTED  # merged into it
    assert drain(q) == [info({"_meta": {"a": 1, "b": 2}})]
    # a clear with members is two frames: only the queue writes both, in order
    assert q.submit(s, enc(meta={"c": 3}), express=True) is Outcome.ACCEPTED
    q.submit(s, q.encode(meta=None), express=False)
    q.submit(s, enc(meta={"d": 4}), express=True)
    assert drain(q) == [info({"_meta": {"c": 3}}), info({"_meta": None}), info({"_meta": {"d": 4}})]


def test_an_express_frame_is_in_flight_until_reported() -> None:
    q = make_queue()
    s = opened(q)
    q.submit(s, enc(meta={"a": 1}), express=True)
    target = q.flush_target()
    assert not q.is_flushed(target)  # held, not yet taken
    out = take(q)
    assert parse(out) == info({"_meta": {"a": 1}})
    assert q.submit(s, enc(meta={"b": 2}), express=True) is Outcome.ACCEPTED  # queued behind it
    with pytest.raises(RuntimeError, match="report the frame handed out"):
        q.next_action()
    assert not q.is_flushed(target)
    q.written()
    assert q.is_flushed(target)
    assert drain(q) == [info({"_meta": {"b": 2}})]


def test_an_express_frame_of_a_closed_lifetime_is_still_written() -> None:
    q = make_queue()
    s = opened(q)
    q.submit(s, enc(meta={"a": 1}), express=True)
    q.close_lifetime(s)
    assert parse(take(q)) == info({"_meta": {"a": 1}})  # queued before the close
    q.written()
    assert next_frame(q) is None
    assert q.statistics().fenced == 0
    assert q.is_flushed(q.flush_target())


def test_entries_behind_a_snapshot_send_nothing_that_would_go_back() -> None:
    """Issue 13, point 2: with the writer busy, resync(), a=1, a=2 must not show the client
    0 -> 2 -> 1 -> 2. The snapshot carries every publication queued behind it; a frame with
    notification ``_meta`` behind it keeps its trace on an update that changes nothing."""
    q = make_queue(coalesce=False)
    s = opened(q)
    publish(q, s, enc(meta={"x": 0}))
    drain(q)
    q.resync(s)
    publish(q, s, enc(meta={"a": 1}))
    publish(q, s, enc(meta={"a": 2}, notification_meta={"trace": "t2"}))
    take(q)  # the clear
    q.written()
    snapshot = take(q)
    publish(q, s, enc(meta={"a": 3}))  # after the snapshot is rendered: a frame of its own
    q.written()
    assert parse(snapshot) == info({"_meta": {"x": 0, "a": 2}})
    assert drain(q) == [info({}, nmeta={"trace": "t2"}), info({"_meta": {"a": 3}})]
    assert s.snapshot().meta == {"x": 0, "a": 3}


def test_an_open_entry_behind_a_snapshot_takes_no_later_publication() -> None:
    q = make_queue()
    s = opened(q)
    q.resync(s)
    publish(q, s, enc(meta={"a": 1}))  # the open entry, behind the resync
    take(q)  # the clear
    q.written()
    snapshot = take(q)  # rendered now: carries a=1
    publish(q, s, enc(meta={"b": 2}))  # must not merge into the absorbed entry
    q.written()
    assert parse(snapshot) == info({"_meta": {"a": 1}})
    assert drain(q) == [info({"_meta": {"b": 2}})]


def test_v1_frames_are_snapshots_of_the_whole_known_state() -> None:
    """A v1 (merged) frame carries a whole state the agent held, title included, so no frame
    pairs an old title with newer metadata: with coalescing on, the state when it is written."""
    q = make_queue(protocol_version=1)
    s = opened(q)
    publish(q, s, enc(title="T1", meta={"a": 1}, offset_timestamps=False))
    publish(q, s, enc(title="T2", meta={"a": 2}, offset_timestamps=False))
    assert drain(q) == [info({"title": "T2", "_meta": {"a": 2}})]


def test_without_coalescing_each_v1_frame_is_the_state_after_its_publication() -> None:
    """Without coalescing every publication is its own frame on v1 too: the whole state as it
    was after that publication (title included), however far behind the writer is; nothing
    is counted as coalesced."""
    q = make_queue(protocol_version=1, coalesce=False)
    s = opened(q)
    publish(q, s, enc(title="T1", meta={"n": 1}, offset_timestamps=False))
    for n in range(2, 4):
        publish(q, s, enc(meta={"n": n}))
    assert drain(q) == [
        info({"title": "T1", "_meta": {"n": 1}}),
        info({"title": "T1", "_meta": {"n": 2}}),
        info({"title": "T1", "_meta": {"n": 3}}),
    ]
    assert (q.statistics().publications, q.statistics().coalesced) == (3, 0)
    assert q.statistics().frames_written == 3
