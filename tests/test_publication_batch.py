"""Consecutive publications of one lifetime composed before they are published
(sansio/_batch.py): whatever the stored state, applying the batch's publications gives what
applying every update gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent_meta import OMITTED, SessionInfo, SessionInfoPatch, apply_session_info_patch
from agent_meta.sansio._batch import Publication, PublicationBatch
from agent_meta.sansio._tracker import InfoUpdate

_values = st.sampled_from([1, "x", None, {"n": None}, [None]])
_metas = st.one_of(
    st.just(OMITTED), st.none(), st.dictionaries(st.sampled_from("abc"), _values, max_size=3)
)
_texts = st.one_of(st.just(OMITTED), st.none(), st.sampled_from(["t1", "t2"]))
_updates = st.builds(
    lambda t, u, m: InfoUpdate(title=t, updated_at=u, meta=m), _texts, _texts, _metas
)
_stored = st.builds(
    lambda t, m: SessionInfo(title=t, meta=m),
    _texts,
    st.one_of(st.none(), st.dictionaries(st.sampled_from("abcd"), st.just(1), max_size=3)),
)


def _apply(info: SessionInfo, fields: Any) -> SessionInfo:
    patch = SessionInfoPatch(title=fields.title, updated_at=fields.updated_at, meta=fields.meta)
    return apply_session_info_patch(info, patch)


@given(_stored, st.lists(_updates, min_size=1, max_size=6))
def test_a_batch_means_what_its_updates_mean(
    stored: SessionInfo, updates: list[InfoUpdate]
) -> None:
    batch = PublicationBatch("s")
    for update in updates:
        assert PublicationBatch.composable(update)
        batch.add(update)
    assert batch.count == len(updates)
    taken = batch.take()
    assert 1 <= len(taken) <= 2
    expected = stored
    for update in updates:
        expected = _apply(expected, update)
    composed = stored
    for publication in taken:
        composed = _apply(composed, publication)
    assert composed == expected


def test_a_clear_then_an_object_stays_two_publications() -> None:
    batch = PublicationBatch("s")
    batch.add(InfoUpdate(meta={"a": 1}))
    batch.add(InfoUpdate(title="t", meta=None))
    batch.add(InfoUpdate(meta={"b": 2, "c": None}))
    assert batch.take() == [
        Publication(title="t", meta=None),
        Publication(meta={"b": 2, "c": None}),
    ]


def test_what_a_batch_cannot_carry_is_published_on_its_own() -> None:
    assert not PublicationBatch.composable(InfoUpdate(meta={"a": 1}, notification_meta={"t": 1}))
    assert not PublicationBatch.composable(InfoUpdate(meta=[1, 2]))
    assert not PublicationBatch.composable(InfoUpdate(title=3))
    assert PublicationBatch.composable(InfoUpdate(updated_at=None))
