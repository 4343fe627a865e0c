"""Consecutive publications of one lifetime composed before they are published
(sansio/inbound/_batch.py): whatever the stored state and the frame limit, publishing what the batch
takes accepts exactly the updates that publishing them one by one accepts, and leaves the
same state (issue 30: what is accepted must not depend on how the child's writes were read)."""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st

from agent_meta import OMITTED, FrameTooLargeError, OwnerOptions
from agent_meta.sansio._encode import EncodedUpdate, encode_update
from agent_meta.sansio.inbound._batch import Publication, PublicationBatch
from agent_meta.sansio.queue._queue import SendQueue
from agent_meta.sansio.queue._state import LifetimeState, headroom

LIMIT = 600
"""A frame limit small enough for a few updates to reach it."""

_values = st.one_of(
    st.sampled_from([1, "x", None, {"n": None}, [None]]),
    st.integers(0, 300).map(lambda n: "v" * n),  # some of them large against the limit
)
_metas = st.one_of(
    st.just(OMITTED), st.none(), st.dictionaries(st.sampled_from("abc"), _values, max_size=3)
)
_texts = st.one_of(st.just(OMITTED), st.none(), st.sampled_from(["t1", "t2" * 40]))
_updates = st.builds(
    lambda t, u, m: encode_update(title=t, updated_at=u, meta=m, offset_timestamps=False),
    _texts,
    _texts,
    _metas,
)
_versions: st.SearchStrategy[Literal[1, 2]] = st.sampled_from([1, 2])
_seeds = st.lists(_updates, max_size=3)


def _queue(version: Literal[1, 2], seeds: list[EncodedUpdate]) -> tuple[SendQueue, LifetimeState]:
    queue = SendQueue(OwnerOptions(protocol_version=version, max_frame_bytes=LIMIT))
    state = queue.open_lifetime("s")
    for seed in seeds:
        _submit(queue, state, seed)
    return queue, state


def _submit(queue: SendQueue, state: LifetimeState, update: EncodedUpdate) -> bool:
    try:
        queue.submit(state, update)
    except FrameTooLargeError:
        return False
    return True


def _known(state: LifetimeState) -> Any:
    return state.snapshot()


@given(_versions, _seeds, st.lists(_updates, min_size=1, max_size=8))
def test_a_batch_accepts_exactly_what_one_by_one_accepts(
    version: Literal[1, 2], seeds: list[EncodedUpdate], updates: list[EncodedUpdate]
) -> None:
    alone, alone_state = _queue(version, seeds)
    refused_alone = [
        index for index, update in enumerate(updates) if not _submit(alone, alone_state, update)
    ]

    batched, batched_state = _queue(version, seeds)
    batch = PublicationBatch("s")
    lines = [str(index).encode() for index in range(len(updates))]
    for update, line in zip(updates, lines, strict=True):
        assert PublicationBatch.composable(update)
        batch.add(update, line)
    assert batch.count == len(updates)
    refused_batched = []
    counted = 0
    for publication in batch.take(headroom(batched_state, LIMIT)):
        counted += publication.count
        if not _submit(batched, batched_state, publication.update):
            assert publication.line, "a composition is never refused"
            refused_batched.append(int(publication.line))
    assert counted == len(updates)
    assert refused_batched == refused_alone
    assert _known(batched_state) == _known(alone_state)


def test_a_clear_then_an_object_stays_two_publications() -> None:
    batch = PublicationBatch("s")
    batch.add(encode_update(meta={"a": 1}), b"1")
    batch.add(encode_update(title="t", meta=None), b"2")
    batch.add(encode_update(meta={"b": 2, "c": None}), b"3")
    first, second = batch.take(LIMIT)
    assert (first.count, second.count) == (3, 0)
    assert (first.update.title, first.update.meta_clear, first.update.meta_patch) == (
        '"t"',
        True,
        None,
    )
    assert second.update.meta_patch == {"b": '"b":2', "c": None}


def test_the_update_past_the_headroom_and_every_one_after_it_go_alone() -> None:
    batch = PublicationBatch("s")
    small = encode_update(meta={"a": 1})
    big = encode_update(meta={"b": "x" * 100})
    for index, update in enumerate([small, small, big, small]):
        batch.add(update, str(index).encode())
    room = 2 * (small.patch_size) + 10  # the two small ones fit, the big one does not
    taken = batch.take(room)
    assert [p.count for p in taken] == [2, 1, 1]
    assert [p.line for p in taken] == [b"", b"2", b"3"]
    assert taken[1] == Publication(big, 1, b"2")


def test_what_a_batch_cannot_carry_is_published_on_its_own() -> None:
    with_notification_meta = encode_update(meta={"a": 1}, notification_meta={"t": 1})
    assert not PublicationBatch.composable(with_notification_meta)
    assert PublicationBatch.composable(encode_update(updated_at=None))
