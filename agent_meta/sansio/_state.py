"""Pure per-lifetime session-info state: what the agent knows, held as encoded JSON text.

A :class:`LifetimeState` is the agent's *known* session info for one session lifetime:
``title`` / ``updatedAt`` (each unknown until published or seeded) and ``_meta``, plus the
current failure incident and the flags the send queue needs (closed, needs repair). No I/O.

Known values are stored as the JSON text that goes on the wire (one ``"key":value`` fragment
per top-level metadata key). Each value is therefore encoded once, when published, and a
snapshot is a fresh JSON copy by construction. Updates are validated and encoded by
:func:`encode_update` before anything changes, so bad input changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from ..core._errors import MetaPathError, MetaValueError
from ..core._json import JsonObject, JsonValue, is_plain_json, json_copy, json_object_copy
from ..core._sentinel import OMITTED, Omitted
from ..core._session_info import SessionInfo
from ..core._timestamps import is_rfc3339
from ._frames import NULL, encode_json, fragment, object_text, session_prefix

__all__ = [
    "NO_CHANGE",
    "EncodedUpdate",
    "FailureIncident",
    "LifetimeState",
    "encode_update",
    "member_size",
]


@dataclasses.dataclass(frozen=True, slots=True)
class FailureIncident:
    """The failure incident a lifetime currently shows: its id and revision."""

    incident_id: str
    revision: int


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


def _encode_text(value: object, name: str) -> str | None:
    if value is OMITTED:
        return None
    if value is None:
        return NULL
    if isinstance(value, str):
        return encode_json(str.__str__(value))
    raise MetaValueError(f"must be OMITTED, None or a str, not a {type(value).__name__}", path=name)


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
        if is_plain_json(value):
            text = encode_json(value)
        else:
            text = encode_json(json_copy(value, path=f"{path}[{key!r}]"))
        frag = encode_json(key) + ":" + text
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
    protocol_version: int = 2,
) -> EncodedUpdate:
    """Validate the arguments of a publication and encode them; raise before changing anything."""
    title_text = _encode_text(title, "title")
    updated_text = _encode_text(updated_at, "updated_at")
    if protocol_version >= 2 and isinstance(updated_at, str) and not is_rfc3339(updated_at):
        raise MetaValueError(
            f"{updated_at!r} is not an RFC 3339 date-time with an offset (ACP v2 clients drop it)",
            path="updated_at",
        )
    meta_clear = False
    meta_patch: dict[str, str | None] | None = None
    patch_size = 0
    if meta is None:
        meta_clear = True
    elif meta is not OMITTED:
        if type(meta) is not dict and not isinstance(meta, Mapping):
            raise MetaValueError(
                f"must be OMITTED, None or a mapping, not a {type(meta).__name__}", path="meta"
            )
        meta_patch, patch_size = encode_meta_patch(meta)
    nm_text: str | None = None
    if notification_meta is not None:
        nm_text = encode_json(json_object_copy(notification_meta, path="notification_meta"))
    return EncodedUpdate(title_text, updated_text, meta_clear, meta_patch, nm_text, patch_size)


class LifetimeState:
    """The known session info of one session lifetime (pure; mutated only by the send queue)."""

    __slots__ = (
        "closed",
        "failure",
        "fragments",
        "meta_size",
        "needs_repair",
        "open_entry",
        "prefix",
        "resync_entry",
        "session_id",
        "title",
        "updated_at",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.prefix = session_prefix(session_id)
        self.title: str | None = None  # JSON text; None = unknown
        self.updated_at: str | None = None
        self.fragments: dict[str, str] = {}
        self.meta_size = 0  # total length of the fragments
        self.failure: FailureIncident | None = None
        self.closed = False
        self.needs_repair = False
        # Bookkeeping of the send queue (opaque here).
        self.open_entry: object | None = None
        self.resync_entry: object | None = None

    # -- reading -------------------------------------------------------------------------
    def meta_text(self) -> str | None:
        """The known ``_meta`` as JSON text, ``None`` when there is none."""
        if not self.fragments:
            return None
        return object_text(self.fragments.values())

    def meta_value(self, key: str) -> JsonValue | Omitted:
        """A fresh copy of the known value under top-level ``key``, or ``OMITTED``."""
        frag = self.fragments.get(key)
        if frag is None:
            return OMITTED
        decoded: JsonObject = json.loads("{" + frag + "}")
        return decoded[key]

    def snapshot(self) -> SessionInfo:
        """A JSON copy of the known state (unknown fields are ``OMITTED``)."""
        text = self.meta_text()
        return SessionInfo(
            title=OMITTED if self.title is None else json.loads(self.title),
            updated_at=OMITTED if self.updated_at is None else json.loads(self.updated_at),
            meta=None if text is None else json.loads(text),
        )

    def is_empty(self) -> bool:
        """True when nothing is known: a resync then sends only the clear."""
        return self.title is None and self.updated_at is None and not self.fragments

    def snapshot_size(self) -> int:
        """An upper bound on the byte size of this lifetime's snapshot frame."""
        return self._frame_size(self.title, self.updated_at, self.meta_size, len(self.fragments))

    def _frame_size(
        self, title: str | None, updated_at: str | None, meta_size: int, count: int
    ) -> int:
        size = len(self.prefix) + 64  # closing braces, field names, newline
        if title is not None:
            size += len(title)
        if updated_at is not None:
            size += len(updated_at)
        return size + meta_size + count

    # -- changing ------------------------------------------------------------------------
    def size_after(self, update: EncodedUpdate) -> int:
        """The snapshot size this lifetime would have after ``update`` (nothing changes)."""
        meta_size = 0 if update.meta_clear else self.meta_size
        count = 0 if update.meta_clear else len(self.fragments)
        if update.meta_patch:
            for key, frag in update.meta_patch.items():
                old = None if update.meta_clear else self.fragments.get(key)
                if old is not None:
                    meta_size -= len(old)
                    count -= 1
                if frag is not None:
                    meta_size += len(frag)
                    count += 1
        title = self.title if update.title is None else update.title
        updated_at = self.updated_at if update.updated_at is None else update.updated_at
        return self._frame_size(title, updated_at, meta_size, count)

    def apply(self, update: EncodedUpdate) -> None:
        """Fold one validated update into the known state (the RFD rule)."""
        if update.title is not None:
            self.title = update.title
        if update.updated_at is not None:
            self.updated_at = update.updated_at
        if update.meta_clear:
            self.fragments = {}
            self.meta_size = 0
        if update.meta_patch:
            fragments = self.fragments
            for key, frag in update.meta_patch.items():
                old = fragments.pop(key, None)
                if old is not None:
                    self.meta_size -= len(old)
                if frag is not None:
                    fragments[key] = frag
                    self.meta_size += len(frag)


