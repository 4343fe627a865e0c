"""Validating and encoding one publication into wire text, before anything changes.

A publication is checked and encoded once, when it is made: each top-level ``_meta`` member
becomes its ``"key":value`` JSON text, and that text is reused by every frame, merge, resync and
store record that carries it. Bad input raises here, so a refused call changes nothing (R12).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..core._errors import MetaValueError
from ..core._json import (
    MAX_DEPTH,
    int_fits,
    is_plain_json,
    json_copy,
    json_object_copy,
    nesting_depth,
)
from ..core._sentinel import OMITTED
from ..core._timestamps import is_rfc3339, normalize_rfc3339
from ._json_text import NULL, encode_json, encode_str, fragment

__all__ = [
    "META_DEPTH",
    "NO_CHANGE",
    "EncodedUpdate",
    "encode_meta_patch",
    "encode_update",
    "member_size",
    "update_size",
]


def member_size(key: str, frag: str | None) -> int:
    """The bytes one member adds to a patch object (its text and a comma)."""
    if frag is None:
        frag = fragment(key, NULL)  # a removal, "key":null
    return len(frag) + 1


class EncodedUpdate:
    """One validated ``session_info_update``, as wire text.

    ``title`` / ``updated_at``: JSON text, or ``None`` when omitted. ``meta_clear``: the update
    is ``_meta: null``. ``meta_patch``: key -> ``"key":value`` fragment, or ``None`` for a
    removal; ``None`` when ``_meta`` is omitted or cleared. ``patch_size``: the bytes of the
    patch's members, computed once here for every size check that follows.
    """

    __slots__ = (
        "meta_clear",
        "meta_patch",
        "notification_meta",
        "patch_size",
        "title",
        "updated_at",
    )

    def __init__(
        self,
        title: str | None,
        updated_at: str | None,
        meta_clear: bool,
        meta_patch: dict[str, str | None] | None,
        notification_meta: str | None,
        patch_size: int | None = None,
    ) -> None:
        self.title = title
        self.updated_at = updated_at
        self.meta_clear = meta_clear
        self.meta_patch = meta_patch
        self.notification_meta = notification_meta
        if patch_size is None:
            patch_size = 0
            if meta_patch:
                for key, frag in meta_patch.items():
                    patch_size += member_size(key, frag)
        self.patch_size = patch_size


NO_CHANGE = EncodedUpdate(None, None, False, None, None)
"""An update that changes nothing (what a refused call on an ended lifetime counts as)."""


def update_size(update: EncodedUpdate) -> int:
    """The bytes ``update``'s fields add to its own frame, and at most to the known state (a
    new member also adds a comma, which ``patch_size`` counts): what
    :func:`~agent_meta.sansio.queue._state.headroom` adds up."""
    size = update.patch_size
    if update.title is not None:
        size += len(update.title)
    if update.updated_at is not None:
        size += len(update.updated_at)
    return size


def _encode_text(value: object, name: str) -> str | None:
    if value is OMITTED:
        return None
    if value is None:
        return NULL
    if isinstance(value, str):
        return encode_json(str.__str__(value))
    raise MetaValueError(f"must be OMITTED, None or a str, not a {type(value).__name__}", path=name)


META_DEPTH: Final = MAX_DEPTH - 16
"""The deepest a ``_meta`` value may nest: every ACP message that carries it (an update, a
``session/list`` entry, a stored record) wraps it a few levels deeper, and a receiver refuses a
line nested deeper than :data:`~agent_meta.core._json.MAX_DEPTH`. So a value that could be sent
once can be sent in every frame that will carry it later (R12)."""


def _meta_value(value: object, path: str) -> object:
    copied = json_copy(value, path=path)
    if nesting_depth(copied) > META_DEPTH:
        raise MetaValueError(
            f"nested deeper than {META_DEPTH} levels: the messages that carry _meta values "
            f"(session/update, session/list) would pass the {MAX_DEPTH}-level limit",
            path=path,
        )
    return copied


def encode_meta_patch(
    meta: Mapping[object, object], path: str = "meta"
) -> tuple[dict[str, str | None], int]:
    """Validate a ``_meta`` patch object and encode each member; also return its
    ``patch_size`` (see :class:`EncodedUpdate`).

    A plain value (:func:`~agent_meta._json.is_plain_json`) is encoded as it is; any other is
    copied by ``json_copy`` first, which converts what it accepts and names what it refuses.
    """
    patch: dict[str, str | None] = {}
    size = 0
    converted = False
    for key, value in meta.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise MetaValueError(
                    f"object key {key!r} is of type {type(key).__name__}, not str", path=path
                )
            key = str.__str__(key)
            converted = True  # may now equal another key: the later member wins
        if value is None:
            patch[key] = None
            size += member_size(key, None)
            continue
        kind = type(value)
        if kind is str:  # the common scalars first, without the general walk
            text = encode_str(value)  # type: ignore[arg-type]  # exact type checked above
        elif kind is int and int_fits(value):  # type: ignore[arg-type]  # exact type checked
            text = int.__repr__(value)
        elif is_plain_json(value):  # nested at most PLAIN_DEPTH: within META_DEPTH
            text = encode_json(value)
        else:
            text = encode_json(_meta_value(value, f"{path}[{key!r}]"))
        frag = encode_str(key) + ":" + text
        patch[key] = frag
        size += len(frag) + 1
    if converted:
        size = 0
        for key, member in patch.items():
            size += member_size(key, member)
    return patch, size


def encode_update(
    *,
    title: object = OMITTED,
    updated_at: object = OMITTED,
    meta: object = OMITTED,
    notification_meta: object = None,
    offset_timestamps: bool = True,
) -> EncodedUpdate:
    """Validate the arguments of a publication and encode them; raise before changing anything.

    With ``offset_timestamps`` (ACP v2, see :class:`~agent_meta.sansio._modes.WireMode`) an
    ``updated_at`` must be RFC 3339 with an offset. Any RFC 3339 date-time is written in its
    uppercase form (:func:`~agent_meta.core._timestamps.normalize_rfc3339`).
    """
    title_text = None if title is OMITTED else _encode_text(title, "title")
    if updated_at is OMITTED:
        updated_text = None
    elif isinstance(updated_at, str):
        if offset_timestamps and not is_rfc3339(updated_at):
            raise MetaValueError(
                f"{updated_at!r} is not an RFC 3339 date-time with an offset "
                "(ACP v2 clients drop it)",
                path="updated_at",
            )
        updated_text = encode_str(normalize_rfc3339(str.__str__(updated_at)))
    else:
        updated_text = _encode_text(updated_at, "updated_at")
    meta_clear = False
    meta_patch: dict[str, str | None] | None = None
    patch_size = 0
    if meta is None:
        meta_clear = True
    elif meta is not OMITTED:
        if type(meta) is not dict and not isinstance(meta, Mapping):  # a dict: the common case
            raise MetaValueError(
                f"must be OMITTED, None or a mapping, not a {type(meta).__name__}", path="meta"
            )
        meta_patch, patch_size = encode_meta_patch(meta)
    nm_text: str | None = None
    if notification_meta is not None:
        nm_text = encode_json(json_object_copy(notification_meta, path="notification_meta"))
    return EncodedUpdate(title_text, updated_text, meta_clear, meta_patch, nm_text, patch_size)
