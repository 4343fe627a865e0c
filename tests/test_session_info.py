"""``SessionInfoPatch``/``SessionInfo`` values, their composition, and ``is_rfc3339``."""

from __future__ import annotations

import copy
import dataclasses
import enum
import pickle
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import (
    OMITTED,
    MetaValueError,
    SessionInfo,
    SessionInfoPatch,
    apply_session_info_patch,
)
from agent_meta.core._session_info import compose_session_info_patches
from agent_meta.core._timestamps import is_rfc3339
from tests.strategies import rfc3339_timestamps, session_info_patches, session_infos, stored_meta

if TYPE_CHECKING:
    from collections.abc import Iterator


def fold(info: SessionInfo, patches: list[SessionInfoPatch]) -> SessionInfo:
    for patch in patches:
        info = apply_session_info_patch(info, patch)
    return info


def container_ids(value: object) -> Iterator[int]:
    if isinstance(value, dict):
        yield id(value)
        for item in value.values():
            yield from container_ids(item)
    elif isinstance(value, list):
        yield id(value)
        for item in value:
            yield from container_ids(item)


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SessionInfoPatch, SessionInfo])
@pytest.mark.parametrize("field", ["title", "updated_at"])
@pytest.mark.parametrize("bad", [1, b"t", ["t"], 1.5, True], ids=repr)
def test_text_fields_must_be_str(cls: type[object], field: str, bad: object) -> None:
    with pytest.raises(MetaValueError) as exc_info:
        cls(**{field: bad})
    assert exc_info.value.path == field
    assert str(exc_info.value).startswith(f"{field}: ")
    assert isinstance(exc_info.value, ValueError)


def test_str_subclass_titles_become_plain_str() -> None:
    class Name(enum.StrEnum):
        X = "x"

    for value in (SessionInfoPatch(title=Name.X), SessionInfo(title=Name.X)):
        assert type(value.title) is str
        assert value.title == "x"


def test_patch_meta_is_validated_with_a_path() -> None:
    with pytest.raises(MetaValueError) as exc_info:
        SessionInfoPatch(meta={"a": [float("nan")]})
    assert exc_info.value.path == "_meta['a'][0]"


def test_info_meta_is_validated_with_a_path() -> None:
    with pytest.raises(MetaValueError) as exc_info:
        SessionInfo(meta={"a": {1: 2}})
    assert exc_info.value.path == "_meta['a']"
    with pytest.raises(MetaValueError) as exc_info:
        SessionInfo(meta=[("a", 1)])  # type: ignore[arg-type]
    assert exc_info.value.path == "meta"


def test_patch_keeps_a_copy_of_meta() -> None:
    given_meta: dict[str, object] = {"a": {"x": [1]}}
    patch = SessionInfoPatch(meta=given_meta)
    info = SessionInfo(meta=given_meta)
    given_meta["a"]["x"].append(2)  # type: ignore[index]
    given_meta["b"] = 1
    assert patch.meta == {"a": {"x": [1]}}
    assert info.meta == {"a": {"x": [1]}}


def test_defaults_are_omitted() -> None:
    patch = SessionInfoPatch()
    assert (patch.title, patch.updated_at, patch.meta) == (OMITTED, OMITTED, OMITTED)
    info = SessionInfo()
    assert (info.title, info.updated_at, info.meta) == (OMITTED, OMITTED, None)


def test_info_empty_meta_is_no_metadata() -> None:
    assert SessionInfo(meta={}).meta is None
    assert SessionInfo(meta={}) == SessionInfo(meta=None)


@pytest.mark.parametrize("cls", [SessionInfoPatch, SessionInfo])
def test_values_are_frozen(cls: type[SessionInfoPatch] | type[SessionInfo]) -> None:
    value = cls(title="t")
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.title = "other"  # type: ignore[misc]


# --- is_noop and equality ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "noop"),
    [
        pytest.param(SessionInfoPatch(), True, id="all-omitted"),
        pytest.param(SessionInfoPatch(meta={}), True, id="empty-meta-object"),
        pytest.param(SessionInfoPatch(meta=None), False, id="meta-clear"),
        pytest.param(SessionInfoPatch(meta={"a": None}), False, id="meta-removal"),
        pytest.param(SessionInfoPatch(meta={"a": 1}), False, id="meta-set"),
        pytest.param(SessionInfoPatch(title=None), False, id="title-clear"),
        pytest.param(SessionInfoPatch(title=""), False, id="title-empty-string"),
        pytest.param(SessionInfoPatch(updated_at=None), False, id="updated-at-clear"),
    ],
)
def test_is_noop(patch: SessionInfoPatch, noop: bool) -> None:
    assert patch.is_noop is noop