def check_path(path: Sequence[str], what: str = "path") -> tuple[str, ...]:
    """Validate a domain path: a sequence of ``str`` keys (a bare ``str`` is refused)."""
    if isinstance(path, str):
        raise MetaPathError(
            f"must be a sequence of keys, not the string {path!r} (use [{path!r}] or split it)",
            path=what,
        )
    steps = tuple(path)
    for index, step in enumerate(steps):
        if not isinstance(step, str):
            raise MetaPathError(f"step {index} is a {type(step).__name__}, not a str", path=what)
    return steps


def edit_domain(
    current: JsonValue | Omitted,
    key: str,
    path: tuple[str, ...],
    value: JsonValue | Omitted,
    *,
    prune: bool = False,
) -> JsonValue | None | Omitted:
    """Compute the new whole value of top-level ``key`` after a set or a removal at ``path``.

    ``current`` is a fresh copy (it is modified). ``value`` is ``OMITTED`` for a removal.
    Returns the new value, ``None`` to remove the key, or ``OMITTED`` when nothing changes.
    With ``prune``, objects emptied by a removal are removed too, up to the key itself.
    """
    where = f"_meta[{key!r}]"
    if not path:
        if value is OMITTED:
            return OMITTED if current is OMITTED else None
        return value
    if value is OMITTED:
        return _remove_at(current, path, prune)
    if current is OMITTED:
        root: JsonObject = {}
    elif isinstance(current, dict):
        root = current
    else:
        raise MetaPathError(f"holds a {type(current).__name__}, not an object", path=where)
    node = root
    for step in path[:-1]:
        where += f"[{step!r}]"
        child = node.get(step)
        if child is None and step not in node:
            child = {}
            node[step] = child
        if not isinstance(child, dict):
            raise MetaPathError(f"holds a {type(child).__name__}, not an object", path=where)
        node = child
    node[path[-1]] = value
    return root


def _remove_at(
    current: JsonValue | Omitted, path: tuple[str, ...], prune: bool
) -> JsonValue | None | Omitted:
    if not isinstance(current, dict):
        return OMITTED
    chain: list[JsonObject] = [current]
    node: JsonObject = current
    for step in path[:-1]:
        child = node.get(step)
        if not isinstance(child, dict):
            return OMITTED
        chain.append(child)
        node = child
    if path[-1] not in node:
        return OMITTED
    del node[path[-1]]
    if prune:
        for depth in range(len(chain) - 1, 0, -1):
            if chain[depth]:
                break
            del chain[depth - 1][path[depth - 1]]
        if not current:
            return None
    return current
