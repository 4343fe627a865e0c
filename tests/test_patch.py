"""The RFD shallow-patch rule (``apply_meta_patch``/``fold_meta_patches``) and its composition.

Row-for-row conformance with the RFD table, the extra cases it names, hypothesis properties
(no mutation, no sharing, normal form, composition law over arbitrary stored states) and bad
input with exact error paths.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import (
    OMITTED,
    AgentMetaError,
    JsonObject,
    MetaPatch,
    MetaValueError,
    SessionInfo,
    SessionInfoPatch,
    apply_meta_patch,
    apply_session_info_patch,
    compose_meta_patches,
)
from agent_meta.core._json import MAX_DEPTH
from agent_meta.core._patch import fold_meta_patches
from tests.strategies import json_values, meta_keys, meta_updates, patch_objects, stored_meta


def container_ids(value: object) -> Iterator[int]:
    """Ids of every dict and list reachable from ``value`` (lists/tuples of updates included)."""
    if isinstance(value, dict):
        yield id(value)
        for item in value.values():
            yield from container_ids(item)
    elif isinstance(value, list):
        yield id(value)
        for item in value:
            yield from container_ids(item)
    elif isinstance(value, tuple):
        for item in value:
            yield from container_ids(item)


def assert_shares_nothing(result: object, *inputs: object) -> None:
    mine = set(container_ids(result))
    theirs = set(container_ids(inputs))
    assert not mine & theirs, "the result shares a mutable container with an input"


def assert_normal(result: JsonObject | None) -> None:
    """Stored metadata is ``None`` or a non-empty object without top-level ``null``."""
    if result is not None:
        assert result != {}
        assert all(value is not None for value in result.values())


# --- the RFD conformance table, row for row -----------------------------------------------

CONFORMANCE = [
    pytest.param({"a": 1, "b": 2}, OMITTED, {"a": 1, "b": 2}, id="row1-omitted-unchanged"),
    pytest.param({"a": 1, "b": 2}, None, None, id="row2-null-clears"),
    pytest.param({"a": 1, "b": 2}, {}, {"a": 1, "b": 2}, id="row3-empty-object-no-op"),
    pytest.param({"a": 1, "b": 2}, {"a": 3}, {"a": 3, "b": 2}, id="row4-key-replaced"),
    pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="row5-null-key-removed"),
    pytest.param(None, {"a": None}, None, id="row6-null-key-on-first-update"),
    pytest.param(
        {"a": {"x": 1, "y": 2}}, {"a": {"x": 3}}, {"a": {"x": 3}}, id="row7-no-nested-merge"
    ),
    pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="row8-array-replaced"),
    pytest.param(None, {"a": {"x": None}}, {"a": {"x": None}}, id="row9-nested-null-is-data"),
    pytest.param(
        {"zed.dev/progress": 0.5, "acme.dev/review": {"state": "pending"}},
        {
            "zed.dev/progress": None,
            "acme.dev/review": {"reviewer": "sam"},
            "proxy.dev/route": "edge",
        },
        {"acme.dev/review": {"reviewer": "sam"}, "proxy.dev/route": "edge"},
        id="rfd-example-tool-call",
    ),
]


@pytest.mark.parametrize(("stored", "update", "expected"), CONFORMANCE)
def test_conformance_apply(
    stored: JsonObject | None, update: MetaPatch, expected: JsonObject | None
) -> None:
    assert apply_meta_patch(stored, update) == expected


@pytest.mark.parametrize(("stored", "update", "expected"), CONFORMANCE)
def test_conformance_fold(
    stored: JsonObject | None, update: MetaPatch, expected: JsonObject | None
) -> None:
    assert fold_meta_patches(stored, [update]) == expected
    assert fold_meta_patches(stored, (update,)) == expected


@pytest.mark.parametrize(("stored", "update", "expected"), CONFORMANCE)
def test_conformance_session_info(
    stored: JsonObject | None, update: MetaPatch, expected: JsonObject | None
) -> None:
    after = apply_session_info_patch(SessionInfo(meta=stored), SessionInfoPatch(meta=update))
    assert after.meta == expected


@pytest.mark.parametrize(("stored", "update", "expected"), CONFORMANCE)
def test_conformance_empty_object_is_no_metadata(
    stored: JsonObject | None, update: MetaPatch, expected: JsonObject | None
) -> None:
    """Stored metadata with no keys is the same as no metadata."""
    if stored is None:
        assert apply_meta_patch({}, update) == expected


# --- the cases the RFD names besides the table ---------------------------------------------


@pytest.mark.parametrize(
    "key", ["unknown.example/key", "", "ag-ui", "_meta", "ключ", "a b", "x" * 200]
)
def test_unknown_keys_are_kept_and_patchable(key: str) -> None:
    stored = {key: {"opaque": [1, None]}, "a": 1}
    assert apply_meta_patch(stored, {"a": 2}) == {key: {"opaque": [1, None]}, "a": 2}
    assert apply_meta_patch(stored, {key: "new"}) == {key: "new", "a": 1}
    assert apply_meta_patch(stored, {key: None}) == {"a": 1}


def test_clear_followed_by_an_object() -> None:
    stored = {"a": 1, "b": 2}
    assert fold_meta_patches(stored, [None, {"c": 3}]) == {"c": 3}
    composed = compose_meta_patches(None, {"c": 3})
    assert composed == [None, {"c": 3}], "the object alone would leave the stale keys"
    assert fold_meta_patches(stored, composed) == {"c": 3}
    assert fold_meta_patches(stored, [{"c": 3}]) != {"c": 3}


def test_replay_reproduces_the_stored_metadata() -> None:
    updates: list[MetaPatch] = [
        {"a": 1, "b": {"x": 1}},
        OMITTED,
        {"a": None, "c": [1]},
        {},
        None,
        {"d": True, "e": None},
        {"b": {"x": None}},
    ]
    live: JsonObject | None = None
    for update in updates:
        live = apply_meta_patch(live, update)
    assert live == {"d": True, "b": {"x": None}}
    assert fold_meta_patches(None, updates) == live
    # Dropping the removals breaks replay: the RFD requires keeping them.
    without_removals = [
        {k: v for k, v in u.items() if v is not None} if isinstance(u, Mapping) else u
        for u in updates[:4]
    ]
    assert fold_meta_patches(None, without_removals) != fold_meta_patches(None, updates[:4])


def test_replay_over_stale_metadata() -> None:
    current = {"a": 2, "new": "yes"}
    stale = {"a": 1, "gone": "stale", "also-gone": [1]}
    # A replay of object patches alone leaves the stale keys on the client...
    assert fold_meta_patches(stale, [current]) == {**stale, **current}
    # ...so the agent sends a clear, then the current object.
    assert fold_meta_patches(stale, [None, current]) == current
    # ...or sets each stale key to null alongside the current keys.
    assert fold_meta_patches(stale, [{"gone": None, "also-gone": None, **current}]) == current
    # When the current metadata is empty, a clear alone does it.
    assert fold_meta_patches(stale, [None]) is None


@given(stored_meta, st.lists(meta_updates, max_size=6), stored_meta)
def test_resync_over_any_stale_state(
    original: JsonObject | None, updates: list[MetaPatch], stale: JsonObject | None
) -> None:
    current = fold_meta_patches(original, updates)
    resync: list[MetaPatch] = [None] if current is None else [None, current]
    assert fold_meta_patches(stale, resync) == current
    removals: JsonObject = {key: None for key in stale or {} if key not in (current or {})}
    assert fold_meta_patches(stale, [{**removals, **(current or {})}]) == current


def test_nested_null_is_kept() -> None:
    value = {"x": None, "y": [None, {"z": None}]}
    assert apply_meta_patch({"a": 1}, {"b": value}) == {"a": 1, "b": value}
    assert apply_meta_patch({"b": value}, OMITTED) == {"b": value}


@given(stored_meta)
def test_empty_object_is_a_no_op(stored: JsonObject | None) -> None:
    expected = stored or None
    assert apply_meta_patch(stored, {}) == expected
    assert apply_meta_patch(stored, OMITTED) == expected
    assert fold_meta_patches(stored, [{}, OMITTED, {}]) == expected


def test_a_null_key_is_never_stored() -> None:
    assert apply_meta_patch(None, {"a": None}) is None
    assert apply_meta_patch({}, {"a": None}) is None
    assert apply_meta_patch(None, {"a": None, "b": 1}) == {"b": 1}
    assert apply_meta_patch({"b": 1}, {"a": None}) == {"b": 1}
    assert fold_meta_patches(None, [None, {"a": None}]) is None
    assert apply_meta_patch({"a": 1}, {"a": None}) is None


def test_stored_null_keys_are_no_metadata() -> None:
    """A ``null`` in given stored metadata (e.g. from a v1 source) counts as absent."""
    assert apply_meta_patch({"a": None}, OMITTED) is None
    assert apply_meta_patch({"a": None, "b": 1}, {}) == {"b": 1}
    assert fold_meta_patches({"a": None}, []) is None


def test_apply_accepts_any_mapping_and_returns_plain_dicts() -> None:
    from types import MappingProxyType

    result = apply_meta_patch(MappingProxyType({"a": (1, 2)}), MappingProxyType({"b": 3}))
    assert result == {"a": [1, 2], "b": 3}
    assert type(result) is dict
    assert type(result["a"]) is list


# --- compose_meta_patches: exact results ---------------------------------------------------

COMPOSE_CASES = [
    pytest.param(OMITTED, OMITTED, [OMITTED], id="omitted-omitted"),
    pytest.param(OMITTED, None, [None], id="omitted-clear"),
    pytest.param(OMITTED, {"a": 1}, [{"a": 1}], id="omitted-object"),
    pytest.param(None, OMITTED, [None], id="clear-omitted"),
    pytest.param(None, None, [None], id="clear-clear"),
    pytest.param(None, {}, [None], id="clear-empty-object"),
    pytest.param(None, {"a": None}, [None], id="clear-removals-only"),
    pytest.param(None, {"a": 1, "b": None}, [None, {"a": 1}], id="clear-object"),
    pytest.param({"a": 1}, OMITTED, [{"a": 1}], id="object-omitted"),
    pytest.param({"a": 1}, None, [None], id="object-clear"),
    pytest.param({"a": 1}, {"a": None}, [{"a": None}], id="set-then-remove-keeps-removal"),
    pytest.param({"a": None}, {"b": 2}, [{"a": None, "b": 2}], id="removal-kept"),
    pytest.param({"a": {"x": 1}}, {"a": {"y": 2}}, [{"a": {"y": 2}}], id="no-nested-merge"),
    pytest.param({}, {}, [{}], id="empty-empty"),
]


@pytest.mark.parametrize(("first", "second", "expected"), COMPOSE_CASES)
def test_compose_exact(first: MetaPatch, second: MetaPatch, expected: list[MetaPatch]) -> None:
    assert compose_meta_patches(first, second) == expected


# --- hypothesis properties -------------------------------------------------------------------


@given(stored_meta, meta_updates)
def test_apply_never_mutates_inputs(stored: JsonObject | None, update: MetaPatch) -> None:
    before = copy.deepcopy((stored, update))
    apply_meta_patch(stored, update)
    assert (stored, update) == before


@given(stored_meta, st.lists(meta_updates, max_size=5))
def test_fold_never_mutates_inputs(stored: JsonObject | None, updates: list[MetaPatch]) -> None:
    before = copy.deepcopy((stored, updates))
    fold_meta_patches(stored, updates)
    assert (stored, updates) == before


@given(meta_updates, meta_updates)
def test_compose_never_mutates_inputs(first: MetaPatch, second: MetaPatch) -> None:
    before = copy.deepcopy((first, second))
    compose_meta_patches(first, second)
    assert (first, second) == before


@given(stored_meta, meta_updates)
def test_apply_result_is_normal_and_shares_nothing(
    stored: JsonObject | None, update: MetaPatch
) -> None:
    result = apply_meta_patch(stored, update)
    assert_normal(result)
    assert_shares_nothing(result, stored, update)


@given(st.one_of(st.none(), st.dictionaries(meta_keys, json_values, max_size=5)), meta_updates)
def test_apply_result_is_normal_for_any_stored_object(
    stored: JsonObject | None, update: MetaPatch
) -> None:
    """Even stored objects holding top-level ``null`` (not valid state) give a normal result."""
    assert_normal(apply_meta_patch(stored, update))


@given(stored_meta, st.lists(meta_updates, max_size=6))
def test_fold_result_is_normal_and_shares_nothing(
    stored: JsonObject | None, updates: list[MetaPatch]
) -> None:
    result = fold_meta_patches(stored, updates)
    assert_normal(result)
    assert_shares_nothing(result, stored, updates)


@given(stored_meta, st.lists(meta_updates, max_size=6))
def test_fold_equals_repeated_apply(stored: JsonObject | None, updates: list[MetaPatch]) -> None:
    expected = stored
    for update in updates:
        expected = apply_meta_patch(expected, update)
    assert fold_meta_patches(stored, updates) == (expected or None)


@given(stored_meta, meta_updates)
def test_apply_matches_a_reference_model(stored: JsonObject | None, update: MetaPatch) -> None:
    """An independent statement of the rule, key by key."""
    result = apply_meta_patch(stored, update)
    if update is None:
        assert result is None
        return
    old = stored or {}
    new = result or {}
    patch: Mapping[str, object] = {} if update is OMITTED else update
    for key in set(old) | set(patch):
        if key not in patch:
            assert new[key] == old[key]
        elif patch[key] is None:
            assert key not in new
        else:
            assert new[key] == patch[key]
    assert set(new) <= set(old) | set(patch)


@given(meta_updates, meta_updates)
def test_compose_results_share_nothing(first: MetaPatch, second: MetaPatch) -> None:
    assert_shares_nothing(compose_meta_patches(first, second), first, second)


@given(stored_meta, meta_updates, meta_updates)
def test_composition_law(stored: JsonObject | None, first: MetaPatch, second: MetaPatch) -> None:
    """Folding the composition equals folding the pair, for every stored state."""
    composed = compose_meta_patches(first, second)
    assert fold_meta_patches(stored, composed) == fold_meta_patches(stored, [first, second])


@given(meta_updates, meta_updates)
def test_compose_is_short(first: MetaPatch, second: MetaPatch) -> None:
    composed = compose_meta_patches(first, second)
    assert 1 <= len(composed) <= 2
    if len(composed) == 2:
        # Only a clear followed by an object that actually stores something needs two.
        clear, obj = composed
        assert clear is None
        assert isinstance(obj, dict)
        assert any(value is not None for value in obj.values())
        assert first is None
        assert isinstance(second, Mapping)


@given(st.lists(meta_updates, min_size=1, max_size=6), stored_meta)
def test_composing_a_sequence_pairwise(updates: list[MetaPatch], stored: JsonObject | None) -> None:
    """Reducing a queue by composing its tail with each new update keeps the meaning."""
    queue: list[MetaPatch] = [updates[0]]
    for update in updates[1:]:
        queue = [*queue[:-1], *compose_meta_patches(queue[-1], update)]
    assert fold_meta_patches(stored, queue) == fold_meta_patches(stored, updates)
    assert len(queue) <= 1 + sum(1 for u in updates if u is None)


@given(st.lists(meta_updates, min_size=1, max_size=5), st.data())
def test_removals_are_never_dropped(updates: list[MetaPatch], data: st.DataObject) -> None:
    """A key the updates leave removed is removed from any stored state, known or not."""
    composed: list[MetaPatch] = [updates[0]]
    for update in updates[1:]:
        composed = [*composed[:-1], *compose_meta_patches(composed[-1], update)]
    # Every key any update mentions is stored (stale) before the composed updates arrive.
    mentioned = {key for u in updates if isinstance(u, Mapping) for key in u}
    stale: JsonObject = dict.fromkeys(mentioned, "stale")
    extra: JsonObject | None = data.draw(stored_meta)
    stale.update(extra or {})
    result = fold_meta_patches(stale, composed) or {}
    for key in mentioned:
        last = None
        for index, update in enumerate(updates):
            if update is None or (isinstance(update, Mapping) and key in update):
                last = index
        assert last is not None
        final = updates[last]
        if final is None or final[key] is None:  # type: ignore[index]
            assert key not in result
        else:
            assert result[key] == final[key]  # type: ignore[index]


@given(patch_objects)
def test_removal_of_a_key_the_composer_never_saw(patch: JsonObject) -> None:
    """Set-then-remove composes to a removal, not to nothing."""
    composed = compose_meta_patches({**patch, "k": 1}, {"k": None})
    known = fold_meta_patches(None, composed)
    assert known is None or "k" not in known
    assert fold_meta_patches({"k": "held by the client"}, composed) == known


# --- bad input -----------------------------------------------------------------------------


class Opaque:
    """An arbitrary object (not JSON)."""


def _dict_cycle() -> dict[str, object]:
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    return cycle


def _list_cycle() -> list[object]:
    cycle: list[object] = []
    cycle.append(cycle)
    return cycle


def _nested_lists(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


# The bad value is placed at _meta['a'][1]['b']; ``suffix`` is what the path adds below it.
# The outer update is depth 0, ['a'] depth 1, [1] depth 2, so ['b'] sits at depth 3.
BAD_VALUES = [
    pytest.param(float("nan"), "", id="nan"),
    pytest.param(float("inf"), "", id="plus-inf"),
    pytest.param(float("-inf"), "", id="minus-inf"),
    pytest.param(b"x", "", id="bytes"),
    pytest.param(bytearray(b"x"), "", id="bytearray"),
    pytest.param({1, 2}, "", id="set"),
    pytest.param(frozenset({1}), "", id="frozenset"),
    pytest.param(Opaque(), "", id="object"),
    pytest.param({1: "v"}, "", id="int-key"),
    pytest.param({None: "v"}, "", id="none-key"),
    pytest.param({("t",): "v"}, "", id="tuple-key"),
    pytest.param({True: "v"}, "", id="bool-key"),
    pytest.param(_dict_cycle(), "['self']", id="dict-cycle"),
    pytest.param(_list_cycle(), "[0]", id="list-cycle"),
    pytest.param(_nested_lists(MAX_DEPTH - 2), "[0]" * (MAX_DEPTH - 3), id="too-deep"),
]


def _check_rejected(exc_info: pytest.ExceptionInfo[MetaValueError], path: str) -> None:
    error = exc_info.value
    assert isinstance(error, ValueError)
    assert isinstance(error, AgentMetaError)
    assert error.path == path
    assert str(error).startswith(path + ": ")


@pytest.mark.parametrize(("bad", "suffix"), BAD_VALUES)
def test_bad_value_in_update(bad: object, suffix: str) -> None:
    update = {"a": [0, {"b": bad}], "ok": 1}
    before = repr(update)
    with pytest.raises(MetaValueError) as exc_info:
        apply_meta_patch({"s": 1}, update)
    _check_rejected(exc_info, "_meta['a'][1]['b']" + suffix)
    assert repr(update) == before


@pytest.mark.parametrize(("bad", "suffix"), BAD_VALUES)
def test_bad_value_in_stored(bad: object, suffix: str) -> None:
    stored = {"a": [0, {"b": bad}]}
    before = repr(stored)
    with pytest.raises(MetaValueError) as exc_info:
        apply_meta_patch(stored, {"x": 1})
    _check_rejected(exc_info, "stored['a'][1]['b']" + suffix)
    assert repr(stored) == before


@pytest.mark.parametrize(("bad", "suffix"), BAD_VALUES)
def test_bad_value_in_fold_names_the_update(bad: object, suffix: str) -> None:
    updates: list[MetaPatch] = [{"ok": 1}, None, {"a": [0, {"b": bad}]}]
    before = repr(updates)
    with pytest.raises(MetaValueError) as exc_info:
        fold_meta_patches(None, updates)
    _check_rejected(exc_info, "updates[2]['a'][1]['b']" + suffix)
    assert repr(updates) == before


@pytest.mark.parametrize(("bad", "suffix"), BAD_VALUES)
def test_bad_value_in_compose_names_the_side(bad: object, suffix: str) -> None:
    with pytest.raises(MetaValueError) as exc_info:
        compose_meta_patches({"a": [0, {"b": bad}]}, OMITTED)
    _check_rejected(exc_info, "first['a'][1]['b']" + suffix)
    with pytest.raises(MetaValueError) as exc_info:
        compose_meta_patches(None, {"a": [0, {"b": bad}]})
    _check_rejected(exc_info, "second['a'][1]['b']" + suffix)


def test_nesting_up_to_max_depth_is_accepted() -> None:
    value = _nested_lists(MAX_DEPTH - 3)
    assert apply_meta_patch(None, {"a": [0, {"b": value}]}) == {"a": [0, {"b": value}]}


@pytest.mark.parametrize(
    "bad",
    [pytest.param([{"a": 1}], id="list"), pytest.param("a", id="str"), pytest.param(1, id="int")],
)
def test_meta_that_is_not_a_mapping(bad: object) -> None:
    before = repr(bad)
    with pytest.raises(MetaValueError) as exc_info:
        apply_meta_patch({"a": 1}, bad)  # type: ignore[arg-type]
    _check_rejected(exc_info, "_meta")
    with pytest.raises(MetaValueError) as exc_info:
        fold_meta_patches(None, [OMITTED, bad])  # type: ignore[list-item]
    _check_rejected(exc_info, "updates[1]")
    with pytest.raises(MetaValueError) as exc_info:
        compose_meta_patches(OMITTED, bad)  # type: ignore[arg-type]
    _check_rejected(exc_info, "second")
    with pytest.raises(MetaValueError) as exc_info:
        SessionInfoPatch(meta=bad)  # type: ignore[arg-type]
    _check_rejected(exc_info, "_meta")
    with pytest.raises(MetaValueError) as exc_info:
        apply_meta_patch(bad, OMITTED)  # type: ignore[arg-type]
    _check_rejected(exc_info, "stored")
    assert repr(bad) == before


def test_a_bad_update_late_in_a_fold_stores_nothing() -> None:
    stored = {"a": 1}
    with pytest.raises(MetaValueError):
        fold_meta_patches(stored, [None, {"b": float("nan")}])
    assert stored == {"a": 1}
