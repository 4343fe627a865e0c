"""The parts of the send queue, each on its own, synchronously: the lifetime registry and its
fence, the flush cursor, the entry FIFO, what the writer is in the middle of, the renderer,
the publisher and the store bookkeeping's epoch rules.

``test_sendqueue.py`` tests the queue as a whole; these pin each part's own contract. No part
holds another, so each is built here alone, with plain entries and lifetime states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agent_meta import SessionExistsError
from agent_meta.sansio._encode import encode_update
from agent_meta.sansio._modes import wire_mode
from agent_meta.sansio.queue._cursor import FlushCursor
from agent_meta.sansio.queue._durability import FIRST_EPOCH, claim_again, still_held
from agent_meta.sansio.queue._entries import InfoEntry, RawEntry, ResyncEntry
from agent_meta.sansio.queue._fifo import EntryFifo
from agent_meta.sansio.queue._publish import Publisher
from agent_meta.sansio.queue._records import StoredLifetime
from agent_meta.sansio.queue._registry import ENDED_IDS, LifetimeRegistry
from agent_meta.sansio.queue._render import FrameRenderer
from agent_meta.sansio.queue._state import LifetimeState
from agent_meta.sansio.queue._writing import Writing

if TYPE_CHECKING:
    from agent_meta.sansio._encode import EncodedUpdate

# -- LifetimeRegistry (R5, R6) -------------------------------------------------------------


def test_a_registry_opens_one_lifetime_per_session() -> None:
    registry = LifetimeRegistry()
    state = registry.new("s")
    assert "s" not in registry.sessions  # not registered until added
    registry.add(state)
    assert registry.sessions == {"s": state}
    with pytest.raises(SessionExistsError):
        registry.new("s")
    with pytest.raises(SessionExistsError):
        registry.add(state)


def test_an_ended_lifetime_is_fenced_until_its_session_reopens() -> None:
    registry = LifetimeRegistry()
    state = registry.new("s")
    registry.add(state)
    assert registry.end(state) is True
    assert state.books.closed
    assert registry.end(state) is False  # once
    assert "s" not in registry.sessions
    assert registry.fenced("s")
    registry.add(registry.new("s"))
    assert not registry.fenced("s")


def test_the_fence_forgets_the_oldest_ended_ids_first() -> None:
    registry = LifetimeRegistry()
    for n in range(ENDED_IDS + 1):
        state = registry.new(f"s{n}")
        registry.add(state)
        registry.end(state)
    assert not registry.fenced("s0")
    assert registry.fenced("s1")
    assert registry.fenced(f"s{ENDED_IDS}")


# -- FlushCursor ---------------------------------------------------------------------------


def test_the_cursor_counts_positions_and_what_is_finished() -> None:
    cursor = FlushCursor()
    assert (cursor.append(), cursor.append(), cursor.append()) == (1, 2, 3)
    assert not cursor.reached(2, queue_empty=False)
    cursor.finish(2, queue_empty=False)
    assert cursor.reached(2, queue_empty=False)
    assert not cursor.reached(3, queue_empty=False)
    cursor.finish(1, queue_empty=False)  # an older position never moves it back
    assert cursor.finished == 2
    cursor.finish(0, queue_empty=True)  # nothing left: everything appended is finished
    assert cursor.finished == 3


def test_the_cursor_counts_a_position_as_reached_once_nothing_is_queued() -> None:
    cursor = FlushCursor()
    cursor.append()
    assert not cursor.reached(1, queue_empty=False)
    assert cursor.reached(1, queue_empty=True)  # dropped entries leave nothing to wait for


# -- EntryFifo ------------------------------------------------------------------------------


def lifetime(session_id: str = "s") -> LifetimeState:
    return LifetimeState(session_id)


def publication(state: LifetimeState, counted: bool = False, **fields: Any) -> InfoEntry:
    return InfoEntry(state, encode_update(**fields), counted=counted)


def test_the_fifo_counts_capacity_frames_and_the_peak() -> None:
    fifo = EntryFifo()
    entry = publication(lifetime(), meta={"a": 1})
    fifo.append(entry)
    raw = RawEntry(b"{}\n")
    fifo.append(raw)
    assert (len(fifo), fifo.counted, fifo.frames, fifo.peak_frames) == (2, 1, 2, 2)
    assert fifo.take() is entry
    assert (fifo.counted, fifo.frames, fifo.peak_frames) == (1, 1, 2)
    fifo.count_frames(+2)  # a merge added a frame to a queued entry, say
    assert (fifo.frames, fifo.peak_frames) == (3, 3)


def test_the_fifo_drops_every_entry_of_an_ended_lifetime() -> None:
    fifo = EntryFifo()
    ended, other = lifetime("a"), lifetime("b")
    for state in (ended, other, ended):
        fifo.append(publication(state, counted=True, meta={"k": 1}))
    assert fifo.drop_lifetime(ended) == 2
    assert [entry.lifetime for entry in fifo] == [other]
    assert (fifo.counted, fifo.frames) == (1, 1)


# -- Writing ---------------------------------------------------------------------------------


def test_writing_hands_out_one_frame_at_a_time() -> None:
    writing = Writing()
    entry = RawEntry(b"x\n")
    assert writing.idle
    writing.begin(entry, iter([b"one\n", b"two\n"]))
    assert writing.next_frame(stored_by=3)
    assert (writing.frame, writing.stored_by, writing.lifetime) == (b"one\n", 3, None)
    assert writing.hand_out() == b"one\n"
    assert writing.out
    with pytest.raises(RuntimeError, match="report the frame"):
        writing.next_frame(stored_by=0)  # the frame out is not reported yet
    writing.release()
    assert writing.next_frame(stored_by=0)
    writing.release()
    assert not writing.next_frame(stored_by=0)  # the entry's frames are all out
    assert writing.finish() is entry
    assert writing.idle


def test_writing_hands_out_the_rest_of_a_frame_written_in_part() -> None:
    writing = Writing()
    writing.hold_express(b"0123456789\n", lifetime(), stored_by=0)
    assert not writing.idle
    assert writing.hand_out() == b"0123456789\n"
    writing.wrote_part(4)
    assert not writing.out  # held again, for the writer task to finish
    assert writing.hand_out() == b"456789\n"
    writing.wrote_part(3)
    assert writing.hand_out() == b"789\n"
    writing.release()
    assert writing.idle


def test_writing_stops_the_entry_of_a_lifetime_taken_over() -> None:
    writing = Writing()
    state = lifetime()
    entry = ResyncEntry(state, repair_only=False, frames=2)
    writing.begin(entry, iter([b"clear\n", b"snapshot\n"]))
    assert writing.next_frame(stored_by=0)
    writing.hand_out()
    assert writing.end_lifetime(state) is None  # its frame is out: finished, nothing after
    writing.release()
    assert not writing.next_frame(stored_by=0)
    assert writing.finish() is entry
    writing.begin(entry, iter([b"clear\n", b"snapshot\n"]))
    state.books.closed = True
    assert writing.next_frame(stored_by=0)  # closed: what it queued before goes out (R6)
    writing.hand_out()
    writing.release()
    state.books.taken_over = True
    assert not writing.next_frame(stored_by=0)  # nothing more of a lifetime taken over
    other = lifetime("other")
    assert writing.end_lifetime(other) is None  # not its entry
    assert writing.end_lifetime(state) is entry  # not begun: dropped, the writer is free
    assert writing.idle


# -- FrameRenderer ---------------------------------------------------------------------------


def frames_of(renderer: FrameRenderer, entry: InfoEntry | ResyncEntry) -> list[bytes]:
    return list(renderer.render(entry, renderer.repair_due(entry)))


def test_a_snapshot_carries_the_entries_queued_before_it() -> None:
    renderer = FrameRenderer(wire_mode(2, "merged"))
    state = lifetime()
    state.apply(encode_update(meta={"a": 1}))
    before = publication(state, meta={"a": 1})
    resync = frames_of(renderer, ResyncEntry(state, repair_only=False, frames=2))
    assert [b'"_meta":null' in frame for frame in resync] == [True, False]
    assert state.books.snapshots == 2  # after the clear, and with the snapshot
    assert frames_of(renderer, before) == []  # carried by the snapshot
    after = publication(state, meta={"b": 2})
    assert len(frames_of(renderer, after)) == 1
    assert (renderer.resyncs, renderer.absorbed) == (1, 1)


def test_a_resync_renders_its_snapshot_only_once_its_clear_is_out() -> None:
    renderer = FrameRenderer(wire_mode(2, "merged"))
    state = lifetime()
    frames = renderer.render(ResyncEntry(state, repair_only=False, frames=2), repair=False)
    assert b'"_meta":null' in next(frames)
    state.apply(encode_update(meta={"late": 1}))  # published while the clear was written
    assert b'"_meta":{"late":1}' in next(frames)


def test_a_repair_is_due_only_where_it_would_be_written() -> None:
    renderer = FrameRenderer(wire_mode(2, "merged"))
    state = lifetime()
    state.apply(encode_update(meta={"a": 1}))
    raw = RawEntry(b"{}\n")
    queued = publication(state, meta={"a": 1})
    repair = ResyncEntry(state, repair_only=True, frames=2)
    assert not renderer.repair_due(repair)
    assert frames_of(renderer, repair) == []  # the repair went out with an earlier entry
    state.books.needs_repair = True
    renderer.repair_pending(state)
    assert not renderer.repair_due(raw)
    assert renderer.repair_due(queued)
    frames = list(renderer.render(queued, repair=True))
    assert len(frames) == 2  # the clear, then the snapshot that carries the entry itself
    assert renderer.repairs == 1
    assert not renderer.repairing  # written: nothing pending
    renderer.repair_pending(state)
    renderer.forget(state)
    assert not renderer.repairing


# -- Publisher -------------------------------------------------------------------------------


def update(**fields: Any) -> EncodedUpdate:
    return encode_update(**fields)


def test_publications_merge_into_the_open_entry_and_need_no_room() -> None:
    publisher = Publisher(max_frame_bytes=1 << 20)
    publisher.merging = True
    state = lifetime()
    assert publisher.open_entry(state) is None
    assert not publisher.needs_room(state, update(meta={"a": 1}))  # merging: no pile-up
    entry = publication(state, meta={"a": 1})
    assert publisher.stays_open(update(meta={"a": 1}))
    state.books.open_entry = entry
    assert publisher.open_entry(state) is entry
    publisher.merge(entry, update(meta={"b": 2}))
    assert entry.patch == {"a": '"a":1', "b": '"b":2'}
    assert publisher.merged == 1


def test_a_publication_needs_room_when_it_cannot_merge() -> None:
    publisher = Publisher(max_frame_bytes=100)
    state = lifetime()
    assert publisher.needs_room(state, update(meta={"a": 1}))  # not merging
    publisher.merging = True
    traced = update(meta={"a": 1}, notification_meta={"trace": "t"})
    assert publisher.needs_room(state, traced)  # R9: never merged
    assert not publisher.stays_open(traced)
    state.books.open_entry = publication(state, meta={"big": "x" * 40})
    assert publisher.needs_room(state, update(meta={"more": "y" * 40}))  # would be too large


def test_an_entry_a_snapshot_carries_is_open_no_more() -> None:
    publisher = Publisher(max_frame_bytes=1 << 20)
    publisher.merging = True
    state = lifetime()
    state.books.open_entry = publication(state, meta={"a": 1})
    FrameRenderer(wire_mode(2, "merged")).absorb(state)
    assert publisher.open_entry(state) is None  # its publications are in the snapshot


# -- the fencing epochs of a claim -------------------------------------------------------------


def test_a_claim_by_the_holder_leaves_its_lifetime_held() -> None:
    state = lifetime()
    assert still_held(state, None)  # not stored yet: nothing to take over
    assert still_held(state, StoredLifetime("s", epoch=FIRST_EPOCH))  # stored as it claimed
    assert not claim_again(state, None)
    state.books.epoch = 3
    assert still_held(state, StoredLifetime("s", epoch=3))
    assert not still_held(state, StoredLifetime("s", epoch=4))  # another holder's since
    assert not still_held(state, None)
    assert claim_again(state, None)  # stored, yet the claim read nothing: it read too early
