"""The ``session_info_update`` frames of the send queue, by wire mode (R4, R9, R10).

The owner renders ``session/update`` frames by joining pre-encoded fragments instead of dumping
a model per frame: each metadata value is encoded once, when it is published
(:func:`~agent_meta.sansio._encode.encode_update`), and the same text is reused for every frame
and resync that carries it. ``tests/test_frames.py`` checks that these frames parse to exactly
what the pydantic wire models produce. The queue (``_queue``, the expressed publication) and its
renderer (``_render``) are the only callers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._json_text import NULL, fragment

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._encode import EncodedUpdate
    from .._modes import WireMode
    from ._state import LifetimeState

__all__ = [
    "clear_frame",
    "info_frame",
    "info_frames",
    "patch_text",
    "publication_frame",
    "snapshot_frame",
]


def info_frame(
    prefix: str,
    title: str | None,
    updated_at: str | None,
    meta: str | None,
    notification_meta: str | None,
) -> bytes:
    """One ``session_info_update`` frame; each argument is JSON text, or ``None`` to omit it."""
    text = prefix
    if title is not None:
        text += ',"title":' + title
    if updated_at is not None:
        text += ',"updatedAt":' + updated_at
    if meta is not None:
        text += ',"_meta":' + meta
    if notification_meta is not None:
        text += '},"_meta":' + notification_meta + "}}\n"
    else:
        text += "}}}\n"
    return text.encode("ascii")


def patch_text(patch: Mapping[str, str | None]) -> str:
    """A patch object's text: each member's fragment, ``"key":null`` for a removal."""
    members = patch.values()
    if None not in members:  # no removal: the fragments are the members
        return "{" + ",".join(members) + "}"  # type: ignore[arg-type]  # no None, checked
    texts = [frag if frag is not None else fragment(key, NULL) for key, frag in patch.items()]
    return "{" + ",".join(texts) + "}"


def info_frames(
    mode: WireMode,
    state: LifetimeState,
    title: str | None,
    updated_at: str | None,
    cleared: bool,
    patch: Mapping[str, str | None] | None,
    notification_meta: str | None,
) -> list[bytes]:
    """The frames of a publication (or merged publications), in normal form.

    Called after the known state has the publication folded in: in a full-object mode every
    frame carries the whole known ``_meta``, as v1 cannot express a clear or a removal.
    A clear followed by members is two frames: ``_meta: null``, then the object (R3).
    """
    prefix = state.prefix
    if mode.full_object:  # a snapshot: what the agent holds now, with this frame's trace
        whole = state.meta_text() or "{}"
        return [info_frame(prefix, state.title, state.updated_at, whole, notification_meta)]
    if not cleared:
        meta = None if patch is None else patch_text(patch)
        return [info_frame(prefix, title, updated_at, meta, notification_meta)]
    frames = [info_frame(prefix, title, updated_at, NULL, notification_meta)]
    if patch:
        frames.append(info_frame(prefix, None, None, patch_text(patch), None))
    return frames


def publication_frame(mode: WireMode, state: LifetimeState, update: EncodedUpdate) -> bytes:
    """The frame of one publication that is one frame (anything but a clear followed by
    members, outside a full-object mode), after it is folded into ``state``: the frame
    :func:`info_frames` renders for it, the common one (a patch, a title) built directly."""
    patch = update.meta_patch
    if mode.full_object or update.meta_clear:
        frames = info_frames(
            mode,
            state,
            update.title,
            update.updated_at,
            update.meta_clear,
            patch,
            update.notification_meta,
        )
        return frames[0]
    meta = None if patch is None else patch_text(patch)
    return info_frame(state.prefix, update.title, update.updated_at, meta, update.notification_meta)


def clear_frame(state: LifetimeState) -> bytes:
    """The first frame of a v2 resync: ``_meta: null`` (R4)."""
    return info_frame(state.prefix, None, None, NULL, None)


def snapshot_frame(mode: WireMode, state: LifetimeState) -> bytes:
    """The known state of a lifetime as one frame: the second frame of a v2 resync, or the
    whole v1 resync (``{}`` when nothing is known, as v1 cannot express a clear)."""
    meta = state.meta_text()
    if mode.full_object and meta is None:
        meta = "{}"
    return info_frame(state.prefix, state.title, state.updated_at, meta, None)
