"""``OMITTED``: one instance, readable, falsy, and never confused with ``None``."""

from __future__ import annotations

import copy
import pickle

import pytest

from agent_meta import OMITTED


def test_copies_are_the_same_object() -> None:
    assert copy.copy(OMITTED) is OMITTED
    assert copy.deepcopy(OMITTED) is OMITTED
    assert copy.deepcopy({"x": [OMITTED]})["x"][0] is OMITTED


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_returns_the_same_object(protocol: int) -> None:
    assert pickle.loads(pickle.dumps(OMITTED, protocol=protocol)) is OMITTED


def test_repr_and_str() -> None:
    assert repr(OMITTED) == "OMITTED"
    assert str(OMITTED) == "OMITTED"
    assert repr([OMITTED]) == "[OMITTED]"


def test_falsy_but_not_none() -> None:
    assert not OMITTED
    assert bool(OMITTED) is False
    assert OMITTED is not None
    assert OMITTED != None  # noqa: E711 - equality with None is the point
    omitted: object = OMITTED
    assert omitted != {}
    assert omitted != "OMITTED"


def test_hashable_and_equal_only_to_itself() -> None:
    assert {OMITTED: 1}[OMITTED] == 1
    assert OMITTED == OMITTED
    assert len({OMITTED, copy.copy(OMITTED), None}) == 2
