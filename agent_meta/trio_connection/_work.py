"""The work of one connection, by session: requests in flight and background tasks, and how
it stops (``session/close`` of its session, ``$/cancel_request``, a graceful shutdown).

Each request handler and background task runs in a cancel scope of its own, recorded with the
session it belongs to. ``session/close`` stops a session's work as ``session/cancel`` would
(the agent's ``cancel`` ends the foreground turn, which finishes with its final updates) and
cancels the rest, then waits until all of it is done, so nothing of the session follows the
close response. A graceful shutdown does the same for every session, bounded in time.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import trio

from ..core._errors import AgentMetaError, OwnerClosedError, TransportBrokenError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..core._jsonrpc import RequestId
    from ._agent import RequestContext
    from ._connection import AgentConnection
    from ._outbound import OutboundRequests

__all__ = ["FOREGROUND", "SessionWork", "Work"]

logger = logging.getLogger("agent_meta.connection")

FOREGROUND = "session/prompt"
"""The request the agent's ``cancel`` stops (a turn ends itself); the rest is cancelled."""


@dataclasses.dataclass(slots=True)
class Work:
    """A request handler or a background task that belongs to a session."""

    scope: trio.CancelScope
    method: str
    session_id: str | None
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    ctx: RequestContext | None = None  # a request's context (None: a background task)


class SessionWork:
    """Every piece of work of one connection, and how it is stopped."""

    def __init__(self, connection: AgentConnection, outbound: OutboundRequests) -> None:
        self._connection = connection
        self._outbound = outbound
        self.handlers: list[Work] = []
        """Requests being handled (one answered early, ``ctx.respond()``, until its handler
        ends: its id may then name a new request too)."""
        self._tasks: list[Work] = []  # background tasks
        self._background: trio.Nursery | None = None
        self._requests: trio.Nursery | None = None
        self.shutting_down = False

    def bind(self, background: trio.Nursery, requests: trio.Nursery) -> None:
        """Where background tasks and request handlers run (the connection's nurseries)."""
        self._background = background
        self._requests = requests

    def start_background(
        self, async_fn: Callable[[], Awaitable[None]], *, name: str, session_id: str | None
    ) -> None:
        """See :meth:`AgentConnection.start_background`."""
        if self._background is None:
            raise RuntimeError("the connection is not serving yet")
        work = Work(trio.CancelScope(), name or "background", session_id)

        async def run() -> None:
            self._tasks.append(work)
            try:
                with work.scope:
                    await async_fn()
            except AgentMetaError as exc:
                if isinstance(exc, OwnerClosedError | TransportBrokenError):
                    raise
                logger.warning("background task %s stopped: %s", name or async_fn, exc)
            finally:
                self._tasks.remove(work)
                work.done.set()

        self._background.start_soon(run, name=name or None)

    def cancel_request(self, request_id: RequestId) -> None:
        """``$/cancel_request`` of the request ``request_id`` names, still unanswered (the
        :class:`~agent_meta.sansio.inbound._gate.InboundGate` passes on no other): cancel its
        handler, or call the callback it chose (:meth:`RequestContext.on_cancel_request`)."""
        work = self._unanswered(request_id)
        if work is None or work.ctx is None:
            return
        callback = work.ctx._on_cancel
        if callback is None:
            work.scope.cancel()
        else:
            callback()

    def _unanswered(self, request_id: RequestId | None) -> Work | None:
        """The request of that id still unanswered (at most one: the gate refuses an id in
        flight), if any."""
        for work in self.handlers:
            ctx = work.ctx
            if ctx is not None and ctx.request_id == request_id and not ctx.responded:
                return work
        return None

    async def end_session(self, session_id: str, *, keep: RequestId | None = None) -> None:
        """See :meth:`AgentConnection.end_session_work`."""
        while True:
            closing = self._unanswered(keep)  # the request doing the closing
            work = [w for w in self.handlers if w is not closing]
            work += self._tasks
            work = [w for w in work if w.session_id == session_id]
            if not work:
                return
            await self._cancel_agent_work(session_id)
            for item in work:
                if item.method != FOREGROUND:
                    item.scope.cancel()
            for item in work:
                await item.done.wait()

    def shutdown(self, grace: float) -> None:
        """Stop the work: see :meth:`AgentConnection.shutdown`."""
        if self._requests is not None:
            self._requests.start_soon(self._wind_down, grace)
        else:
            self._outbound.close("the agent is shutting down")

    async def _wind_down(self, grace: float) -> None:
        sessions = {w.session_id for w in [*self.handlers, *self._tasks]}
        for session_id in sessions - {None}:
            assert session_id is not None
            await self._cancel_agent_work(session_id)
        for work in [*self.handlers, *self._tasks]:
            if work.method != FOREGROUND:
                work.scope.cancel()
        # Only now: a request the cancellations reached was withdrawn, not failed.
        self._outbound.close("the agent is shutting down")
        with trio.move_on_after(grace):
            for work in list(self.handlers):
                await work.done.wait()
        for work in list(self.handlers):
            work.scope.cancel()

    async def _cancel_agent_work(self, session_id: str) -> None:
        connection = self._connection
        try:
            await connection.agent.cancel(connection, {"sessionId": session_id})
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("the cancel handler failed for session %r", session_id)
