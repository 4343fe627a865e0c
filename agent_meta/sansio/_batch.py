"""Consecutive publications of one lifetime, composed before they are published (R3 ahead of
the queue).

An owner in front of a child agent reads the child's output a chunk at a time, and a chunk of
a busy child holds hundreds of ``session_info_update`` frames of one session. The queue would
merge them anyway (nothing is written before the chunk is taken); composing them first spares
validating, encoding and queuing each. :class:`PublicationBatch` composes by the shallow-patch
rule and keeps its meaning (R3): a later value of a field wins, a removal (``key: null``) stays
a removal, and a clear followed by an object stays two publications. Values are taken as
received and checked by the owner when the batch is published.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, final

from ..core._sentinel import OMITTED

if TYPE_CHECKING:
    from ._tracker import InfoUpdate

__all__ = ["Publication", "PublicationBatch"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Publication:
    """One publication to make of a batch (fields ``OMITTED`` when not set)."""

    title: object = OMITTED
    updated_at: object = OMITTED
    meta: object = OMITTED


@final
class PublicationBatch:
    """The updates of one session composed so far (call :meth:`take` to publish them)."""

    __slots__ = ("_clear", "_meta", "_title", "_updated_at", "count", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.count = 0
        """The updates composed in it."""
        self._title: object = OMITTED
        self._updated_at: object = OMITTED
        self._clear = False
        self._meta: dict[str, object] | None = None

    @staticmethod
    def composable(update: InfoUpdate) -> bool:
        """Whether ``update`` may join a batch: no notification ``_meta`` (R9: its frame is
        its own), and fields of the types a publication takes (anything else is refused on
        its own, so that one bad update costs no other)."""
        if update.notification_meta is not None:
            return False
        for value in (update.title, update.updated_at):
            if value is not OMITTED and value is not None and not isinstance(value, str):
                return False
        meta = update.meta
        return meta is OMITTED or meta is None or isinstance(meta, dict)

    def add(self, update: InfoUpdate) -> None:
        """Compose ``update`` (:meth:`composable`) into the batch."""
        if update.title is not OMITTED:
            self._title = update.title
        if update.updated_at is not OMITTED:
            self._updated_at = update.updated_at
        meta = update.meta
        if meta is None:  # everything before it is gone, removals included
            self._clear = True
            self._meta = None
        elif isinstance(meta, dict):
            if self._meta is None:
                self._meta = {}
            self._meta.update(meta)
        self.count += 1

    def take(self) -> list[Publication]:
        """The publications equal to the batch (one, or a clear then an object), in order."""
        if self._clear and self._meta:
            first = Publication(title=self._title, updated_at=self._updated_at, meta=None)
            return [first, Publication(meta=self._meta)]
        meta: object = None if self._clear else (OMITTED if self._meta is None else self._meta)
        return [Publication(title=self._title, updated_at=self._updated_at, meta=meta)]
