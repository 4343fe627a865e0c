"""The AG-UI accumulation rule and the (lossy) conversion of AG-UI metadata to an ACP patch."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import (
    OMITTED,
    AguiConversion,
    JsonObject,
    MetaValueError,
    agui_metadata_to_meta_patch,
    apply_meta_patch,
    merge_agui_metadata,
)
from tests.strategies import json_values, meta_keys

agui_metadata = st.dictionaries(meta_keys, json_values, max_size=5)
"""AG-UI metadata: any JSON value under a key, ``null`` included (it is data)."""


def test_merge_keeps_nulls_as_data_and_does_not_recurse() -> None:
    stored = {"a": {"x": 1, "y": 2}, "b": 1}
    incoming = {"a": {"x": 3}, "b": None, "c": [None]}
    assert merge_agui_metadata(stored, incoming) == {"a": {"x": 3}, "b": None, "c": [None]}


def test_merge_first_event_and_absent_metadata() -> None:
    assert merge_agui_metadata(None, OMITTED) is None
    assert merge_agui_metadata(None, {"a": None}) == {"a": None}
    assert merge_agui_metadata(None, {}) == {}
    assert merge_agui_metadata({"a": None}, OMITTED) == {"a": None}


def test_null_metadata_object_is_rejected() -> None:
    stored = {"a": 1}
    with pytest.raises(MetaValueError) as exc_info:
        merge_agui_metadata(stored, None)
    assert exc_info.value.path == "metadata"
    assert stored == {"a": 1}


@pytest.mark.parametrize(
    ("stored", "incoming", "path"),
    [
        pytest.param({"a": 1}, {"b": [float("nan")]}, "metadata['b'][0]", id="bad-incoming"),
        pytest.param({"a": {1: 2}}, {"b": 1}, "stored['a']", id="bad-stored"),
        pytest.param({"a": 1}, [("b", 1)], "metadata", id="incoming-not-a-mapping"),
    ],
)
def test_merge_bad_input(stored: JsonObject, incoming: object, path: str) -> None:
    before = repr((stored, incoming))
    with pytest.raises(MetaValueError) as exc_info:
        merge_agui_metadata(stored, incoming)  # type: ignore[arg-type]
    assert exc_info.value.path == path
    assert repr((stored, incoming)) == before


@given(st.none() | agui_metadata, st.just(OMITTED) | agui_metadata)
def test_merge_is_last_write_wins_key_by_key(
    stored: JsonObject | None, incoming: JsonObject | object
) -> None:
    before = copy.deepcopy((stored, incoming))
    result = merge_agui_metadata(stored, incoming)  # type: ignore[arg-type]
    assert (stored, incoming) == before
    if incoming is OMITTED:
        assert result == stored
    else:
        assert isinstance(incoming, dict)
        assert result == {**(stored or {}), **incoming}
    if result is not None:
        assert result is not stored
        assert result is not incoming


@given(st.lists(agui_metadata, max_size=5))
def test_merging_events_in_order(events: list[JsonObject]) -> None:
    accumulated: JsonObject | None = None
    expected: JsonObject = {}
    for event in events:
        accumulated = merge_agui_metadata(accumulated, event)
        expected.update(event)
    assert accumulated == (expected if events else None)


def test_conversion_reports_null_keys() -> None:
    conversion = agui_metadata_to_meta_patch({"a": 1, "b": None, "c": {"x": None}, "d": None})
    assert conversion == AguiConversion(patch={"a": 1, "c": {"x": None}}, lost_null_keys=("b", "d"))


def test_conversion_rejects_a_null_metadata_object() -> None:
    with pytest.raises(MetaValueError) as exc_info:
        agui_metadata_to_meta_patch(None)  # type: ignore[arg-type]
    assert exc_info.value.path == "metadata"


@given(agui_metadata)
def test_conversion_reports_exactly_the_null_keys(metadata: JsonObject) -> None:
    before = copy.deepcopy(metadata)
    conversion = agui_metadata_to_meta_patch(metadata)
    assert metadata == before
    assert conversion.lost_null_keys == tuple(k for k, v in metadata.items() if v is None)
    assert conversion.patch == {k: v for k, v in metadata.items() if v is not None}
    assert None not in conversion.patch.values()
    # The patch applied to empty ACP state stores exactly the non-null keys.
    assert apply_meta_patch(None, conversion.patch) == (conversion.patch or None)
