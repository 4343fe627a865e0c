"""``json_copy``: what it accepts, what it turns values into, and what it rejects."""

from __future__ import annotations

import copy
import enum
import json
import math
from collections import OrderedDict
from types import MappingProxyType
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import JsonValue, MetaValueError, json_copy
from agent_meta.core._json import INT_LIMIT, MAX_DEPTH, PLAIN_DEPTH, is_plain_json, json_object_copy
from agent_meta.sansio._encode import (
    META_DEPTH,
    EncodedUpdate,
    _meta_value,
    encode_meta_patch,
    encode_update,
    member_size,
)
from agent_meta.sansio._json_text import encode_json
from tests.strategies import json_scalars, json_values, meta_keys

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Meters(float):
    pass


class Name(str):
    pass


def test_tuples_become_lists() -> None:
    result = json_copy({"a": (1, (2, 3)), "b": ()})
    assert result == {"a": [1, [2, 3]], "b": []}
    assert isinstance(result, dict)
    assert type(result["a"]) is list
    assert type(result["a"][1]) is list


@pytest.mark.parametrize(
    ("value", "expected", "base"),
    [
        pytest.param(Color.RED, "red", str, id="StrEnum"),
        pytest.param(Name("n"), "n", str, id="str-subclass"),
        pytest.param(Level.HIGH, 3, int, id="IntEnum"),
        pytest.param(Meters(1.5), 1.5, float, id="float-subclass"),
    ],
)
def test_subclasses_become_exact_base_types(value: object, expected: object, base: type) -> None:
    for result in (json_copy(value), json_copy([value])[0], json_copy({"k": value})["k"]):  # type: ignore[index, call-overload]
        assert type(result) is base
        assert result == expected
    assert json.dumps(json_copy(value)) == json.dumps(value)


def test_str_subclass_keys_become_str() -> None:
    result = json_copy({Color.RED: 1, Name("n"): 2})
    assert isinstance(result, dict)
    assert result == {"red": 1, "n": 2}
    assert all(type(key) is str for key in result)


@pytest.mark.parametrize("value", [True, False])
def test_bool_stays_bool(value: bool) -> None:
    assert json_copy(value) is value
    assert json_copy([value]) == [value]
    assert type(json_copy({"b": value})["b"]) is bool  # type: ignore[index, call-overload]


@pytest.mark.parametrize("value", [2**64, -(2**200), 10**400])
def test_large_ints_are_kept(value: int) -> None:
    assert json_copy(value) == value
    assert json_copy({"n": value}) == {"n": value}


def test_other_mappings_become_dicts() -> None:
    result = json_copy(OrderedDict(b=1, a=MappingProxyType({"x": None})))
    assert result == {"b": 1, "a": {"x": None}}
    assert isinstance(result, dict)
    assert type(result) is dict
    assert type(result["a"]) is dict
    assert list(result) == ["b", "a"], "key order is kept"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        pytest.param(float("nan"), "value", id="nan"),
        pytest.param(Meters("inf"), "value", id="inf-float-subclass"),
        pytest.param({"a": [1, {"b": b""}]}, "value['a'][1]['b']", id="bytes"),
        pytest.param({"a": [1, {2: "x"}]}, "value['a'][1]", id="int-key"),
        pytest.param([[], [{"k": {3}}]], "value[1][0]['k']", id="set"),
        pytest.param({"it's": object()}, """value["it's"]""", id="quote-in-key"),
    ],
)
def test_rejections_name_the_path(value: object, path: str) -> None:
    before = repr(value)
    with pytest.raises(MetaValueError) as exc_info:
        json_copy(value)
    assert exc_info.value.path == path
    assert repr(value) == before


def test_custom_root_path() -> None:
    with pytest.raises(MetaValueError) as exc_info:
        json_copy({"a": float("nan")}, path="_meta")
    assert exc_info.value.path == "_meta['a']"


def test_depth_limit_is_exact() -> None:
    def nested(levels: int) -> object:
        value: object = 0
        for _ in range(levels):
            value = [value]
        return value

    assert json_copy(nested(MAX_DEPTH)) == nested(MAX_DEPTH)
    with pytest.raises(MetaValueError) as exc_info:
        json_copy(nested(MAX_DEPTH + 1))
    assert exc_info.value.path == "value" + "[0]" * MAX_DEPTH