@given(session_infos(), session_info_patches())
def test_a_noop_patch_changes_nothing(info: SessionInfo, patch: SessionInfoPatch) -> None:
    if patch.is_noop:
        assert apply_session_info_patch(info, patch) == info


def test_equality() -> None:
    assert SessionInfoPatch(title="x", meta={"a": 1}) == SessionInfoPatch(title="x", meta={"a": 1})
    assert SessionInfoPatch(title="x") != SessionInfoPatch(title=None)
    assert SessionInfoPatch(title=None) != SessionInfoPatch()
    assert SessionInfoPatch(meta=None) != SessionInfoPatch()
    assert SessionInfoPatch(meta={}) != SessionInfoPatch()
    assert SessionInfoPatch(meta={"a": None}) != SessionInfoPatch(meta={})
    assert SessionInfoPatch(updated_at="2026-11-30T12:00:00Z") != SessionInfoPatch(
        title="2026-11-30T12:00:00Z"
    )
    assert SessionInfo(title="x") == SessionInfo(title="x")
    assert SessionInfo(title=None) != SessionInfo()
    patch: object = SessionInfoPatch(title="x")
    assert patch != SessionInfo(title="x")


@given(session_info_patches())
def test_patch_pickles(patch: SessionInfoPatch) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        clone = pickle.loads(pickle.dumps(patch, protocol=protocol))
        assert clone == patch
        assert clone.title is OMITTED or clone.title == patch.title
        assert (clone.meta is OMITTED) is (patch.meta is OMITTED)
    assert copy.deepcopy(patch) == patch


@given(session_infos())
def test_info_pickles(info: SessionInfo) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(info, protocol=protocol)) == info
    assert copy.deepcopy(info) == info


# --- apply and compose ---------------------------------------------------------------------


def test_apply_three_state_fields() -> None:
    info = SessionInfo(title="old", updated_at="2026-11-30T12:00:00Z", meta={"a": 1, "b": 2})
    after = apply_session_info_patch(info, SessionInfoPatch(title=None, meta={"a": None}))
    assert after == SessionInfo(title=None, updated_at="2026-11-30T12:00:00Z", meta={"b": 2})
    after = apply_session_info_patch(after, SessionInfoPatch(updated_at=None, meta=None))
    assert after == SessionInfo(title=None, updated_at=None, meta=None)
    assert info.meta == {"a": 1, "b": 2}, "the input info is not changed"


@given(session_infos(), session_info_patches())
def test_apply_never_mutates_and_shares_nothing(info: SessionInfo, patch: SessionInfoPatch) -> None:
    before = copy.deepcopy((info, patch))
    after = apply_session_info_patch(info, patch)
    assert (info, patch) == before
    shared = set(container_ids(after.meta)) & set(container_ids((info.meta, patch.meta)))
    assert not shared
    assert after.meta != {}
    assert after.meta is None or None not in after.meta.values()


@given(session_infos(), st.lists(session_info_patches(), max_size=6))
def test_composition_law(info: SessionInfo, patches: list[SessionInfoPatch]) -> None:
    """Applying the composed patches equals applying every patch, for every stored state."""
    before = copy.deepcopy(patches)
    composed = compose_session_info_patches(patches)
    assert patches == before
    assert fold(info, composed) == fold(info, patches)


@given(st.lists(session_info_patches(), max_size=6))
def test_composition_is_short(patches: list[SessionInfoPatch]) -> None:
    composed = compose_session_info_patches(patches)
    assert len(composed) <= 2
    assert (len(composed) == 0) == (len(patches) == 0)
    if len(composed) == 2:
        clear, obj = composed
        assert clear.meta is None
        assert obj.title is OMITTED
        assert obj.updated_at is OMITTED
        assert isinstance(obj.meta, dict)
        assert any(value is not None for value in obj.meta.values())
        # ...and the input really was a clear followed (later) by an object.
        first_clear = next(i for i, p in enumerate(patches) if p.meta is None)
        assert any(isinstance(p.meta, dict) for p in patches[first_clear + 1 :])


