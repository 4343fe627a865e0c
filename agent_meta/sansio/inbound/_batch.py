"""Consecutive publications of one lifetime, composed before they are published (R3 ahead of
the queue).

An owner in front of a child agent reads the child's output a chunk at a time, and a chunk of
a busy child holds hundreds of ``session_info_update`` frames of one session. The queue would
merge them anyway (nothing is written before the chunk is taken); composing them first spares
queuing and merging each. :class:`PublicationBatch` composes by the shallow-patch rule and keeps
its meaning (R3): a later value of a field wins, a removal (``key: null``) stays a removal, and a
clear followed by an object stays two publications.

What is accepted must not depend on how the child's writes were read. So the batch takes only
updates already validated and encoded (:class:`~agent_meta.sansio._encode.EncodedUpdate`: a
value the owner would refuse is refused on its own before it reaches a batch), and it composes
only as far as the lifetime's :func:`~agent_meta.sansio.queue._state.headroom` goes: within it every
update would be accepted one by one, so the composition accepts exactly the same. The update
that would pass it, and every one after it, is published on its own, checked against the state
it meets, so exactly the updates that publishing one by one refuses are refused.
"""

from __future__ import annotations

import dataclasses
from typing import final

from .._encode import EncodedUpdate, update_size

__all__ = ["Publication", "PublicationBatch"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Publication:
    """One publication to make of a batch: the update, how many of the batch's updates it
    stands for, and the line it came in (empty for a composition), to show if it is refused."""

    update: EncodedUpdate
    count: int
    line: bytes = b""


@final
class PublicationBatch:
    """The validated updates of one session taken so far (call :meth:`take` to publish them)."""

    __slots__ = ("_lines", "_size", "_updates", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._updates: list[EncodedUpdate] = []
        self._lines: list[bytes] = []
        self._size = 0

    @property
    def count(self) -> int:
        """The updates taken into it."""
        return len(self._updates)

    @staticmethod
    def composable(update: EncodedUpdate) -> bool:
        """Whether ``update`` may join a batch: no notification ``_meta`` (R9: its frame is
        its own)."""
        return update.notification_meta is None

    def add(self, update: EncodedUpdate, line: bytes) -> None:
        """Take ``update`` (:meth:`composable`), which came in ``line``, into the batch."""
        self._updates.append(update)
        self._lines.append(line)
        self._size += update_size(update)

    def take(self, room: int) -> list[Publication]:
        """The publications to make, in order, each with the number of updates it stands for.

        ``room`` is the lifetime's :func:`~agent_meta.sansio.queue._state.headroom` now. The longest
        run of updates from the first whose sizes add up to at most ``room`` is composed into
        one publication (or a clear, then an object); every update after it is its own.
        """
        updates = self._updates
        if self._size <= room:
            run = len(updates)
        else:
            run = 0
            used = 0
            for update in updates:
                used += update_size(update)
                if used > room:
                    break
                run += 1
        publications = _composed(updates[:run])
        for update, line in zip(updates[run:], self._lines[run:], strict=True):
            publications.append(Publication(update, 1, line))
        return publications


def _composed(updates: list[EncodedUpdate]) -> list[Publication]:
    """``updates`` as one publication, or two when a clear is followed by members (the second
    counted with the first)."""
    if not updates:
        return []
    if len(updates) == 1:
        return [Publication(updates[0], 1)]
    title: str | None = None
    updated_at: str | None = None
    cleared = False
    patch: dict[str, str | None] | None = None
    for update in updates:
        if update.title is not None:
            title = update.title
        if update.updated_at is not None:
            updated_at = update.updated_at
        if update.meta_clear:  # everything before it is gone, removals included
            cleared = True
            patch = None
        if update.meta_patch is not None:
            if patch is None:
                patch = {}
            patch.update(update.meta_patch)
    count = len(updates)
    if cleared and not patch:
        return [Publication(EncodedUpdate(title, updated_at, True, None, None), count)]
    if cleared:
        first = EncodedUpdate(title, updated_at, True, None, None)
        return [
            Publication(first, count),
            Publication(EncodedUpdate(None, None, False, patch, None), 0),
        ]
    return [Publication(EncodedUpdate(title, updated_at, False, patch, None), count)]
