"""Whether a ``session/load`` or ``session/resume`` replays the session's history, and what
of what its handler sends is history (pure).

One answer for every part that asks: the inbound gate (which refuses a malformed cursor), the
lifetime tracker (which takes what the handler sends as replay, not as publications), the
reference agents (which replay or not) and the client-side watcher (which judges the window).
:class:`ReplayWindow` is the rule "replay is replay" (docs/sdk.md): in such a window, every
``session_info_update`` is history except the agent's current info, told by its ``updatedAt``.
It is asked by both windows of the owner, the SDK tracker's
(:mod:`agent_meta.sansio.inbound._marks`, by handler) and ``agent-meta own``'s
(:mod:`agent_meta.sansio.inbound._replay`, by frame order), and by the watcher of ``check`` and
``proxy`` (``tools/_current.py``).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, final

from ._timestamps import rfc3339_instant

if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable

__all__ = ["Replay", "ReplayWindow", "replay_of"]


class Replay(enum.Enum):
    """What a request asks of the session's history (:func:`replay_of`)."""

    NONE = "none"
    """No replay: what the handler sends is live (a v2 ``session/resume`` without
    ``replayFrom``, or ``null``; any request that is no load or resume)."""
    ASKED = "asked"
    """Replay: a ``session/load``, or a v2 ``session/resume`` with a ``replayFrom`` cursor (an
    object with a string ``type``; ``{"type": "start"}`` is the one ACP defines)."""
    ALLOWED = "allowed"
    """A v1 ``session/resume``: ACP v1 says it never replays, but real v1 agents (fast-agent,
    hermes) replay on it, so what its handler sends may be history."""
    MALFORMED = "malformed"
    """A v2 ``session/resume`` whose ``replayFrom`` is neither ``null`` nor a cursor: refused
    with ``-32602`` before any handler runs."""

    @property
    def may_replay(self) -> bool:
        """Whether what the request's handler sends may be history rather than publications."""
        return self is Replay.ASKED or self is Replay.ALLOWED


def replay_of(method: str, params: object, *, protocol_version: int) -> Replay:
    """What ``method`` with ``params`` asks of the history, under ``protocol_version``."""
    if method == "session/load":
        return Replay.ASKED
    if method != "session/resume":
        return Replay.NONE
    if protocol_version < 2:
        return Replay.ALLOWED
    cursor = params.get("replayFrom") if isinstance(params, dict) else None
    if cursor is None:
        return Replay.NONE
    if isinstance(cursor, dict) and isinstance(cursor.get("type"), str):
        return Replay.ASKED
    return Replay.MALFORMED


@final
class ReplayWindow:
    """What the handler of one replaying ``session/load`` or ``session/resume`` sends, told
    apart: its history (replay) from its current info.

    A ``session_info_update`` sent in the window is the agent's **current info** when its
    ``updatedAt`` is an RFC 3339 date-time with an offset that is later than the lifetime's
    known ``updatedAt`` (itself such a date-time) and later than every ``updatedAt`` the window
    sent before it. Everything else the window sends is replay: no ``updatedAt``, one that
    cannot be compared (no offset, not a date-time), nothing known to compare with, or one no
    newer than what is known or was replayed. Current info is a publication like any other (a
    shallow patch of the known state); replay is not folded into it.

    One object per window, fed every ``session_info_update`` of the window in order (those
    judged current too): it keeps the newest ``updatedAt`` seen. Pure, no I/O.
    """

    __slots__ = ("_newest",)

    def __init__(self) -> None:
        self._newest: datetime.datetime | None = None

    def is_current(self, updated_at: object, known_updated_at: Callable[[], object]) -> bool:
        """Whether an update with ``updated_at`` (its wire value; ``OMITTED`` or ``None`` when
        it has none) is the agent's current info; ``known_updated_at()`` is the lifetime's
        known ``updatedAt`` now (``OMITTED`` when unknown), asked only when the answer depends
        on it (a snapshot of an owner's lifetime is a copy). Notes ``updated_at`` as seen by
        the window."""
        stamp = rfc3339_instant(updated_at)
        if stamp is None:
            return False
        if self._newest is not None and stamp <= self._newest:
            return False  # no newer than what the window replayed
        self._newest = stamp
        known = rfc3339_instant(known_updated_at())
        return known is not None and stamp > known
