"""The shallow-patch rule of the ACP "v2 Metadata Patches" RFD, and its composition.

Pure functions, no I/O. For the top-level ``_meta`` of an upsert:

=============  ==================================================================
update         effect on the stored metadata
=============  ==================================================================
``OMITTED``    unchanged
``None``       cleared (no metadata)
mapping        per top-level key: an omitted key is unchanged, ``None`` removes the
               key, any other value replaces the key's value whole (no nested merge;
               a ``None`` nested inside a value is ordinary data)
=============  ==================================================================

Stored metadata with no keys is the same as no metadata, so results are ``None``, never ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from ._errors import MetaValueError
from ._json import JsonObject, json_copy, json_object_copy
from ._sentinel import OMITTED, Omitted

__all__ = [
    "CheckedMetaPatch",
    "MetaPatch",
    "apply_meta_patch",
    "compose_meta_patches",
    "fold_meta_patches",
    "replacement_patch",
]

MetaPatch: TypeAlias = "Omitted | None | Mapping[str, object]"
"""What a caller may pass as a ``_meta`` update: absent, a clear, or a patch object."""

CheckedMetaPatch: TypeAlias = "Omitted | None | JsonObject"
"""A validated ``_meta`` update: absent, a clear, or a patch object of JSON copies."""


def check_meta_patch(update: object, *, path: str = "_meta") -> CheckedMetaPatch:
    """Validate an update and return it as a :data:`CheckedMetaPatch` (values are JSON copies)."""
    if update is OMITTED or update is None:
        return update
    if not isinstance(update, Mapping):
        raise MetaValueError(
            f"a _meta update must be OMITTED, None or a mapping, not a {type(update).__name__}",
            path=path,
        )
    return json_object_copy(update, path=path)


def check_stored_meta(stored: object, *, path: str = "stored") -> JsonObject:
    """Validate stored metadata (``None`` or a mapping); return a JSON copy without null keys."""
    if stored is None:
        return {}
    if not isinstance(stored, Mapping):
        raise MetaValueError(
            f"stored metadata must be None or a mapping, not a {type(stored).__name__}", path=path
        )
    copied = json_object_copy(stored, path=path)
    # A null key never holds stored data (RFD): a literal null (say, from v1) counts as absent.
    return {key: value for key, value in copied.items() if value is not None}


def patch_in_place(target: JsonObject, patch: JsonObject) -> None:
    """Apply a validated patch object to ``target`` in place (the shallow rule, no checks)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def apply_meta_patch(stored: Mapping[str, object] | None, update: MetaPatch) -> JsonObject | None:
    """Apply one ``_meta`` update to stored metadata; return the new metadata or ``None``.

    Neither argument is mutated. The result shares nothing mutable with either argument. Bad
    input raises :class:`~agent_meta.MetaValueError` naming the path of the offending value.

    >>> apply_meta_patch({"a": 1, "b": 2}, {"a": None, "c": {"x": None}})
    {'b': 2, 'c': {'x': None}}
    """
    patch = check_meta_patch(update)
    result = check_stored_meta(stored)
    if patch is None:
        return None
    if patch is not OMITTED:
        patch_in_place(result, patch)
    return result or None


def fold_meta_patches(
    stored: Mapping[str, object] | None, updates: Sequence[MetaPatch]
) -> JsonObject | None:
    """Apply several updates in order (what a client holds after receiving them all)."""
    patches = [check_meta_patch(update, path=f"updates[{i}]") for i, update in enumerate(updates)]
    result = check_stored_meta(stored)
    for patch in patches:
        if patch is None:
            result = {}
        elif patch is not OMITTED:
            patch_in_place(result, patch)
    return result or None


def compose_meta_patches(first: MetaPatch, second: MetaPatch) -> list[CheckedMetaPatch]:
    """Combine two consecutive updates into the shortest equivalent list (one or two).

    "Equivalent" holds for every stored state, including keys the composer has never seen:

    - an omitted side contributes nothing;
    - a clear makes everything before it irrelevant;
    - two objects merge key by key, the later value (or removal) winning, so removals stay;
    - a clear followed by an object stays two updates: the object alone would leave stale keys.
    """
    a = check_meta_patch(first, path="first")
    b = check_meta_patch(second, path="second")
    if b is OMITTED:
        return [a]
    if a is OMITTED or b is None:
        return [b]
    if a is None:
        # After a clear, removals change nothing; keep the object only if it stores something.
        kept: JsonObject = {key: value for key, value in b.items() if value is not None}
        return [None, kept] if kept else [None]
    merged = dict(a)
    merged.update(b)
    return [merged]


def replacement_patch(
    stored: Mapping[str, object] | None, whole: Mapping[str, object] | None
) -> JsonObject:
    """The shallow patch that turns ``stored`` into ``whole`` (both stored metadata, ``None``
    for none): every key of ``whole`` whose value differs, and ``None`` for every stored key
    that ``whole`` lacks. ``{}`` when they are equal. A key set to ``None`` in either counts as
    absent. Neither argument is mutated; the values are JSON copies.

    For a writer that sends whole objects where the reader patches (a v1 agent that sends its
    complete ``_meta`` each time, under an owner that keeps the shallow-patch rule).

    >>> replacement_patch({"a": 1, "b": 2}, {"b": 3, "c": 4})
    {'a': None, 'b': 3, 'c': 4}
    """
    before = check_stored_meta(stored, path="stored")
    after = check_stored_meta(whole, path="whole")
    patch: JsonObject = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before or not same_json(before[key], value):
            patch[key] = value
    return patch


def same_json(a: object, b: object) -> bool:
    """Whether two JSON values are the same value (``1``, ``1.0`` and ``true`` are three;
    object key order does not matter)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same_json(a[key], b[key]) for key in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(map(same_json, a, b))
    return a == b


def copy_meta(meta: Mapping[str, object] | None) -> JsonObject | None:
    """A JSON copy of stored metadata, ``None`` when there is none."""
    if meta is None:
        return None
    copied = json_copy(meta, path="_meta")
    assert isinstance(copied, dict)
    return copied or None
