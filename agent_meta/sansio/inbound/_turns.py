"""ACP v2 turns that run on after their prompt was answered (pure).

Under ACP v2 a ``session/prompt`` is answered (``{"messageId"}``) as soon as the prompt is
accepted, and its turn runs on until the session reports an idle ``state_update``. A runtime
that stops once no request is in flight would cut such a turn short at the end of the input
(the official SDK closes its connection under it): :class:`RunningTurns` tells the
:class:`~agent_meta.sansio.inbound._gate.InboundGate` which sessions still have one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ...core._jsonrpc import session_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...core._jsonrpc import RequestId

__all__ = ["RunningTurns"]


@final
class RunningTurns:
    """The sessions whose ACP v2 turn runs on after its answer, from what the connection
    answers and notifies."""

    __slots__ = ("_ended_early", "_sessions")

    def __init__(self) -> None:
        self._sessions: set[str] = set()
        # Prompts whose session went idle before they were answered: their turn has ended.
        self._ended_early: set[RequestId] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    def answered(
        self, request_id: RequestId, method: str, session_id: str | None, *, ok: bool, version: int
    ) -> None:
        """A request of the client was answered (``ok``: with a result that leaves a turn
        running, not one with a ``stopReason``). A v2 prompt's success starts its session's
        running turn, unless the session went idle first (an SDK sends the answer from another
        task than the one that ran the turn); a ``session/close`` ends the session's turns."""
        if request_id in self._ended_early:
            self._ended_early.discard(request_id)
            return
        if not ok or session_id is None:
            return
        if method == "session/prompt" and version >= 2:
            self._sessions.add(session_id)
        elif method == "session/close":
            self._sessions.discard(session_id)

    def notified(
        self,
        message: Mapping[str, object],
        in_flight: Mapping[RequestId, tuple[str, str | None]],
    ) -> None:
        """The agent sent ``message``, a notification: an idle ``state_update`` ends every turn
        of its session, those of the prompts still unanswered (``in_flight``) too."""
        if message.get("method") != "session/update":
            return
        params = message.get("params")
        session_id = session_of(params)
        update = params.get("update") if isinstance(params, dict) else None
        if session_id is None or not isinstance(update, dict):
            return
        if update.get("sessionUpdate") != "state_update" or update.get("state") != "idle":
            return
        self._sessions.discard(session_id)
        for request_id, (method, session) in in_flight.items():
            if method == "session/prompt" and session == session_id:
                self._ended_early.add(request_id)