@given(st.lists(session_info_patches(), min_size=1, max_size=5), st.data())
def test_composition_keeps_removals(patches: list[SessionInfoPatch], data: st.DataObject) -> None:
    """A key left removed is removed from any stored state, even one the composer never saw."""
    mentioned = {key for p in patches if isinstance(p.meta, dict) for key in p.meta}
    other = data.draw(stored_meta) or {}
    stale = SessionInfo(meta={**other, **dict.fromkeys(mentioned, "stale")})
    result = fold(stale, compose_session_info_patches(patches)).meta or {}
    for key in mentioned:
        last = max(
            i
            for i, p in enumerate(patches)
            if p.meta is None or (isinstance(p.meta, dict) and key in p.meta)
        )
        final = patches[last].meta
        if final is None or final[key] is None:  # type: ignore[index]
            assert key not in result
        else:
            assert result[key] == final[key]  # type: ignore[index]


@given(st.lists(session_info_patches(), max_size=6))
def test_composition_owns_its_meta_objects(patches: list[SessionInfoPatch]) -> None:
    """Composed patches never reuse an input's ``meta`` dict (composition merges in place).

    Values below the top level may be shared: patches are read-only values.
    """
    composed = compose_session_info_patches(patches)
    inputs = {id(p.meta) for p in patches if isinstance(p.meta, dict)}
    assert not {id(p.meta) for p in composed if isinstance(p.meta, dict)} & inputs


def test_compose_exact() -> None:
    a = SessionInfoPatch(title="one", meta={"a": 1, "b": 2})
    clear = SessionInfoPatch(meta=None, updated_at="2026-11-30T12:00:00Z")
    c = SessionInfoPatch(title="two", meta={"c": 3, "d": None})
    assert compose_session_info_patches([]) == []
    assert compose_session_info_patches([a]) == [a]
    assert compose_session_info_patches([a, c]) == [
        SessionInfoPatch(title="two", meta={"a": 1, "b": 2, "c": 3, "d": None})
    ]
    assert compose_session_info_patches([a, clear, c]) == [
        SessionInfoPatch(title="two", updated_at="2026-11-30T12:00:00Z", meta=None),
        SessionInfoPatch(meta={"c": 3}),
    ]
    assert compose_session_info_patches([a, clear]) == [
        SessionInfoPatch(title="one", updated_at="2026-11-30T12:00:00Z", meta=None)
    ]
    assert compose_session_info_patches([clear, SessionInfoPatch(meta={"x": None})]) == [clear]
    assert compose_session_info_patches(iter([SessionInfoPatch(), SessionInfoPatch()])) == [
        SessionInfoPatch()
    ]


# --- is_rfc3339 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30T12:00:00Z",
        "2026-11-30T12:00:00+01:00",
        "2026-11-30T12:00:00-05:30",
        "2026-11-30T12:00:00.5Z",
        "2026-11-30T12:00:00.123456789+00:00",
        "2026-11-30t12:00:00z",
        "2024-02-29T00:00:00Z",
    ],
)
def test_rfc3339_accepts(text: str) -> None:
    assert is_rfc3339(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-11-30T12:00:00", id="no-offset"),
        pytest.param("2026-11-30", id="date-only"),
        pytest.param("yesterday", id="yesterday"),
        pytest.param("2026-13-01T12:00:00Z", id="bad-month"),
        pytest.param("2026-02-30T12:00:00Z", id="bad-day"),
        pytest.param("2026-11-30T25:00:00Z", id="bad-hour"),
        pytest.param("2026-11-30 12:00:00Z", id="space-separator"),
        pytest.param("2026-11-30T12:00Z", id="no-seconds"),
        pytest.param("2026-11-30T12:00:00+0100", id="offset-without-colon"),
        pytest.param("2026-11-30T12:00:00.Z", id="empty-fraction"),
        pytest.param(" 2026-11-30T12:00:00Z", id="leading-space"),
        pytest.param("2026-11-30T12:00:00Z\n", id="trailing-newline"),
        pytest.param("\uff12\uff10\uff12\uff16-11-30T12:00:00Z", id="non-ascii-digits"),
        pytest.param("", id="empty"),
    ],
)
def test_rfc3339_rejects(text: str) -> None:
    assert not is_rfc3339(text)


@given(rfc3339_timestamps)
def test_rfc3339_accepts_generated(text: str) -> None:
    assert is_rfc3339(text)
