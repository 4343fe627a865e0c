"""The parts of the send queue, each on its own, synchronously: the lifetime registry and its
fence, the flush cursor, the entry FIFO, what the writer is in the middle of, the publisher.

``test_sendqueue.py`` tests the queue as a whole; these pin each part's own contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from agent_meta import SessionExistsError
from agent_meta.sansio._cursor import FlushCursor
from agent_meta.sansio._durability import Durability
from agent_meta.sansio._edits import Outcome
from agent_meta.sansio._encode import encode_update
from agent_meta.sansio._entries import InfoEntry, QueueCounters, RawEntry
from agent_meta.sansio._fifo import EntryFifo
from agent_meta.sansio._modes import wire_mode
from agent_meta.sansio._publish import Publisher
from agent_meta.sansio._registry import ENDED_IDS, LifetimeRegistry
from agent_meta.sansio._render import FrameRenderer
from agent_meta.sansio._writing import Writing

if TYPE_CHECKING:
    from agent_meta.sansio._state import LifetimeState

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
    assert state.closed
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
    assert (cursor.append(), cursor.append()) == (1, 2)
    assert not cursor.reached(2, queue_empty=False)
    cursor.finish(1, queue_empty=False)
    assert cursor.reached(1, queue_empty=False)
    assert not cursor.reached(2, queue_empty=False)
    cursor.finish(0, queue_empty=True)  # nothing left: everything appended is finished
    assert cursor.finished == 2


def test_an_express_frame_holds_its_position_until_reported() -> None:
    cursor = FlushCursor()
    cursor.append_express()
    cursor.unreported = True
    cursor.finish(0, queue_empty=True)
    assert cursor.finished == 0  # the express frame is not written yet
    cursor.reported(held=True)  # written in part: still out
    assert (cursor.finished, cursor.express) == (0, 1)
    cursor.reported(held=False)
    assert (cursor.finished, cursor.express, cursor.unreported) == (1, 0, False)


# -- EntryFifo ------------------------------------------------------------------------------


def open_entry(state: LifetimeState) -> object:
    return state.open_entry


def test_the_fifo_counts_capacity_frames_and_the_peak() -> None:
    counters = QueueCounters()
    fifo = EntryFifo(counters, FlushCursor())
    registry = LifetimeRegistry()
    state = registry.new("s")
    registry.add(state)
    entry = InfoEntry(state, encode_update(meta={"a": 1}), counted=False)
    fifo.append(entry)
    raw = RawEntry(b"{}\n")
    fifo.append(raw)
    assert (entry.pos, raw.pos) == (1, 2)
    assert (len(fifo), fifo.counted, fifo.frames, counters.peak_queued_frames) == (2, 1, 2, 2)
    state.open_entry = entry
    assert fifo.take() is entry
    assert open_entry(state) is None  # an entry the writer took takes no more merges
    assert (fifo.counted, fifo.frames, counters.peak_queued_frames) == (1, 1, 2)


def test_the_fifo_drops_every_entry_of_an_ended_lifetime() -> None:
    fifo = EntryFifo(QueueCounters(), FlushCursor())
    registry = LifetimeRegistry()
    ended, other = registry.new("a"), registry.new("b")
    for state in (ended, other, ended):
        fifo.append(InfoEntry(state, encode_update(meta={"k": 1}), counted=True))
    assert fifo.drop_lifetime(ended) == 2
    assert [entry.lifetime for entry in fifo] == [other]
    assert fifo.counted == 1


# -- Writing and Publisher -------------------------------------------------------------------


def _parts() -> tuple[EntryFifo, Writing, Publisher, LifetimeRegistry]:
    counters = QueueCounters()
    cursor = FlushCursor()
    store = Durability(enabled=False)
    renderer = FrameRenderer(wire_mode(2, "merged"), counters, cursor, store)
    fifo = EntryFifo(counters, cursor)
    writing = Writing(fifo, renderer, cursor)
    publisher = Publisher(
        fifo, writing, renderer, store, counters, capacity=1, max_frame_bytes=1 << 20
    )
    publisher.merging = True
    return fifo, writing, publisher, LifetimeRegistry()


def test_an_express_publication_is_held_for_the_writer_without_an_entry() -> None:
    fifo, writing, publisher, registry = _parts()
    state = registry.new("s")
    registry.add(state)
    assert writing.idle
    outcome = publisher.publish(state, encode_update(meta={"a": 1}), express=True)
    assert outcome is Outcome.ACCEPTED
    assert not fifo
    assert writing.held is not None
    assert b'"_meta":{"a":1}' in writing.held.frame
    assert not writing.idle


def test_publications_merge_into_the_open_entry_and_need_no_room() -> None:
    fifo, writing, publisher, registry = _parts()
    state = registry.new("s")
    registry.add(state)
    for n in range(3):
        assert publisher.publish(state, encode_update(meta={f"k{n}": n}), express=False) is (
            Outcome.ACCEPTED
        )
    assert len(fifo) == 1  # one entry, however many publications
    assert fifo.counted == 0  # a merging entry cannot pile up
    out = writing.next_frame()
    assert out is not None
    assert b'{"k0":0,"k1":1,"k2":2}' in out.frame


def test_without_merging_a_publication_needs_room() -> None:
    fifo, _, publisher, registry = _parts()
    publisher.merging = False
    state = registry.new("s")
    registry.add(state)
    assert publisher.publish(state, encode_update(meta={"a": 1}), express=False) is (
        Outcome.ACCEPTED
    )
    full = publisher.publish(state, encode_update(meta={"b": 2}), express=False)
    assert full is Outcome.FULL  # capacity 1: refused, and nothing changed
    assert len(fifo) == 1
    assert state.snapshot().meta == {"a": 1}


def test_the_writer_finishes_the_entry_of_a_lifetime_that_ends() -> None:
    fifo, writing, publisher, registry = _parts()
    state = registry.new("s")
    registry.add(state)
    publisher.publish(state, encode_update(meta=None), express=False)
    publisher.publish(state, encode_update(meta={"a": 1}), express=False)  # clear + object: 2
    first = writing.next_frame()
    assert first is not None
    assert writing.end_lifetime(state) == 0  # its frame is out: finished, nothing after
    writing.cursor.reported(held=False)
    assert writing.next_frame() is None
    assert not fifo
