"""The AG-UI consumer rule for ``metadata``, kept apart from the ACP rule on purpose.

AG-UI accumulates the metadata of the events that build one item key by key, last write
winning, with no recursion. Unlike ACP, a ``null`` under a key is *data* (kept), and a ``null``
metadata object is invalid. The two rules agree on everything except ``null``, which is why
converting AG-UI metadata into an ACP patch is lossy: see :func:`agui_metadata_to_meta_patch`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ._errors import MetaValueError
from ._json import JsonObject, json_object_copy
from ._sentinel import OMITTED, Omitted

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["AguiConversion", "agui_metadata_to_meta_patch", "merge_agui_metadata"]


def merge_agui_metadata(
    stored: Mapping[str, object] | None, incoming: Mapping[str, object] | None | Omitted
) -> JsonObject | None:
    """Merge one event's ``metadata`` into an item's accumulated metadata (AG-UI rule).

    ``stored`` is ``None`` when the item has no metadata yet. ``incoming`` is ``OMITTED`` when
    the event carries none. Returns a new object (``None`` only if there was never any); a
    ``null`` under a key is stored as data. ``incoming=None`` (a ``null`` metadata object) is
    invalid in AG-UI and raises :class:`~agent_meta.MetaValueError`.
    """
    if incoming is None:
        raise MetaValueError(
            "AG-UI metadata must be an object or absent, never null", path="metadata"
        )
    base = None if stored is None else json_object_copy(stored, path="stored")
    if incoming is OMITTED:
        return base
    update = json_object_copy(incoming, path="metadata")
    result = base if base is not None else {}
    result.update(update)
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class AguiConversion:
    """An ACP ``_meta`` patch made from AG-UI metadata, and what it could not carry."""

    patch: JsonObject
    """The keys whose values survive as an ACP patch (never a ``null`` value)."""

    lost_null_keys: tuple[str, ...]
    """Keys that held ``null`` as data in AG-UI; ACP would read ``null`` as a removal."""


def agui_metadata_to_meta_patch(metadata: Mapping[str, object]) -> AguiConversion:
    """Convert accumulated AG-UI metadata into an ACP ``_meta`` patch, saying what is lost.

    AG-UI stores ``null`` under a key; the same ``null`` in an ACP patch removes the key. Those
    keys are left out of the patch and listed in :attr:`AguiConversion.lost_null_keys`, so the
    caller decides (send ``false``, a wrapper value, or accept the loss) instead of silently
    turning data into removals.
    """
    copied = json_object_copy(metadata, path="metadata")
    patch: JsonObject = {key: value for key, value in copied.items() if value is not None}
    lost = tuple(key for key, value in copied.items() if value is None)
    return AguiConversion(patch=patch, lost_null_keys=lost)
