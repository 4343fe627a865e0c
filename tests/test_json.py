"""``json_copy``: what it accepts, what it turns values into, and what it rejects."""

from __future__ import annotations

import copy
import enum
import json
from collections import OrderedDict
from types import MappingProxyType

import pytest
from hypothesis import given
from strategies import json_values

from agent_meta import JsonValue, MetaValueError, json_copy
from agent_meta._json import MAX_DEPTH, json_object_copy


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
