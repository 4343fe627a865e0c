"""A session's ACP v2 foreground state, as both reference agents report it (pure; no I/O).

ACP v2 ``StateUpdate`` (the schema bundled in ``@agentclientprotocol/sdk`` 2.4.0): the agent
SHOULD report ``requires_action`` "when the foreground workflow as a whole cannot progress
without user action" and MUST report ``idle`` "when no foreground activity remains"; resume sends
the current state. So the state is the session's, derived from all its turns
(``requires_action`` if any waits for the client, else ``running`` if any runs, else ``idle``),
and only its changes are reported, except that the end of a turn that leaves the session idle
always reports ``idle`` with the turn's stop reason (that is how a v2 client learns the turn
ended). Each runtime sends the updates this returns its own way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_meta import JsonObject

__all__ = ["SessionForeground"]


class SessionForeground:
    """The foreground state of one session, from the states of its turns (any hashable key
    per turn)."""

    __slots__ = ("_turns", "reported")

    def __init__(self) -> None:
        self._turns: dict[object, str] = {}
        self.reported = "idle"
        """The state last reported to the client."""

    @property
    def state(self) -> str:
        """The state of the session as a whole, from all its turns."""
        states = set(self._turns.values())
        if "requires_action" in states:
            return "requires_action"
        return "running" if states else "idle"

    def change(self, turn: object, state: str, stop_reason: str | None = None) -> JsonObject | None:
        """Record that ``turn`` is now in ``state`` (``idle``: the turn is over, with its
        ``stop_reason``); return the ``state_update`` to report, or ``None`` when the client
        has nothing new to learn."""
        if state == "idle":
            self._turns.pop(turn, None)
        else:
            self._turns[turn] = state
        current = self.state
        ended = stop_reason is not None and current == "idle"
        if current == self.reported and not ended:
            return None
        self.reported = current
        update: JsonObject = {"sessionUpdate": "state_update", "state": current}
        if ended:
            update["stopReason"] = stop_reason
        return update

    def snapshot(self) -> JsonObject:
        """The current state as a ``state_update`` (resume sends it after any replay, even
        without one), recorded as reported."""
        self.reported = self.state
        return {"sessionUpdate": "state_update", "state": self.reported}