def test_shared_but_acyclic_values_are_accepted() -> None:
    shared = {"x": [1]}
    result = json_copy({"a": shared, "b": [shared, shared]})
    assert result == {"a": {"x": [1]}, "b": [{"x": [1]}, {"x": [1]}]}
    assert isinstance(result, dict)
    assert result["a"] is not result["b"][0]  # type: ignore[index]


def test_object_copy_requires_a_mapping() -> None:
    with pytest.raises(MetaValueError) as exc_info:
        json_object_copy([1], path="_meta")
    assert exc_info.value.path == "_meta"


@given(json_values)
def test_copy_is_equal_fresh_and_leaves_the_input_alone(value: JsonValue) -> None:
    before = copy.deepcopy(value)
    result = json_copy(value)
    assert result == value
    assert value == before
    assert json.loads(json.dumps(result)) == result

    def ids(v: object) -> set[int]:
        if isinstance(v, dict):
            return {id(v)}.union(*(ids(item) for item in v.values()))
        if isinstance(v, list):
            return {id(v)}.union(*(ids(item) for item in v))
        return set()

    assert not ids(result) & ids(value)


# -- is_plain_json: the licence to skip json_copy ------------------------------------------------


def _nested(levels: int, leaf: object, in_dicts: Sequence[bool] = (False,)) -> object:
    """``leaf`` inside ``levels`` containers, built iteratively; ``in_dicts`` cycles over the
    levels from the inside out (``True``: an object ``{"k": ...}``, ``False``: an array)."""
    value = leaf
    for level in range(levels):
        value = {"k": value} if in_dicts[level % len(in_dicts)] else [value]
    return value


def _self_list() -> list[object]:
    loop: list[object] = [1]
    loop.append(loop)
    return loop


def _self_dict() -> dict[str, object]:
    loop: dict[str, object] = {"a": 1}
    loop["self"] = [loop]
    return loop


_TOO_BIG: list[int] = [] if INT_LIMIT is None else [INT_LIMIT, -INT_LIMIT, 3 * INT_LIMIT + 1]

_NOT_PLAIN_SCALARS: list[object] = [
    Level.HIGH,
    Color.RED,
    Name("n"),
    Meters(1.5),
    Meters("inf"),
    math.nan,
    math.inf,
    -math.inf,
    b"",
    bytearray(b"x"),
    {1},
    frozenset(),
    object(),
]
"""Scalars json_copy converts or refuses (integers over the limit are drawn separately: such
an integer has no ``repr``, so it must not appear in a strategy's description)."""


def _convertible_containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    keys = st.one_of(st.text(max_size=3), st.sampled_from([Color.RED, Name("k")]))
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
        st.dictionaries(keys, children, max_size=3).map(MappingProxyType),
        st.dictionaries(keys, children, max_size=3).map(OrderedDict),
    )


_convertible_values: st.SearchStrategy[object] = st.recursive(
    st.one_of(json_scalars, st.sampled_from([Level.HIGH, Color.RED, Name("n"), Meters(1.5)])),
    _convertible_containers,
    max_leaves=10,
)
"""Values json_copy accepts but converts: tuples, other mappings, subclasses (also as keys)."""


def _wild_containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    odd_keys = st.sampled_from([1, True, None, 1.5])
    return st.one_of(
        _convertible_containers(children),
        st.dictionaries(st.one_of(st.text(max_size=3), odd_keys), children, max_size=3),
    )


_too_big_ints: st.SearchStrategy[object] = (
    st.nothing()
    if INT_LIMIT is None
    else st.sampled_from([1, -1, 3]).map(lambda sign: sign * INT_LIMIT)  # type: ignore[operator]
)

_wild_values: st.SearchStrategy[object] = st.recursive(
    st.one_of(json_scalars, st.sampled_from(_NOT_PLAIN_SCALARS), _too_big_ints),
    _wild_containers,
    max_leaves=10,
)
"""JSON mixed with everything json_copy converts or refuses, at any depth."""


