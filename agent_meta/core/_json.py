"""Validating and copying JSON values.

Every value agent_meta stores or sends passes through :func:`json_copy`: it checks that the
value is representable as JSON *without loss* and returns a fresh copy made only of ``dict``,
``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``. Storing the copy (never the
caller's object) is what makes "mutating your object after publishing changes nothing" true.

Decisions, so that nothing is silently lost:

- Object keys must be ``str``. ``json.dumps`` would turn ``1`` into ``"1"`` and ``True`` into
  ``"true"``; two different keys could then collide, so non-string keys are rejected.
- ``float`` NaN and infinities are rejected (not valid JSON).
- Tuples are accepted and become lists, exactly as ``json.dumps`` writes them. Sets, bytes and
  other objects are rejected.
- Subclasses of ``str``/``int``/``float`` (for example ``StrEnum`` or ``IntEnum`` members) are
  stored as the plain base value they hold, again as ``json.dumps`` writes them.
- Cycles are rejected, and so is nesting deeper than :data:`MAX_DEPTH`.

Reading JSON off the wire is as strict (:data:`STRICT_JSON`): no ``NaN`` or ``Infinity``, no
number a double cannot hold.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from math import inf as _inf
from math import isfinite as _isfinite
from typing import Any, Final, TypeAlias

from ._errors import MetaValueError

__all__ = [
    "INT_LIMIT",
    "MAX_DEPTH",
    "PLAIN_DEPTH",
    "STRICT_JSON",
    "JsonObject",
    "JsonValue",
    "NumberOverflowError",
    "int_fits",
    "is_plain_json",
    "json_copy",
    "json_object_copy",
    "nesting_depth",
    "reject_json_constant",
]

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
"""A JSON value as agent_meta stores it."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object as agent_meta stores it."""

MAX_DEPTH: Final = 256
"""Deepest nesting accepted (objects and arrays), far beyond any real metadata."""

_INT_DIGITS: Final = sys.get_int_max_str_digits()
INT_LIMIT: Final = 10**_INT_DIGITS if _INT_DIGITS else None
"""Integers must be smaller than this in magnitude: Python refuses to write longer ones as text
(``sys.get_int_max_str_digits()``, read at import), so they could never be sent."""
_INT_BOUND: Final[float] = _inf if INT_LIMIT is None else INT_LIMIT
""":data:`INT_LIMIT`, with no limit as an infinite one: one comparison on every path."""
_INT_FLOOR: Final[float] = -_INT_BOUND
"""Its negation, computed once: negating a 4,300-digit integer copies it (about 600
instructions), and every integer published is checked against both."""


class NumberOverflowError(ValueError):
    """A JSON number that no double can hold (``1e400``)."""


def reject_json_constant(name: str) -> Any:
    """``parse_constant`` for a JSON decoder: ``NaN``, ``Infinity`` and ``-Infinity`` are not
    JSON."""
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not _isfinite(value):
        raise NumberOverflowError(f"{text} overflows a JSON number")
    return value


STRICT_JSON: Final = json.JSONDecoder(
    parse_constant=reject_json_constant, parse_float=_finite_float
)
"""JSON as the wire allows it: no ``NaN`` or ``Infinity``, no number a double cannot hold
(:class:`NumberOverflowError`); both are a ``ValueError``. Built once: ``json.loads`` with
options builds a decoder per call. It imports nothing heavy, so the client-side tools decode
with it too."""


def nesting_depth(value: object) -> int:
    """How deeply ``value`` (a JSON copy: no cycles) nests objects and arrays; a scalar is 0."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def int_fits(value: int) -> bool:
    """Whether ``value`` can be written as JSON text (see :data:`INT_LIMIT`)."""
    return _INT_FLOOR < value < _INT_BOUND


def _checked_int(value: int) -> int:
    if not int_fits(value):
        raise _InvalidError(f"an integer of more than {_INT_DIGITS} digits cannot be sent as JSON")
    return value


PLAIN_DEPTH: Final = 32
"""The deepest nesting :func:`is_plain_json` accepts; deeper values (and cycles) are copied."""


def is_plain_json(value: object) -> bool:
    """Whether ``value`` is JSON built only of the exact built-in types, nested at most
    :data:`PLAIN_DEPTH` deep: ``dict`` with ``str`` keys, ``list``, ``str``, ``int`` that fits,
    finite ``float``, ``bool`` and ``None``.

    For such a value :func:`json_copy` would return an equal value, so it can be encoded as
    it is, without the copy. ``False`` says nothing is wrong, only that the value needs
    :func:`json_copy` (which also reports what is wrong, if anything). Keeping no record of the
    containers seen is what makes this fast; the low depth bound is what keeps a cycle cheap
    (it is walked ``PLAIN_DEPTH`` times before ``json_copy`` reports it).
    """
    kind = type(value)
    if kind is dict or kind is list:
        return _plain_container(value, 0)  # type: ignore[arg-type]  # exact type checked above
    return _plain_scalar(value)


def _plain_scalar(value: object) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return int_fits(value)  # type: ignore[arg-type]  # exact type checked above
    if kind is float:
        return _isfinite(value)  # type: ignore[arg-type]  # exact type checked above
    return False


def _plain_container(value: dict[object, object] | list[object], depth: int) -> bool:
    if depth >= PLAIN_DEPTH:
        return False
    items: Iterable[object] = value
    if type(value) is dict:
        for key in value:  # the keys, checked inline: no call on the send path
            if type(key) is not str:
                return False
        items = value.values()
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue  # the common scalars, checked inline
        if kind is int:  # and integers (a counter, a step): no call for them either
            if _INT_FLOOR < item < _INT_BOUND:  # type: ignore[operator]  # an int
                continue
            return False
        if not _plain_item(item, depth):
            return False
    return True


def _plain_item(item: object, depth: int) -> bool:
    """An item of a container, other than the common scalars: an int, a float, a container."""
    kind = type(item)
    if kind is int:
        return _INT_FLOOR < item < _INT_BOUND  # type: ignore[operator]  # an int
    if kind is dict or kind is list:
        return _plain_container(item, depth + 1)  # type: ignore[arg-type]  # exact type
    return _plain_scalar(item)


class _InvalidError(Exception):
    """Internal: carries the reason and the path (innermost step first) while unwinding."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.steps: list[str] = []


