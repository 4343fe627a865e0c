"""What a lifetime store keeps of a lifetime, and how a lifetime is rebuilt from it (pure).

A :class:`StoredLifetime` holds exactly what the owner knows, as the JSON text it sends, so
storing needs no re-encoding and a restored lifetime sends byte-identical frames.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, final

from ...core._errors import FrameTooLargeError, StoreCorruptError
from ...core._timestamps import normalize_rfc3339
from .._json_text import encode_json, fragment

if TYPE_CHECKING:
    from ._state import FailureIncident, LifetimeState

__all__ = ["StoredLifetime", "record_of", "restore_state"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class StoredLifetime:
    """The persisted state of one session lifetime, as the JSON text the owner sends.

    ``title`` / ``updated_at``: JSON text, or ``None`` when unknown. ``meta``: the known
    ``_meta`` as JSON object text, or ``None`` when there is none. ``client_title``: the client
    set ``title`` (R13), so the agent's titles stay off the wire after a restart too.
    """

    session_id: str
    title: str | None = None
    updated_at: str | None = None
    meta: str | None = None
    failure: FailureIncident | None = None
    needs_repair: bool = False
    client_title: bool = False
    epoch: int = 0
    """The fencing epoch the record is written under (a store write is conditional on it; 0:
    the lifetime is not stored yet, and the record is created only if none exists), or, as
    read by a claim, the epoch the claim gave the new holder."""


def record_of(state: LifetimeState) -> StoredLifetime:
    """What to store for ``state``: its JSON text as is, no re-encoding."""
    return StoredLifetime(
        session_id=state.session_id,
        title=state.title,
        updated_at=state.updated_at,
        meta=state.meta_text(),
        failure=state.failure,
        needs_repair=state.books.needs_repair,
        client_title=state.client_title,
        epoch=state.books.epoch,
    )


def restore_state(
    state: LifetimeState,
    record: StoredLifetime,
    location: str,
    max_frame_bytes: int | None = None,
) -> None:
    """Make ``state`` hold the known state ``record`` stored; :class:`StoreCorruptError` if it
    is damaged, :class:`~agent_meta.FrameTooLargeError` if its snapshot would be over
    ``max_frame_bytes``. The queue's bookkeeping of a restored lifetime (its epoch, a repair
    it owes) is the queue's to restore (``SendQueue.open_lifetime``)."""
    fragments = _stored_fragments(record, location)
    state.title = record.title
    state.updated_at = _wire_timestamp(record.updated_at)
    state.fragments = fragments
    state.meta_size = sum(len(text) for text in fragments.values())
    state.failure = record.failure
    state.client_title = record.client_title
    if max_frame_bytes is not None:
        _check_snapshot(state, max_frame_bytes)


def _stored_fragments(record: StoredLifetime, location: str) -> dict[str, str]:
    """The ``_meta`` fragments of ``record``, once its JSON is checked; :class:`StoreCorruptError`
    naming ``location`` if it is damaged."""
    where = f"session {record.session_id!r}"
    try:
        title = None if record.title is None else json.loads(record.title)
        updated_at = None if record.updated_at is None else json.loads(record.updated_at)
        meta = None if record.meta is None else json.loads(record.meta, parse_constant=_reject)
    except ValueError as exc:
        raise StoreCorruptError(location, f"{where}: stored JSON is damaged ({exc})") from None
    if not isinstance(title, str | None) or not isinstance(updated_at, str | None):
        raise StoreCorruptError(location, f"{where}: stored title or updatedAt is not a string")
    if record.client_title and title is None:
        raise StoreCorruptError(location, f"{where}: a client-set title is marked, none stored")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise StoreCorruptError(location, f"{where}: stored _meta is not an object")
    return {key: fragment(key, encode_json(value)) for key, value in meta.items()}


def _check_snapshot(state: LifetimeState, max_frame_bytes: int) -> None:
    """A restored lifetime's resync must fit in one frame (R12)."""
    size = state.snapshot_size()
    if size > max_frame_bytes:
        raise FrameTooLargeError(
            f"stored session {state.session_id!r} holds about {size} bytes of session info, "
            f"over the frame limit of {max_frame_bytes} bytes"
        )


def _reject(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _wire_timestamp(text: str | None) -> str | None:
    """A stored ``updatedAt`` in its wire form: RFC 3339 with uppercase ``T``/``Z`` (a store
    written by an older version, or by hand, may hold the lowercase form clients drop)."""
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, str):
        return text
    return encode_json(normalize_rfc3339(value))
