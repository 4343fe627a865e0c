"""The agent side of an ACP connection over a byte stream (stdio by default), on trio.

:func:`serve_agent` reads NDJSON JSON-RPC messages, negotiates the protocol version at
``initialize`` and dispatches every request and notification to a handler method of an
:class:`Agent` object. It owns nothing else: every outbound frame (responses, notifications,
session-info updates) goes through the connection's :class:`~agent_meta.MetaOwner`, so what a
handler enqueues before returning reaches the wire before its response (R2).

Concurrency: each inbound message runs in its own task, so a long ``session/prompt`` never
blocks ``session/cancel`` or other sessions. A handler's code up to its first checkpoint runs
before the next inbound message is read, so a handler can register state (say, a cancel scope)
that a later message is guaranteed to see.

Cancellation: ``$/cancel_request`` cancels that request's handler and answers ``-32800``.
At the end of the input stream the connection stops reading, lets the handlers in flight
finish, cancels the background tasks started with :meth:`AgentConnection.start_background`,
waits until everything enqueued is written, and returns. Cancelling :func:`serve_agent` itself
cancels all of that at once; the owner then begins no new frame, but a frame it was in the middle
of writing to a client that had stopped reading stays incomplete.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any, Literal, Protocol

import trio

from ..core._errors import (
    AgentMetaError,
    OwnerClosedError,
    TransportBrokenError,
    UnknownSessionError,
)
from ..core._json import JsonObject, json_object_copy
from ..owner._trio import MetaOwner, open_owner
from ..sansio._options import OwnerOptions
from ..wire._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
)
from ..wire._models import (
    JsonRpcErrorResponse,
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcSuccessResponse,
    MessageDecodeError,
    decode_message,
)
from ._lines import DEFAULT_MAX_LINE_BYTES, IncompleteLineError, LineTooLongError, NdjsonLineReader

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping

    from ..owner._store import LifetimeStore
    from ..owner._transport import Transport

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "Agent",
    "AgentConnection",
    "BaseAgent",
    "RequestContext",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
]

logger = logging.getLogger("agent_meta.connection")

SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)
"""ACP major versions this connection can speak."""

RequestId = int | str

# Methods routed to Agent handlers: wire name -> method name. Everything else is -32601.
_REQUESTS: Mapping[str, str] = {
    "initialize": "initialize",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/resume": "resume_session",
    "session/list": "list_sessions",
    "session/close": "close_session",
    "session/prompt": "prompt",
}
_NOTIFICATIONS: Mapping[str, str] = {"session/cancel": "cancel"}


class RequestContext:
    """What a request handler gets besides its params: the connection and the request id."""

    def __init__(self, connection: AgentConnection, request_id: RequestId, method: str) -> None:
        self.connection = connection
        self.request_id = request_id
        self.method = method
        self._after: list[Callable[[], Awaitable[None]]] = []

    @property
    def owner(self) -> MetaOwner:
        """The connection's owner: the only way frames reach the client."""
        return self.connection.owner

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version (1 or 2)."""
        return self.connection.protocol_version

    def after_response(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` right after the response is enqueued (for example a notification
        the client should only see once it knows the session, like ``available_commands_update``
        after ``session/new``). Skipped when the handler fails."""
        self._after.append(callback)


class Agent(Protocol):
    """The handler methods an agent object provides; :class:`BaseAgent` has defaults.

    Request handlers return the ``result`` object (``protocolVersion`` is added to the
    ``initialize`` result by the connection) or raise :class:`JsonRpcError`. Params arrive as a
    JSON object (``{}`` when omitted). An :class:`~agent_meta.UnknownSessionError` becomes
    ``-32002``, a :class:`~agent_meta.MetaValueError` ``-32602``, anything else ``-32603``.
    Handlers may be cancelled (``$/cancel_request``, or the connection shutting down).
    """

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject: ...
    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None: ...
    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        """A request for a method ACP does not define (``_``-prefixed extensions)."""
        ...

    async def ext_notification(
        self, connection: AgentConnection, method: str, params: JsonObject
    ) -> None:
        """A notification ACP does not define; unknown notifications should be ignored."""
        ...


