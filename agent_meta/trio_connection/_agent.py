"""What an agent implements (:class:`Agent`, :class:`BaseAgent`) and what its handlers receive
(:class:`RequestContext`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..core._jsonrpc import ErrorCode, JsonRpcError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..core._json import JsonObject
    from ..core._jsonrpc import RequestId
    from ..owner._trio import MetaOwner
    from ._connection import AgentConnection

__all__ = ["Agent", "BaseAgent", "RequestContext", "not_supported"]


class RequestContext:
    """What a request handler gets besides its params: the connection, the request id, and
    the session the request names (``params.sessionId``), if any."""

    def __init__(
        self,
        connection: AgentConnection,
        request_id: RequestId,
        method: str,
        session_id: str | None = None,
        *,
        responder: Callable[[RequestContext, JsonObject], Awaitable[None]] | None = None,
    ) -> None:
        self.connection = connection
        self.request_id = request_id
        self.method = method
        self.session_id = session_id
        self._after: list[Callable[[], Awaitable[None]]] = []
        self._responder = responder  # how the connection answers this request
        self._answer = "open"  # "answering" while respond() runs, "answered" once it is queued
        self._on_cancel: Callable[[], object] | None = None

    @property
    def responded(self) -> bool:
        """True once the response is queued (by :meth:`respond`, or by the connection)."""
        return self._answer == "answered"

    @property
    def owner(self) -> MetaOwner:
        """The connection's owner: the only way frames reach the client."""
        return self.connection.owner

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version (1 or 2)."""
        return self.connection.protocol_version

    def after_response(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` right after the response is queued (for example a notification
        the client should only see once it knows the session, like ``available_commands_update``
        after ``session/new``). Skipped when the handler fails."""
        self._after.append(callback)

    def on_cancel_request(self, callback: Callable[[], object]) -> None:
        """Handle ``$/cancel_request`` for this request yourself: the connection calls
        ``callback`` instead of cancelling the handler.

        For a request whose cancellation must not always end in an error: ACP's
        ``session/prompt`` may answer ``-32800`` only while its user message is not inserted;
        once it is, a cancelled turn ends with ``stopReason: "cancelled"``. Register it before
        the handler's first checkpoint, so a cancellation read right after the request sees it.
        A request that is answered already is never cancelled (``$/cancel_request`` is then
        ignored, as ACP says), whatever the callback.
        """
        self._on_cancel = callback

    async def respond(self, result: JsonObject) -> None:
        """Send the response now, before the handler returns, and go on working.

        ACP v2 answers ``session/prompt`` as soon as the prompt is accepted; the turn then goes
        on and ends with the idle ``state_update``. Once responded, the handler's return value
        is ignored, a later failure or cancellation sends no second response, and a
        ``$/cancel_request`` for the request is ignored (ACP: "already-answered"). Cancelled
        before the response is queued, it sent nothing (the connection then answers as usual).
        Raises ``RuntimeError`` if the request was answered already.
        """
        if self._answer != "open" or self._responder is None:
            raise RuntimeError(f"request {self.request_id!r} ({self.method}) was answered already")
        self._answer = "answering"
        try:
            await self._responder(self, result)
        except BaseException:
            self._answer = "open"  # cancelled before it was queued: the connection answers
            raise
        self._answer = "answered"


class Agent(Protocol):
    """The handler methods an agent object provides; :class:`BaseAgent` has defaults.

    Request handlers return the ``result`` object (``protocolVersion`` is added to the
    ``initialize`` result by the connection) or raise :class:`JsonRpcError`. Params arrive as a
    JSON object (``{}`` when omitted). An :class:`~agent_meta.UnknownSessionError` becomes
    ``-32002``, a :class:`~agent_meta.MetaValueError` ``-32602``, anything else ``-32603``.
    Handlers may be cancelled (``$/cancel_request``, ``session/close`` of their session, or
    the connection shutting down).
    """

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        """``session/close``. Before it runs, the connection has stopped the session's work
        (see :meth:`AgentConnection.end_session_work`); after it returns, the connection ends
        the session's lifetime if it is still open, so nothing more of it is written."""
        ...

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        """``session/cancel``: stop the session's foreground work (the turn then ends with
        ``stopReason: "cancelled"``). Also called by ``session/close`` and at shutdown."""
        ...

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        """A request for a method ACP does not define (``_``-prefixed extensions)."""
        ...

    async def ext_notification(
        self, connection: AgentConnection, method: str, params: JsonObject
    ) -> None:
        """A notification ACP does not define; unknown notifications should be ignored."""
        ...


class BaseAgent:
    """An :class:`Agent` that answers ``-32601`` to everything but ``initialize``,
    ``session/close`` (which succeeds: closing a session that does not exist SHOULD succeed in
    ACP v2) and the notifications.

    Subclass it and override the handlers you support; ``initialize`` returns an empty result
    (the connection adds ``protocolVersion``).
    """

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {}

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise not_supported(ctx.method)

    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise not_supported(ctx.method)

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise not_supported(ctx.method)

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise not_supported(ctx.method)

    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {}

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise not_supported(ctx.method)

    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        return None

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        raise not_supported(method)

    async def ext_notification(
        self, connection: AgentConnection, method: str, params: JsonObject
    ) -> None:
        return None


def not_supported(method: str) -> JsonRpcError:
    """The ``-32601`` error for ``method``."""
    return JsonRpcError(
        ErrorCode.METHOD_NOT_FOUND, f"method not found: {method!r}", {"method": method}
    )
