"""The agent side of an ACP connection, as its handlers see it: :class:`AgentConnection`.

A connection reads NDJSON JSON-RPC messages (single messages and batches) from a byte stream
(stdio by default: :func:`~agent_meta.serve_stdio`), negotiates the protocol version at
``initialize`` and dispatches every request and notification to a handler method of an
:class:`~agent_meta.Agent` (:mod:`agent_meta.trio_connection._dispatch`). Every outbound
frame (responses, notifications, the agent's own requests, session-info updates) goes through the
connection's
:class:`~agent_meta.MetaOwner`, so what a handler queues before its response reaches the wire
before it (R2).

Lifetimes follow the protocol, as under the official-SDK adapter (the same
:class:`~agent_meta.owner._policy.LifetimePolicy`): a lifetime opens when a ``session/new``
response is queued and when a ``session/load`` or ``session/resume`` arrives (a stored one is
restored), a successful load or resume is resynced after its replay and before its response,
and a successful ``session/close`` ends the lifetime before its response. An agent never opens,
resyncs or closes a lifetime for these; it reaches one with ``ctx.owner.lifetime(sid)``.

Sessions: the connection knows which requests and background tasks belong to which session
(``params.sessionId``). ``session/close`` first stops that work, as ``session/cancel`` would,
and waits for it (the final updates and the idle ``state_update`` go out before the close
response); after the close response nothing more of the session is written (R6, enforced by the
owner for every frame whose ``params.sessionId`` names it).

Cancellation: ``$/cancel_request`` cancels that request's handler (``-32800``), or calls the
callback the handler chose with :meth:`RequestContext.on_cancel_request`; for a request that is
answered already (``ctx.respond()``) it is ignored. How the connection ends is told by
:func:`~agent_meta.serve_agent`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

import trio

from ..core._errors import OwnerClosedError, TransportBrokenError, UnknownSessionError
from ..core._json import JsonObject, json_object_copy
from ..core._jsonrpc import session_of
from ..owner._shell import ConnectionShell
from ._dispatch import Dispatcher
from ._outbound import OutboundRequests
from ._work import SessionWork

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping

    from ..core._json import JsonValue
    from ..core._jsonrpc import RequestId
    from ..owner._trio import MetaOwner
    from ._agent import Agent

__all__ = ["SUPPORTED_PROTOCOL_VERSIONS", "AgentConnection"]

logger = logging.getLogger("agent_meta.connection")

SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)
"""ACP major versions this connection can speak."""

_SHUTDOWN_GRACE = 5.0
_SHUTDOWN_DRAIN = 10.0


class AgentConnection:
    """One client connection as the handlers see it. Created by :func:`serve_agent`."""

    def __init__(
        self,
        owner: MetaOwner,
        agent: Agent,
        *,
        protocol_versions: Collection[int],
        stop_scope: trio.CancelScope | None = None,
    ) -> None:
        self.owner = owner
        self.agent = agent
        self._outbound = OutboundRequests()
        self._work = SessionWork(self, self._outbound)
        self.dispatcher = Dispatcher(
            self,
            versions=tuple(sorted(set(protocol_versions))),
            work=self._work,
            outbound=self._outbound,
            shell=ConnectionShell(owner, versions=sorted(set(protocol_versions))),
        )
        """The inbound side: what :func:`~agent_meta.serve_agent` hands each line to."""
        self._reading = trio.CancelScope()
        self._stop_scope = stop_scope or trio.CancelScope()  # shutdown() sets its deadline

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version; before ``initialize``, the highest one allowed."""
        return self.dispatcher.protocol_version

    @property
    def initialized(self) -> bool:
        """True once ``initialize`` has been answered successfully."""
        return self.dispatcher.initialized

    def serve(self, background: trio.Nursery, requests: trio.Nursery) -> trio.CancelScope:
        """Run background tasks in ``background`` and request handlers in ``requests`` from now
        on; returns the scope to read the input in (:meth:`shutdown` cancels it)."""
        self._work.bind(background, requests)
        return self._reading

    def input_ended(self) -> None:
        """The client's input ended: its requests still unanswered by the client fail."""
        if not self._work.shutting_down:  # a graceful stop closes them once it has cancelled
            self._outbound.close("the client's input ended")

    def start_background(
        self,
        async_fn: Callable[[], Awaitable[None]],
        *,
        name: str = "",
        session_id: str | None = None,
    ) -> None:
        """Run ``async_fn`` for the life of the connection; cancelled when the input ends, or,
        with ``session_id``, when that session is closed (before the close response).

        An exception other than ``trio.Cancelled`` or an :class:`~agent_meta.AgentMetaError`
        (logged) stops the connection.
        """
        self._work.start_background(async_fn, name=name, session_id=session_id)

    async def session_update(
        self, session_id: str, update: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> bool:
        """Queue a ``session/update`` notification (not for ``session_info_update``: use the
        session's lifetime, which keeps the metadata state). ``False``: the session's lifetime
        has ended, nothing was written."""
        params: JsonObject = {"sessionId": session_id, "update": json_object_copy(update)}
        if meta is not None:
            params["_meta"] = json_object_copy(meta, path="_meta")
        return await self.owner.send_notification("session/update", params)

    # ----------------------------------------------------------------------- requests to the client

    async def request(self, method: str, params: Mapping[str, object] | None = None) -> JsonValue:
        """Send a request to the client and return its ``result``.

        Raises :class:`ClientRequestError` when the client answers with an error,
        :class:`ConnectionClosedError` when the input ends (or the connection shuts down) before
        it answers, and :class:`~agent_meta.UnknownSessionError` if ``params.sessionId`` names a
        session whose lifetime has ended (nothing is sent then). Cancelled while waiting, it
        tells the client with ``$/cancel_request`` and stops waiting; a late answer is dropped.
        """
        pending = self._outbound.open(method, session_of(params))
        sent = False
        try:
            sent = await self.owner.send_request(pending.request_id, method, params)
            if not sent:
                raise UnknownSessionError(f"session {pending.session_id!r} has ended")
            return await pending.wait()
        except trio.Cancelled:
            if sent and not pending.answered:
                with trio.CancelScope(shield=True):
                    await self._cancel_client_request(pending.request_id)
            raise
        finally:
            self._outbound.forget(pending)

    async def request_permission(self, session_id: str, params: Mapping[str, object]) -> JsonValue:
        """``session/request_permission`` for ``session_id`` (``params`` without the session id:
        v2 needs ``title`` and ``options``, v1 ``toolCall`` and ``options``). Returns the
        client's result, e.g. ``{"outcome": {"outcome": "selected", "optionId": "allow"}}``."""
        return await self.request(
            "session/request_permission", {**dict(params), "sessionId": session_id}
        )

    async def read_text_file(self, session_id: str, path: str, **params: object) -> JsonValue:
        """``fs/read_text_file`` (``line``, ``limit`` as keywords); the client's result."""
        return await self.request(
            "fs/read_text_file", {**params, "sessionId": session_id, "path": path}
        )

    async def write_text_file(self, session_id: str, path: str, content: str) -> JsonValue:
        """``fs/write_text_file``; the client's result."""
        return await self.request(
            "fs/write_text_file", {"sessionId": session_id, "path": path, "content": content}
        )

    async def _cancel_client_request(self, request_id: int) -> None:
        # If the connection is going away, there is nothing to cancel any more.
        with contextlib.suppress(OwnerClosedError, TransportBrokenError):
            await self.owner.send_notification("$/cancel_request", {"requestId": request_id})

    # ----------------------------------------------------------------------- sessions

    async def end_session_work(self, session_id: str, *, keep: RequestId | None = None) -> None:
        """Stop every piece of work of ``session_id`` and wait until it is done.

        The agent's :meth:`~Agent.cancel` stops the foreground work (a prompt then ends with
        its final updates and ``stopReason: "cancelled"``, and its pending requests to the
        client are cancelled with ``$/cancel_request``); other requests of the session (a
        replay, say) and its background tasks are cancelled by the connection. ``keep`` is the
        request doing the closing. ``session/close`` calls this before the agent's handler.
        """
        await self._work.end_session(session_id, keep=keep)

    def shutdown(self, grace: float = _SHUTDOWN_GRACE, drain: float = _SHUTDOWN_DRAIN) -> None:
        """Stop gracefully: read nothing more, stop the work in flight as ``session/cancel``
        would (so a turn waiting for the client ends ``cancelled`` and withdraws its request
        with ``$/cancel_request``), then fail the agent's requests still unanswered; after
        ``grace`` seconds, cancel what is left, and write what was accepted. The whole stop is
        bounded: ``grace + drain`` seconds from now, whatever is still running or unwritten is
        cancelled (the owner's ``drain_timeout`` may end the writing earlier, never later), and
        :func:`serve_agent` returns as at the end of the input, or raises
        :class:`~agent_meta.TransportBrokenError` if frames were left unwritten (a client that
        stopped reading). Idempotent."""
        if self._work.shutting_down:
            return
        self._work.shutting_down = True
        self._reading.cancel()
        self._stop_scope.deadline = trio.current_time() + grace + drain
        self._work.shutdown(grace)
