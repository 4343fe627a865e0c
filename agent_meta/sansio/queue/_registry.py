"""The lifetimes of one connection and the fence of those that ended (R5, R6), sans I/O.

A :class:`LifetimeRegistry` knows the open lifetime of each session id and, for a bounded
number of session ids whose lifetime ended and was not reopened, that they are fenced: nothing
more of them is written, whatever the frame (a notification, a request to the client).
"""

from __future__ import annotations

from typing import Final

from ...core._errors import SessionExistsError
from ._state import LifetimeState

__all__ = ["ENDED_IDS", "LifetimeRegistry"]

ENDED_IDS: Final = 4096
"""How many ended session ids are remembered to fence their other frames (R6). The oldest is
forgotten first: a session closed that long ago is quiet."""


class LifetimeRegistry:
    """Open lifetimes by session id, and the ended ids that are fenced."""

    __slots__ = ("_ended", "sessions")

    def __init__(self) -> None:
        self.sessions: dict[str, LifetimeState] = {}
        """The open lifetime of each session id."""
        self._ended: dict[str, None] = {}  # insertion order: the oldest is forgotten first

    def new(self, session_id: str) -> LifetimeState:
        """A new lifetime state for ``session_id``, not registered yet (see :meth:`add`).
        Raises :class:`~agent_meta.SessionExistsError` while one is open."""
        if session_id in self.sessions:
            raise SessionExistsError(f"session {session_id!r} already has an open lifetime")
        return LifetimeState(session_id)

    def add(self, state: LifetimeState) -> None:
        """Register ``state`` as its session's open lifetime; the id is no longer fenced."""
        if state.session_id in self.sessions:
            raise SessionExistsError(f"session {state.session_id!r} already has an open lifetime")
        self._ended.pop(state.session_id, None)
        self.sessions[state.session_id] = state

    def end(self, state: LifetimeState) -> bool:
        """End ``state``'s lifetime and fence its session id; ``False`` if it had ended."""
        if state.books.closed:
            return False
        state.books.closed = True
        ended = self._ended
        ended[state.session_id] = None
        if len(ended) > ENDED_IDS:
            del ended[next(iter(ended))]
        if self.sessions.get(state.session_id) is state:
            del self.sessions[state.session_id]
        return True

    def fenced(self, session_id: str) -> bool:
        """Whether frames of ``session_id`` are fenced: its lifetime ended, not reopened."""
        return session_id in self._ended
