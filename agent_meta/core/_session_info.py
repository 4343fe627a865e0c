"""The three-state rule for a whole ``session_info_update`` (``title``, ``updatedAt``, ``_meta``).

:class:`SessionInfoPatch` is one update as sent; :class:`SessionInfo` is what a receiver holds
after applying updates. Both are immutable values; the functions here are pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ._errors import MetaValueError
from ._patch import CheckedMetaPatch, MetaPatch, check_meta_patch, copy_meta, patch_in_place
from ._sentinel import OMITTED, Omitted

if TYPE_CHECKING:
    from ._json import JsonObject

__all__ = [
    "SessionInfo",
    "SessionInfoPatch",
    "apply_session_info_patch",
    "compose_session_info_patches",
]


def _check_text(value: object, name: str) -> str | None | Omitted:
    if value is OMITTED or value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    raise MetaValueError(f"must be OMITTED, None or a str, not a {type(value).__name__}", path=name)


@dataclasses.dataclass(frozen=True, slots=True, init=False)
class SessionInfoPatch:
    """One ``session_info_update``: each field is ``OMITTED`` (unchanged), ``None`` or a value.

    ``meta`` holds a validated JSON copy of what was given; treat it as read-only.
    """

    title: str | None | Omitted
    updated_at: str | None | Omitted
    meta: CheckedMetaPatch

    def __init__(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: MetaPatch = OMITTED,
    ) -> None:
        object.__setattr__(self, "title", _check_text(title, "title"))
        object.__setattr__(self, "updated_at", _check_text(updated_at, "updated_at"))
        object.__setattr__(self, "meta", check_meta_patch(meta))

    @classmethod
    def _trusted(
        cls, title: str | None | Omitted, updated_at: str | None | Omitted, meta: CheckedMetaPatch
    ) -> SessionInfoPatch:
        patch = object.__new__(cls)
        object.__setattr__(patch, "title", title)
        object.__setattr__(patch, "updated_at", updated_at)
        object.__setattr__(patch, "meta", meta)
        return patch

    @property
    def is_noop(self) -> bool:
        """True when applying this patch can change nothing (all omitted, or ``_meta: {}``)."""
        return (
            self.title is OMITTED
            and self.updated_at is OMITTED
            and (self.meta is OMITTED or self.meta == {})
        )


@dataclasses.dataclass(frozen=True, slots=True, init=False)
class SessionInfo:
    """Session info as a receiver holds it.

    ``title`` and ``updated_at`` are ``OMITTED`` until an update mentions them ("never told"),
    then ``None`` or a string. ``meta`` is ``None`` when there is no metadata, never ``{}``.
    """

    title: str | None | Omitted
    updated_at: str | None | Omitted
    meta: JsonObject | None

    def __init__(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None = None,
    ) -> None:
        if meta is not None and not isinstance(meta, Mapping):
            raise MetaValueError(
                f"must be None or a mapping, not a {type(meta).__name__}", path="meta"
            )
        object.__setattr__(self, "title", _check_text(title, "title"))
        object.__setattr__(self, "updated_at", _check_text(updated_at, "updated_at"))
        object.__setattr__(self, "meta", copy_meta(meta))


def apply_session_info_patch(info: SessionInfo, patch: SessionInfoPatch) -> SessionInfo:
    """Return the session info after applying ``patch`` (``info`` is not changed)."""
    title = info.title if patch.title is OMITTED else patch.title
    updated_at = info.updated_at if patch.updated_at is OMITTED else patch.updated_at
    if patch.meta is OMITTED:
        meta = info.meta
    elif patch.meta is None:
        meta = None
    else:
        merged = dict(info.meta or {})
        patch_in_place(merged, patch.meta)
        meta = merged
    return SessionInfo(title=title, updated_at=updated_at, meta=meta)


def compose_session_info_patches(patches: Iterable[SessionInfoPatch]) -> list[SessionInfoPatch]:
    """Reduce consecutive patches to the shortest equivalent list: one patch, or two.

    Two are needed only when a ``_meta`` clear is followed by a ``_meta`` object: the result is
    then ``[clear (with the final title/updatedAt), object]``. Removals are kept. The result is
    equivalent for *every* stored state, including keys the composer never saw. An empty input
    gives an empty list.
    """
    patches = list(patches)
    if not patches:
        return []
    title: str | None | Omitted = OMITTED
    updated_at: str | None | Omitted = OMITTED
    for patch in patches:
        if patch.title is not OMITTED:
            title = patch.title
        if patch.updated_at is not OMITTED:
            updated_at = patch.updated_at
    cleared, merged = _compose_meta(patch.meta for patch in patches)
    if not cleared:
        return [SessionInfoPatch._trusted(title, updated_at, OMITTED if merged is None else merged)]
    first = SessionInfoPatch._trusted(title, updated_at, None)
    # After the clear, removals change nothing; a second patch only if it stores something.
    kept: JsonObject = {key: value for key, value in (merged or {}).items() if value is not None}
    if not kept:
        return [first]
    return [first, SessionInfoPatch._trusted(OMITTED, OMITTED, kept)]


def _compose_meta(
    metas: Iterable[CheckedMetaPatch | None | Omitted],
) -> tuple[bool, JsonObject | None]:
    """Whether any ``_meta`` was cleared, and the object patches merged after the last clear."""
    cleared = False
    merged: JsonObject | None = None
    for meta in metas:
        if meta is None:
            cleared = True
            merged = None
        elif meta is not OMITTED:
            if merged is None:
                merged = dict(meta)
            else:
                merged.update(meta)
    return cleared, merged
