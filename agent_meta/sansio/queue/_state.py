"""Pure per-lifetime session-info state: what the agent knows, held as encoded JSON text.

A :class:`LifetimeState` is the agent's *known* session info for one session lifetime:
``title`` / ``updatedAt`` (each unknown until published, seeded or restored) and ``_meta``,
the current failure incident and whether the client set the title (R13). The send queue's
bookkeeping of the lifetime is not here but in its own typed record, ``books``
(:class:`~agent_meta.sansio.queue._books.QueueBooks`), each field with one writer. No I/O.

Known values are stored as the JSON text that goes on the wire (one ``"key":value`` fragment
per top-level metadata key). Each value is therefore encoded once, when published, and a
snapshot is a fresh JSON copy by construction. Updates are validated and encoded by
:func:`~agent_meta.sansio._encode.encode_update` before anything changes, so bad input
changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from ...core._errors import FrameTooLargeError
from ...core._sentinel import OMITTED, Omitted
from ...core._session_info import SessionInfo
from .._json_text import object_text, session_prefix
from ._books import QueueBooks

if TYPE_CHECKING:
    from ...core._json import JsonObject, JsonValue
    from .._encode import EncodedUpdate

__all__ = ["FailureIncident", "LifetimeState", "check_sizes", "headroom"]


@dataclasses.dataclass(frozen=True, slots=True)
class FailureIncident:
    """The failure incident a lifetime currently shows: its id and revision."""

    incident_id: str
    revision: int


class LifetimeState:
    """The known session info of one session lifetime (pure), and the queue's ``books`` of it.

    Its known state is changed by the send queue (:meth:`apply`, the edits) and by
    :func:`~agent_meta.sansio.queue._records.restore_state`; ``books`` by the queue's parts."""

    __slots__ = (
        "books",
        "client_title",
        "failure",
        "fragments",
        "meta_size",
        "prefix",
        "session_id",
        "title",
        "updated_at",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.prefix = session_prefix(session_id)
        self.title: str | None = None  # JSON text; None = unknown
        self.client_title = False
        """The client set ``title`` (``session/set_title``, R13): no other publication changes
        it, for the rest of the lifetime."""
        self.updated_at: str | None = None
        self.fragments: dict[str, str] = {}
        self.meta_size = 0  # total length of the fragments
        self.failure: FailureIncident | None = None
        self.books = QueueBooks()
        """The send queue's bookkeeping of the lifetime (closed, taken over, its epoch, a
        repair due, its open and resync entries): the queue's record, each field with one
        writer (:mod:`agent_meta.sansio.queue._books`)."""

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


def headroom(state: LifetimeState, limit: int) -> int:
    """How many bytes of updates (:func:`~agent_meta.sansio._encode.update_size`, added up)
    ``state`` takes before :func:`check_sizes` could refuse one.

    Every update of a run that keeps within it is accepted however the run is published: one
    by one, or composed into fewer publications (whose sizes add up to no more). So a composer
    that stops at it accepts exactly what publishing the same updates one by one would (R3,
    R12). Negative or zero when even an empty update could be refused."""
    return limit - state.snapshot_size()


def check_sizes(state: LifetimeState, update: EncodedUpdate, limit: int) -> None:
    """Raise :class:`~agent_meta.FrameTooLargeError`, before anything changes, when the frame of
    ``update`` or the state it leaves would be over ``limit`` bytes (a resync must fit in one
    frame, R12)."""
    own = len(state.prefix) + 64 + update.patch_size  # update_size(), written out: a hot path
    if update.title is not None:
        own += len(update.title)
    if update.updated_at is not None:
        own += len(update.updated_at)
    if update.notification_meta is not None:
        own += len(update.notification_meta)
    # Quick and sufficient: the update's frame plus everything known bounds both sizes (the
    # bound headroom() gives: own + known <= limit is update_size <= headroom).
    known = state.meta_size + len(state.fragments)
    if state.title is not None:
        known += len(state.title)
    if state.updated_at is not None:
        known += len(state.updated_at)
    if own + known <= limit:
        return
    if own > limit:
        raise FrameTooLargeError(
            f"the frame for this update of session {state.session_id!r} would be about "
            f"{own} bytes, over the limit of {limit} bytes"
        )
    after = state.size_after(update)
    if after > limit:
        raise FrameTooLargeError(
            f"session {state.session_id!r} would hold about {after} bytes of session info, "
            f"over the frame limit of {limit} bytes (a resync must fit in one frame)"
        )
