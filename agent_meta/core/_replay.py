"""Whether a ``session/load`` or ``session/resume`` replays the session's history (pure).

One answer for every part that asks: the inbound gate (which refuses a malformed cursor), the
lifetime tracker (which takes what the handler sends as replay, not as publications), the
reference agents (which replay or not) and the client-side watcher (which judges the window).
"""

from __future__ import annotations

import enum

__all__ = ["Replay", "replay_of"]


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