@st.composite
def _deep_values(draw: st.DrawFn) -> object:
    levels = draw(
        st.sampled_from(
            [PLAIN_DEPTH - 1, PLAIN_DEPTH, PLAIN_DEPTH + 1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1]
        )
    )
    in_dicts = draw(st.lists(st.booleans(), min_size=1, max_size=3))
    return _nested(levels, draw(st.one_of(json_values, _wild_values)), in_dicts)


@st.composite
def _cyclic_values(draw: st.DrawFn) -> object:
    inner: list[object] = draw(st.lists(st.one_of(json_values, _wild_values), max_size=2))
    loop: object = inner
    if draw(st.booleans()):
        box = {"self": inner}
        inner.append(box)
        loop = box
    else:
        inner.insert(draw(st.integers(0, len(inner))), inner)
    wrap = draw(st.integers(0, 2))
    return loop if wrap == 0 else [loop] if wrap == 1 else {"a": loop}


@st.composite
def _one_flaw(draw: st.DrawFn) -> object:
    """Plain JSON with one thing that is not plain put into one of its containers: the
    is_plain_json answer then hangs on that one spot."""
    value: object = draw(
        st.one_of(
            st.lists(json_values, max_size=3),
            st.dictionaries(st.text(max_size=3), json_values, max_size=3),
        )
    )
    flaw = draw(
        st.one_of(
            st.sampled_from(_NOT_PLAIN_SCALARS),
            st.sampled_from([math.nan, math.inf, -math.inf]),
            _too_big_ints,
            _convertible_values.filter(lambda v: not is_plain_json(v)),
            st.sampled_from([1, True, None, 1.5, Color.RED]).map(lambda key: {key: 0}),
        )
    )
    containers: list[object] = []
    todo = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            containers.append(node)
            todo.extend(node)
        elif isinstance(node, dict):
            containers.append(node)
            todo.extend(node.values())
    target = draw(st.sampled_from(containers))
    if isinstance(target, list):
        target.insert(draw(st.integers(0, len(target))), flaw)
    else:
        assert isinstance(target, dict)
        target[draw(st.text(max_size=3))] = flaw
    return value


_any_values: st.SearchStrategy[object] = st.one_of(
    json_values,
    _convertible_values,
    _wild_values,
    _one_flaw(),
    _one_flaw(),  # twice: the most telling case
    _deep_values(),
    _cyclic_values(),
)


@given(_any_values)
def test_plain_values_need_no_copy(value: object) -> None:
    """encode_meta_patch skips json_copy when is_plain_json says yes: the copy must then
    succeed, be equal and encode to the very same text, or the fast path changes the wire."""
    if not is_plain_json(value):
        return
    copied = json_copy(value)
    assert copied == value
    assert encode_json(value) == encode_json(copied)


@given(json_values)
def test_json_values_are_plain(value: JsonValue) -> None:
    """Plain JSON takes the fast path (a too careful is_plain_json would only cost speed,
    but it would also leave the fast path untested)."""
    assert is_plain_json(value)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param((), id="empty-tuple"),
        pytest.param((1, "a"), id="tuple"),
        pytest.param(Level.HIGH, id="IntEnum"),
        pytest.param(Color.RED, id="StrEnum"),
        pytest.param(Name("n"), id="str-subclass"),
        pytest.param(Meters(1.5), id="float-subclass"),
        pytest.param(MappingProxyType({"a": 1}), id="mappingproxy"),
        pytest.param(OrderedDict(a=1), id="dict-subclass"),
        pytest.param({1: "x"}, id="int-key"),
        pytest.param({True: "x"}, id="bool-key"),
        pytest.param({None: "x"}, id="none-key"),
        pytest.param({1.5: "x"}, id="float-key"),
        pytest.param({Color.RED: "x"}, id="StrEnum-key"),
        pytest.param({"ok": 1, Name("k"): "x"}, id="str-subclass-key-after-a-good-one"),
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="inf"),
        pytest.param(-math.inf, id="-inf"),
        pytest.param(b"", id="bytes"),
        pytest.param({1, 2}, id="set"),
        pytest.param(object(), id="object"),
        *(pytest.param(big, id=f"int-limit-{i}") for i, big in enumerate(_TOO_BIG)),
        pytest.param(_nested(MAX_DEPTH + 1, 0), id="too-deep-lists"),
        pytest.param(_nested(MAX_DEPTH + 1, 0, (True,)), id="too-deep-dicts"),
        pytest.param(_self_list(), id="self-list"),
        pytest.param(_self_dict(), id="self-dict"),
    ],
)
@pytest.mark.parametrize("where", ["bare", "in-list", "in-dict", "after-a-plain-item"])
def test_not_plain_kinds(value: object, where: str) -> None:
    """Each kind json_copy would convert or refuse is not plain, wherever it sits (the
    container loops check items inline, so each position is its own code)."""
    wrapped = {
        "bare": value,
        "in-list": [value],
        "in-dict": {"k": value},
        "after-a-plain-item": [{"a": [1, 2.5, "s", None, True]}, {"b": value}],
    }[where]
    assert not is_plain_json(wrapped)