def json_copy(value: object, *, path: str = "value") -> JsonValue:
    """Return a JSON copy of ``value``, or raise :class:`MetaValueError` naming the bad spot.

    ``path`` is the name the error message starts from, e.g. ``_meta``.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None or (kind is int and int_fits(value)):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]  # narrowed by the exact type checks
    try:
        return _copy(value, set(), 0)
    except _InvalidError as exc:
        raise MetaValueError(exc.reason, path=path + "".join(reversed(exc.steps))) from None


def json_object_copy(value: object, *, path: str = "value") -> JsonObject:
    """Like :func:`json_copy`, but the value must be a JSON object (a mapping)."""
    if not isinstance(value, Mapping):
        raise MetaValueError(f"expected an object (a mapping), got {_kind(value)}", path=path)
    copied = json_copy(value, path=path)
    assert isinstance(copied, dict)
    return copied


# The hot path: exact ``str``/``int``/``bool``/``None`` and finite ``float`` values are copied
# inline by the container loops below; everything else goes through ``_copy``.


def _copy(value: object, active: set[int], depth: int) -> JsonValue:
    kind = type(value)
    if value is None or kind is str or kind is bool:
        return value  # type: ignore[return-value]  # narrowed by the exact type checks
    if kind is int:
        return _checked_int(value)  # type: ignore[arg-type]  # exact type checked above
    if kind is dict:
        return _copy_object(value, active, depth)  # type: ignore[arg-type]  # exact type
    if kind is float:
        return _checked_float(value)  # type: ignore[arg-type]  # exact type checked above
    if kind is list or kind is tuple:
        return _copy_array(value, active, depth)  # type: ignore[arg-type]  # exact type
    return _copy_converted(value, active, depth)


def _copy_converted(value: object, active: set[int], depth: int) -> JsonValue:
    """Other mappings, and subclasses of the JSON scalars (a ``StrEnum`` member, say), stored
    as the plain value ``json.dumps`` would write."""
    if isinstance(value, Mapping):
        return _copy_object(value, active, depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed: its exact type is handled above
        return _checked_int(int.__int__(value))
    if isinstance(value, float):
        return _checked_float(float.__float__(value))
    raise _InvalidError(f"{_kind(value)} is not a JSON value")


def _checked_float(value: float) -> float:
    if not _isfinite(value):
        raise _InvalidError(f"{value!r} is not a JSON number")
    return value


def _enter(container: object, active: set[int], depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise _InvalidError(f"nested deeper than {MAX_DEPTH} levels")
    ident = id(container)
    if ident in active:
        raise _InvalidError("the value contains itself (a cycle)")
    active.add(ident)
    return ident


def _copy_object(value: Mapping[object, object], active: set[int], depth: int) -> JsonObject:
    ident = _enter(value, active, depth)
    result: JsonObject = {}
    inner = depth + 1
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise _InvalidError(f"object key {key!r} is of type {type(key).__name__}, not str")
            key = str.__str__(key)
        kind = type(item)
        if kind is str or item is None or kind is bool or (kind is int and int_fits(item)):  # type: ignore[arg-type]
            result[key] = item  # type: ignore[assignment]  # narrowed by the exact type checks
            continue
        try:
            result[key] = _copy(item, active, inner)
        except _InvalidError as exc:
            exc.steps.append(f"[{key!r}]")
            raise
    active.discard(ident)
    return result


def _copy_array(
    value: list[object] | tuple[object, ...], active: set[int], depth: int
) -> JsonValue:
    ident = _enter(value, active, depth)
    result: list[JsonValue] = []
    append = result.append
    inner = depth + 1
    for index, item in enumerate(value):
        kind = type(item)
        if kind is str or item is None or kind is bool or (kind is int and int_fits(item)):  # type: ignore[arg-type]
            append(item)  # type: ignore[arg-type]  # narrowed by the exact type checks
            continue
        try:
            append(_copy(item, active, inner))
        except _InvalidError as exc:
            exc.steps.append(f"[{index}]")
            raise
    active.discard(ident)
    return result


def _kind(value: object) -> str:
    return f"a value of type {type(value).__name__}"