class BaseAgent:
    """An :class:`Agent` that answers ``-32601`` to everything but ``initialize``.

    Subclass it and override the handlers you support; ``initialize`` returns an empty result
    (the connection adds ``protocolVersion``).
    """

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {}

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise _not_supported(ctx.method)

    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        return None

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        raise _not_supported(method)

    async def ext_notification(
        self, connection: AgentConnection, method: str, params: JsonObject
    ) -> None:
        return None


def _not_supported(method: str) -> JsonRpcError:
    return JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method!r}", {"method": method})


class AgentConnection:
    """One client connection as the handlers see it. Created by :func:`serve_agent`."""

    def __init__(
        self,
        owner: MetaOwner,
        agent: Agent,
        *,
        protocol_versions: Collection[int],
        background: trio.Nursery,
    ) -> None:
        self.owner = owner
        self.agent = agent
        self._versions = tuple(sorted(set(protocol_versions)))
        self._protocol_version = self._versions[-1]
        self._initialized = False
        self._background = background
        self._in_flight: dict[RequestId, trio.CancelScope] = {}

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version; before ``initialize``, the highest one allowed."""
        return self._protocol_version

    @property
    def initialized(self) -> bool:
        """True once ``initialize`` has been answered successfully."""
        return self._initialized

    def start_background(self, async_fn: Callable[[], Awaitable[None]], *, name: str = "") -> None:
        """Run ``async_fn`` for the life of the connection; cancelled when the input ends.

        An exception other than ``trio.Cancelled`` or an :class:`~agent_meta.AgentMetaError`
        (logged) stops the connection.
        """

        async def run() -> None:
            try:
                await async_fn()
            except AgentMetaError as exc:
                if isinstance(exc, OwnerClosedError | TransportBrokenError):
                    raise
                logger.warning("background task %s stopped: %s", name or async_fn, exc)

        self._background.start_soon(run, name=name or None)

    async def session_update(
        self, session_id: str, update: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Enqueue a ``session/update`` notification (not for ``session_info_update``: use the
        session's lifetime, which keeps the metadata state)."""
        params: JsonObject = {"sessionId": session_id, "update": json_object_copy(update)}
        if meta is not None:
            params["_meta"] = json_object_copy(meta, path="_meta")
        await self.owner.send_notification("session/update", params)

    # ----------------------------------------------------------------------- dispatch

    async def _dispatch_line(self, line: bytes, nursery: trio.Nursery) -> None:
        try:
            message = decode_message(line)
        except MessageDecodeError as exc:
            request_id = getattr(exc, "request_id", None)
            await self._send_error(request_id, JsonRpcError(exc.code, str(exc)))
            return
        if isinstance(message, JsonRpcRequest):
            params = _params(message)
            await nursery.start(self._run_request, message.id, message.method, params)
        elif isinstance(message, JsonRpcNotification):
            params = _params(message)
            await nursery.start(self._run_notification, message.method, params)
        elif isinstance(message, JsonRpcSuccessResponse | JsonRpcErrorResponse):
            # This agent sends no requests, so a response answers nothing.
            logger.warning("ignoring a response to unknown request id %r", message.id)

    async def _run_request(
        self,
        request_id: RequestId,
        method: str,
        params: JsonObject | None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        ctx = RequestContext(self, request_id, method)
        if request_id in self._in_flight:
            task_status.started()
            await self._send_error(
                request_id,
                JsonRpcError(INVALID_REQUEST, f"request id {request_id!r} is already in flight"),
            )
            return
        scope = trio.CancelScope()
        self._in_flight[request_id] = scope
        task_status.started()
        try:
            result: JsonObject | None = None
            error: JsonRpcError | None = None
            with scope:
                try:
                    result = await self._call(ctx, method, params)
                except JsonRpcError as exc:
                    error = exc
                except UnknownSessionError as exc:
                    error = JsonRpcError(RESOURCE_NOT_FOUND, f"session not found: {exc}")
                except (OwnerClosedError, TransportBrokenError):
                    raise
                except AgentMetaError as exc:
                    error = JsonRpcError(INVALID_PARAMS, f"invalid params: {exc}")
                except Exception as exc:
                    logger.exception("handler for %r failed", method)
                    error = JsonRpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
            if scope.cancelled_caught:
                await self._send_error(
                    request_id, JsonRpcError(REQUEST_CANCELLED, "request cancelled")
                )
            elif error is not None:
                await self._send_error(request_id, error)
            else:
                await self._send_result(request_id, method, result)
                for callback in ctx._after:
                    await self._run_after_response(method, callback)
        finally:
            self._in_flight.pop(request_id, None)

    async def _send_result(self, request_id: RequestId, method: str, result: object) -> None:
        """Send a handler's result; one the owner refuses becomes ``-32603`` (R12), so a bad
        result (not JSON, over ``max_frame_bytes``) costs that request, not the connection."""
        try:
            await self.owner.send_response(request_id, result=result)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except AgentMetaError as exc:
            logger.exception("the result of %r cannot be sent", method)
            await self._send_error(
                request_id,
                JsonRpcError(INTERNAL_ERROR, f"internal error: the result cannot be sent ({exc})"),
            )

    async def _run_after_response(
        self, method: str, callback: Callable[[], Awaitable[None]]
    ) -> None:
        """Run one ``after_response`` callback; its failure is logged, never fatal."""
        try:
            await callback()
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("an after_response callback of %r failed", method)

    async def _call(
        self, ctx: RequestContext, method: str, params: JsonObject | None
    ) -> JsonObject:
        if params is None:
            raise JsonRpcError(INVALID_PARAMS, "invalid params: expected an object")
        if method == "initialize":
            return await self._initialize(ctx, params)
        if not self._initialized:
            raise JsonRpcError(INVALID_REQUEST, f"{method!r} before 'initialize'")
        handler_name = _REQUESTS.get(method)
        if handler_name is None:
            if method.startswith("_"):
                return await self.agent.ext_method(ctx, method, params)
            raise _not_supported(method)
        handler: Callable[[RequestContext, JsonObject], Awaitable[JsonObject]]
        handler = getattr(self.agent, handler_name)
        return await handler(ctx, params)

    async def _initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        requested = params.get("protocolVersion")
        if type(requested) is not int or requested < 0:
            raise JsonRpcError(
                INVALID_PARAMS, "invalid params: 'protocolVersion' must be a non-negative integer"
            )
        # Echo the client's version when we speak it; otherwise our highest one at or below it,
        # or (v1 rule) our own latest, which the client then accepts or disconnects.
        at_or_below = [v for v in self._versions if v <= requested]
        version = at_or_below[-1] if at_or_below else self._versions[-1]
        try:
            self.owner.set_protocol_version(version)
        except (AgentMetaError, RuntimeError) as exc:
            raise JsonRpcError(INVALID_REQUEST, f"cannot initialize again: {exc}") from exc
        self._protocol_version = version
        result = await self.agent.initialize(ctx, params)
        self._initialized = True
        return {"protocolVersion": version, **result}

    async def _run_notification(
        self,
        method: str,
        params: JsonObject | None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        if params is None:
            logger.warning("ignoring %r: params are not an object", method)
            return
        try:
            if method == "$/cancel_request":
                self._cancel_request(params)
            elif method in _NOTIFICATIONS:
                await self.agent.cancel(self, params)
            else:
                await self.agent.ext_notification(self, method, params)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("notification handler for %r failed", method)

    def _cancel_request(self, params: JsonObject) -> None:
        request_id = params.get("requestId")
        if type(request_id) is int or type(request_id) is str:
            scope = self._in_flight.get(request_id)
            if scope is not None:
                scope.cancel()

    async def _send_error(self, request_id: RequestId | None, error: JsonRpcError) -> None:
        try:
            await self.owner.send_response(request_id, error=error.to_error())
        except (OwnerClosedError, TransportBrokenError):
            raise
        except AgentMetaError:  # its data is not JSON, or too large: send it without
            logger.exception("the data of a %d error response cannot be sent", error.code)
            bare = JsonRpcError(error.code, error.message[:1000])
            await self.owner.send_response(request_id, error=bare.to_error())


def _params(message: JsonRpcRequest | JsonRpcNotification) -> JsonObject | None:
    """The params as an object: ``{}`` when omitted, ``None`` when not an object."""
    if "params" not in message.model_fields_set:
        return {}
    return message.params if isinstance(message.params, dict) else None


async def serve_agent(
    agent: Agent,
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream | Transport,
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
) -> None:
    """Serve ``agent`` until ``receive_stream`` ends (see the module docstring for shutdown).

    ``protocol_versions`` limits what ``initialize`` may negotiate (``(1,)``, ``(2,)`` or
    both). ``options`` and ``store`` are passed to :func:`~agent_meta.open_owner` (the
    protocol version in ``options`` is replaced by the negotiated one). Malformed input is
    answered with the JSON-RPC error it deserves and the connection goes on: ``-32700`` for a
    line that is not JSON or is longer than ``max_line_bytes``, ``-32600`` for JSON that is not
    a JSON-RPC message. Raises
    :class:`~agent_meta.TransportBrokenError` / :class:`~agent_meta.OwnerClosedError` when the
    output breaks.
    """
    versions = tuple(sorted(set(protocol_versions)))
    if not versions or not set(versions) <= set(SUPPORTED_PROTOCOL_VERSIONS):
        raise ValueError(f"protocol_versions must be a non-empty subset of (1, 2): {versions!r}")
    reader = NdjsonLineReader(receive_stream, max_line_bytes=max_line_bytes)
    highest: Literal[1, 2] = 2 if versions[-1] == 2 else 1
    options = dataclasses.replace(options or OwnerOptions(), protocol_version=highest)
    async with open_owner(send_stream, options, store=store) as owner:
        async with trio.open_nursery() as background:
            connection = AgentConnection(
                owner, agent, protocol_versions=versions, background=background
            )
            async with trio.open_nursery() as requests:
                await _read_loop(connection, reader, requests)
            background.cancel_scope.cancel()
        await owner.wait_flushed()


async def _read_loop(
    connection: AgentConnection, reader: NdjsonLineReader, nursery: trio.Nursery
) -> None:
    while True:
        try:
            line = await reader.receive_line()
        except LineTooLongError as exc:
            await connection._send_error(None, JsonRpcError(PARSE_ERROR, str(exc)))
            continue
        except IncompleteLineError as exc:
            logger.warning("%s", exc)
            await connection._send_error(None, JsonRpcError(PARSE_ERROR, str(exc)))
            return
        if line is None:
            return
        await connection._dispatch_line(line, nursery)


async def serve_stdio(
    agent: Agent,
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
) -> None:
    """:func:`serve_agent` over this process's stdin and stdout (which then carry only ACP).

    Duplicates of the file descriptors are used, so closing the streams leaves ``sys.stdin``
    and ``sys.stdout`` usable; log to stderr.
    """
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    async with stdin, stdout:
        await serve_agent(
            agent,
            stdin,
            stdout,
            protocol_versions=protocol_versions,
            max_line_bytes=max_line_bytes,
            options=options,
            store=store,
        )


def run_stdio_agent(
    agent_factory: Callable[[], Agent],
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
) -> None:
    """Run the agent made by ``agent_factory`` on stdio until stdin ends (own trio run)."""

    async def main() -> None:
        await serve_stdio(
            agent_factory(),
            protocol_versions=protocol_versions,
            max_line_bytes=max_line_bytes,
            options=options,
            store=store,
        )

    trio.run(main)