@pytest.mark.skipif(INT_LIMIT is None, reason="no integer digit limit")
def test_int_limit_boundary_is_the_same() -> None:
    """The largest sendable integers are plain; one more is not and json_copy refuses it."""
    assert INT_LIMIT is not None
    for fits in (INT_LIMIT - 1, -INT_LIMIT + 1):
        for value in (fits, [fits], {"n": fits}):
            assert is_plain_json(value)
            assert json_copy(value) == value
    for big in (INT_LIMIT, -INT_LIMIT):
        for value in (big, [big], {"n": big}):
            assert not is_plain_json(value)
            with pytest.raises(MetaValueError):
                json_copy(value)


@pytest.mark.parametrize(
    "in_dicts",
    [(False,), (True,), (True, False), (False, False, True)],
    ids=["lists", "dicts", "alternating", "mixed"],
)
def test_depth_limits(in_dicts: tuple[bool, ...]) -> None:
    """_enter refuses a container at depth MAX_DEPTH (the root is depth 0): MAX_DEPTH levels
    pass, MAX_DEPTH + 1 do not. is_plain_json stops earlier, at PLAIN_DEPTH (so that a cycle
    costs little): values between the two are accepted, through the copy."""
    assert PLAIN_DEPTH < MAX_DEPTH
    leaves: list[object] = [0, "s", [], {}]
    for leaf in leaves:
        extra = 1 if isinstance(leaf, list | dict) else 0
        plain = _nested(PLAIN_DEPTH - extra, leaf, in_dicts)
        assert is_plain_json(plain)
        assert json_copy(plain) == plain
        copied = _nested(PLAIN_DEPTH + 1 - extra, leaf, in_dicts)
        assert not is_plain_json(copied)
        assert json_copy(copied) == copied
        at_limit = _nested(MAX_DEPTH - extra, leaf, in_dicts)
        assert not is_plain_json(at_limit)
        assert json_copy(at_limit) == at_limit
        over = _nested(MAX_DEPTH + 1 - extra, leaf, in_dicts)
        assert not is_plain_json(over)
        with pytest.raises(MetaValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
            json_copy(over)


# -- encode_meta_patch: the fast encoding against the copying definition -------------------------


def _reference_meta_patch(meta: Mapping[object, object]) -> tuple[dict[str, str | None], int]:
    """The slow definition: every value goes through json_copy (and the _meta depth rule);
    the size is summed from the finished patch."""
    patch: dict[str, str | None] = {}
    for key, value in meta.items():
        if not isinstance(key, str):
            json_copy({key: None}, path="meta")  # raises json_copy's own error for the key
            pytest.fail("json_copy accepted a non-str key")
        name = str(key)
        if value is None:
            patch[name] = None
        else:
            text = encode_json(_meta_value(value, f"meta[{name!r}]"))
            patch[name] = encode_json(key) + ":" + text
    return patch, sum(member_size(key, frag) for key, frag in patch.items())


def _reference_outcome(
    meta: Mapping[object, object],
) -> tuple[dict[str, str | None], int] | MetaValueError:
    try:
        return _reference_meta_patch(meta)
    except MetaValueError as exc:
        return exc


@st.composite
def _meta_mappings(draw: st.DrawFn) -> Mapping[object, object]:
    good_key = st.one_of(meta_keys, st.sampled_from([Color.RED, Name("n"), Name("a")]))
    bad_key = st.sampled_from([1, True, None, 1.5, b"k"])
    value = st.one_of(st.none(), json_values, _convertible_values, _any_values)
    items: dict[object, object] = {}
    for _ in range(draw(st.integers(0, 5))):
        key = draw(bad_key if draw(st.sampled_from(range(20))) == 19 else good_key)
        items[key] = draw(value)
    kind = draw(st.sampled_from([dict, MappingProxyType, OrderedDict]))
    meta: Mapping[object, object] = kind(items)
    return meta


@given(_meta_mappings())
def test_encode_meta_patch_is_the_copying_definition(meta: Mapping[object, object]) -> None:
    """Plain values skip json_copy, yet the patch, its size and every error must be exactly
    what copying each value first would give."""
    expected = _reference_outcome(meta)
    if isinstance(expected, MetaValueError):
        with pytest.raises(MetaValueError) as exc_info:
            encode_meta_patch(meta)
        error = exc_info.value
        assert type(error) is type(expected)
        assert (error.path, error.reason, str(error)) == (
            expected.path,
            expected.reason,
            str(expected),
        )
        return
    expected_patch, expected_size = expected
    patch, size = encode_meta_patch(meta)
    assert list(patch.items()) == list(expected_patch.items())
    assert all(type(key) is str for key in patch)
    assert size == expected_size
    update = encode_update(meta=meta)
    assert update.meta_patch == patch
    assert update.patch_size == size
    assert EncodedUpdate(None, None, False, patch, None).patch_size == size


@pytest.mark.parametrize(
    ("meta", "path"),
    [
        pytest.param({"key": [math.nan]}, "meta['key'][0]", id="nan-in-list"),
        pytest.param({"ok": 1, "key": {"a": b""}}, "meta['key']['a']", id="bytes"),
        pytest.param({"key": [{1: 2}]}, "meta['key'][0]", id="int-key-inside"),
        pytest.param({"key": _self_list()}, "meta['key'][1]", id="cycle"),
        pytest.param(
            {"key": _nested(MAX_DEPTH + 1, 0)}, "meta['key']" + "[0]" * MAX_DEPTH, id="too-deep"
        ),
        pytest.param({"it's": [math.inf]}, """meta["it's"][0]""", id="quote-in-key"),
        pytest.param({Color.RED: [Meters("nan")]}, "meta['red'][0]", id="StrEnum-key"),
        pytest.param({"a": 1, 2: 3}, "meta", id="top-level-int-key"),
    ],
)
def test_encode_meta_patch_names_the_bad_spot(meta: dict[object, object], path: str) -> None:
    """A bad value deep inside is reported exactly as json_copy reports it, from ``meta``."""
    with pytest.raises(MetaValueError) as exc_info:
        encode_meta_patch(meta)
    assert exc_info.value.path == path
    reference = _reference_outcome(meta)
    assert isinstance(reference, MetaValueError)
    assert str(exc_info.value) == str(reference)


class _IdentityKey(str):
    """A str subclass equal only to itself, so a dict can hold it next to the plain str."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return other is self


def test_patch_size_counts_a_key_once_when_two_keys_become_one() -> None:
    """Two keys that turn into the same str make one patch member (the later value wins); the
    size must be that patch's size, as it was when EncodedUpdate summed the finished patch."""
    meta: dict[object, object] = {_IdentityKey("a"): 1, "a": 2}
    patch, size = encode_meta_patch(meta)
    assert patch == {"a": '"a":2'}
    assert size == member_size("a", '"a":2')


def test_meta_values_nest_at_most_meta_depth() -> None:
    """A _meta value must stay sendable inside every message that carries it: 240 levels are
    accepted, 241 refused with a typed error (issue 13, point 3)."""

    def nested(levels: int) -> object:
        value: object = 0
        for _ in range(levels):
            value = [value]
        return value

    patch, _ = encode_meta_patch({"k": nested(META_DEPTH)})
    assert patch["k"] is not None
    with pytest.raises(MetaValueError, match="nested deeper than 240"):
        encode_meta_patch({"k": nested(META_DEPTH + 1)})
    with pytest.raises(MetaValueError, match="nested deeper"):
        encode_update(meta={"k": {"inner": nested(META_DEPTH)}})
