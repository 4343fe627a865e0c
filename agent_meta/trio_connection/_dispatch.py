"""Dispatching one connection's inbound messages, and answering them.

:class:`Dispatcher` decodes each line (a message or a batch), negotiates the protocol version at
``initialize``, runs each request's handler in a task of its own (so a long ``session/prompt``
never blocks ``session/cancel``), maps a handler's exception to the JSON-RPC error it earns, and
queues each response (a batch's as one array, once every request of it has one). Around every
request and response, the connection's :class:`~agent_meta.owner._policy.LifetimePolicy` keeps
the lifetimes as ACP says (open on new, load and resume; resync before a load or resume response;
end before a close response), and serves ``session/set_title`` itself (R13).

A handler's code up to its first checkpoint runs before the next inbound message is read, so a
handler can register state (a cancel scope, say) that a later message is guaranteed to see.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import trio

from ..core._errors import (
    STORE_FAILED_MESSAGE,
    AgentMetaError,
    FrameTooLargeError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
    UnknownSessionError,
)
from ..core._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
    negotiate_version,
)
from ..sansio._frames import build_response, session_of
from ..sansio._gate import refusal
from ..sansio._titles import SET_TITLE
from ..wire._decode import InvalidMessageError, MessageDecodeError, decode
from ..wire._models import JsonRpcMessage, JsonRpcNotification, JsonRpcRequest
from ._agent import RequestContext, not_supported
from ._outbound import ConnectionClosedError
from ._work import Work

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ..core._json import JsonObject
    from ..owner._policy import LifetimePolicy
    from ..wire._decode import BatchEntry
    from ._connection import AgentConnection
    from ._outbound import OutboundRequests
    from ._work import RequestId, SessionWork

__all__ = ["Dispatcher"]

logger = logging.getLogger("agent_meta.connection")

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


class _Batch:
    """The responses of one JSON-RPC batch: sent as one array once every request has one."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.responses: list[dict[str, Any]] = []
        self.after: list[tuple[str, Callable[[], Awaitable[None]]]] = []


class Dispatcher:
    """Routes the inbound messages of one connection and sends their answers."""

    def __init__(
        self,
        connection: AgentConnection,
        *,
        versions: tuple[int, ...],
        work: SessionWork,
        outbound: OutboundRequests,
        policy: LifetimePolicy,
    ) -> None:
        self._connection = connection
        self._owner = connection.owner
        self._agent = connection.agent
        self.versions = versions
        self.protocol_version = versions[-1]
        """The negotiated version; before ``initialize``, the highest one allowed."""
        self.initialized = False
        self._work = work
        self._outbound = outbound
        self._policy = policy

    # -- inbound ----------------------------------------------------------------------------
    async def dispatch_line(self, line: bytes, nursery: trio.Nursery) -> None:
        """Decode one line and start what it asks for (each request in ``nursery``)."""
        try:
            decoded = decode(line)
        except InvalidMessageError as exc:
            if exc.is_response:  # JSON-RPC never answers a response
                self._outbound.malformed(exc.request_id, str(exc))
                return
            await self.send_error(exc.request_id, JsonRpcError(exc.code, str(exc)))
            return
        except MessageDecodeError as exc:
            await self.send_error(exc.request_id, JsonRpcError(exc.code, str(exc)))
            return
        if not isinstance(decoded, list):
            await self._dispatch(decoded, nursery, None)
            return
        expected = sum(_answered(entry) for entry in decoded)
        batch = _Batch(expected) if expected else None
        for entry in decoded:
            await self._dispatch_entry(entry, nursery, batch)

    async def send_error(self, request_id: RequestId | None, error: JsonRpcError) -> None:
        """Answer ``request_id`` with ``error`` (its ``data`` left out if it cannot be sent)."""
        try:
            await self._owner.send_response(request_id, error=error.to_error())
        except (OwnerClosedError, TransportBrokenError):
            raise
        except AgentMetaError:  # its data is not JSON, or too large: send it without
            logger.exception("the data of a %d error response cannot be sent", error.code)
            bare = JsonRpcError(error.code, error.message[:1000])
            await self._owner.send_response(request_id, error=bare.to_error())

    async def _dispatch_entry(
        self, entry: BatchEntry, nursery: trio.Nursery, batch: _Batch | None
    ) -> None:
        if isinstance(entry, InvalidMessageError):
            if entry.is_response:
                self._outbound.malformed(entry.request_id, str(entry))
                return
            assert batch is not None
            error = JsonRpcError(INVALID_REQUEST, str(entry)).to_error()
            await self._add_to_batch(batch, {"id": None, "error": error}, None)
        else:
            await self._dispatch(entry, nursery, batch)

    async def _dispatch(
        self, message: JsonRpcMessage, nursery: trio.Nursery, batch: _Batch | None
    ) -> None:
        if isinstance(message, JsonRpcRequest):
            await nursery.start(self._run_request, message, batch)
        elif isinstance(message, JsonRpcNotification):
            await nursery.start(self._run_notification, message)
        else:
            self._outbound.answer(message)

    # -- requests ---------------------------------------------------------------------------
    async def _run_request(
        self,
        message: JsonRpcRequest,
        batch: _Batch | None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        request_id, method = message.id, message.method
        params = message.params if isinstance(message.params, dict) else {}
        responder = functools.partial(self._respond_result, batch=batch)
        ctx = RequestContext(
            self._connection, request_id, method, session_of(params), responder=responder
        )
        refusal = self._refusal(message)
        if refusal is not None:
            task_status.started()
            # Not through the policy: its id may be that of another request in flight.
            await self._respond(ctx, batch, {"error": refusal.to_error()}, planned=False)
            return
        try:
            # A load or resume takes its stored lifetime over here: a store round trip, before
            # the next request is read (so that a request pipelined behind it finds it open).
            await self._policy.request({"id": request_id, "method": method, "params": params})
        except StoreError:
            task_status.started()
            logger.exception("%s: the lifetime store failed", method)
            failed = JsonRpcError(INTERNAL_ERROR, STORE_FAILED_MESSAGE)
            await self._respond(ctx, batch, {"error": failed.to_error()}, planned=False)
            return
        work = Work(trio.CancelScope(), method, ctx.session_id, ctx=ctx)
        self._work.in_flight[request_id] = work
        task_status.started()
        try:
            await self._handle(ctx, work, params, batch)
        finally:
            del self._work.in_flight[request_id]
            work.done.set()

    async def _handle(
        self, ctx: RequestContext, work: Work, params: JsonObject, batch: _Batch | None
    ) -> None:
        """Run the handler of one request and answer it as it ended."""
        method = ctx.method
        error: JsonRpcError | None = None
        result: JsonObject = {}
        with work.scope:
            try:
                result = await self._call(ctx, method, params)
            except Exception as exc:
                error = _as_json_rpc_error(exc, method)
        if ctx.responded:
            if error is not None:
                logger.warning("%s failed after answering: %s", method, error.message)
        elif work.scope.cancelled_caught:
            cancelled = JsonRpcError(REQUEST_CANCELLED, "request cancelled")
            await self._respond(ctx, batch, {"error": cancelled.to_error()})
        elif error is not None:
            await self._respond(ctx, batch, {"error": error.to_error()})
        else:
            await ctx.respond(result)

    def _refusal(self, message: JsonRpcRequest) -> JsonRpcError | None:
        """Why a decoded request is refused before any handler runs, if it is (the rules the
        SDK adapter's gate applies too)."""
        return refusal(
            message.method,
            message.id,
            message.params,
            in_flight=self._work.in_flight,
            initialized=self.initialized,
            speaks_v2=self._speaks_v2(message),
        )

    def _speaks_v2(self, message: JsonRpcRequest) -> bool:
        """Whether ``message`` falls under ACP v2's rules: the negotiated version once
        initialized; before that, the version an ``initialize`` would negotiate (any other
        request then fails as sent before ``initialize``)."""
        if self.initialized:
            return self.protocol_version >= 2
        if message.method != "initialize" or not isinstance(message.params, dict):
            return False
        try:
            return negotiate_version(message.params.get("protocolVersion"), self.versions) >= 2
        except JsonRpcError:
            return False  # the initialize fails anyway, with the error its version earns

    async def _call(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        if method == "initialize":
            return await self._initialize(ctx, params)
        if method == SET_TITLE:  # the connection's own (R13): the agent never sees it
            return await self._policy.set_title(params)
        handler_name = _REQUESTS.get(method)
        if handler_name is None:
            if method.startswith("_"):
                return await self._agent.ext_method(ctx, method, params)
            raise not_supported(method)
        if method == "session/close" and ctx.session_id is not None:
            # The session's work stops and drains first; its lifetime ends as the response
            # is queued (the policy), so nothing of it follows the response (R6).
            await self._work.end_session(ctx.session_id, keep=ctx.request_id)
        handler: Callable[[RequestContext, JsonObject], Awaitable[JsonObject]]
        handler = getattr(self._agent, handler_name)
        return await handler(ctx, params)

    async def _initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        version = negotiate_version(params.get("protocolVersion"), self.versions)
        try:
            self._owner.set_protocol_version(version)
        except (AgentMetaError, RuntimeError) as exc:
            raise JsonRpcError(INVALID_REQUEST, f"cannot initialize again: {exc}") from exc
        self.protocol_version = version
        result = await self._agent.initialize(ctx, params)
        self.initialized = True
        return {"protocolVersion": version, **result}

    # -- answers ----------------------------------------------------------------------------
    async def _respond_result(
        self, ctx: RequestContext, result: object, *, batch: _Batch | None
    ) -> None:
        """Answer with ``result``, as the policy rewrites it (an ``initialize`` advertises
        ``session/set_title``, a ``session/list`` lists client-set titles); one the owner
        refuses becomes ``-32603`` (R12), so a bad result (not JSON, over ``max_frame_bytes``)
        costs that request, not the connection."""
        try:
            rewritten = await self._policy.rewrite({"id": ctx.request_id, "result": result})
        except StoreError:
            logger.exception("%s: the lifetime store failed", ctx.method)
            failed = JsonRpcError(INTERNAL_ERROR, STORE_FAILED_MESSAGE)
            await self._respond(ctx, batch, {"error": failed.to_error()})
            return
        result = rewritten["result"]
        try:
            frame = build_response(ctx.request_id, result=result)  # validates, as the owner will
            if len(frame) > self._owner.max_frame_bytes:
                raise FrameTooLargeError(
                    f"a response of {len(frame)} bytes is over the frame limit of "
                    f"{self._owner.max_frame_bytes} bytes"
                )
        except AgentMetaError as exc:
            logger.exception("the result of %r cannot be sent", ctx.method)
            message = f"internal error: the result cannot be sent ({exc})"
            await self._respond(ctx, batch, {"error": {"code": INTERNAL_ERROR, "message": message}})
            return
        await self._respond(ctx, batch, {"result": result})

    async def _respond(
        self,
        ctx: RequestContext,
        batch: _Batch | None,
        payload: dict[str, Any],
        *,
        planned: bool = True,
    ) -> None:
        """Queue the response (or add it to its batch), after the lifetime step it needs (the
        policy, when ``planned``); then run the ``after_response`` callbacks once it is queued
        (skipped for errors)."""
        if planned:
            self._policy.response({"id": ctx.request_id, **payload})
        callbacks = ctx._after if "result" in payload else []
        if batch is not None:
            await self._add_to_batch(batch, {"id": ctx.request_id, **payload}, ctx, callbacks)
            return
        if "error" in payload:
            await self.send_error(ctx.request_id, _error_of(payload["error"]))
        else:
            await self._owner.send_response(ctx.request_id, result=payload["result"])
        for callback in callbacks:
            await self._run_after_response(ctx.method, callback)

    async def _add_to_batch(
        self,
        batch: _Batch,
        response: dict[str, Any],
        ctx: RequestContext | None,
        callbacks: list[Callable[[], Awaitable[None]]] | None = None,
    ) -> None:
        batch.responses.append(response)
        method = "batch" if ctx is None else ctx.method
        batch.after.extend((method, callback) for callback in callbacks or [])
        if len(batch.responses) < batch.expected:
            return
        await self._owner.send_response_batch(batch.responses)
        for name, callback in batch.after:
            await self._run_after_response(name, callback)

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

    # -- notifications ----------------------------------------------------------------------
    async def _run_notification(
        self,
        message: JsonRpcNotification,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        method, params = message.method, message.params
        if not isinstance(params, dict):
            if isinstance(params, list):
                logger.warning("ignoring %r: params are an array, not an object", method)
                return
            params = {}
        try:
            if method == "$/cancel_request":
                self._work.cancel_request(params.get("requestId"))
            elif method == "session/cancel":
                if not isinstance(params.get("sessionId"), str):
                    logger.info("ignoring session/cancel: its sessionId is not a string")
                    return
                await self._agent.cancel(self._connection, params)
            else:
                await self._agent.ext_notification(self._connection, method, params)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("notification handler for %r failed", method)


def _answered(entry: BatchEntry) -> bool:
    """Whether a batch entry gets a response: a request, or an invalid entry that is not
    shaped like a response."""
    if isinstance(entry, InvalidMessageError):
        return not entry.is_response
    return isinstance(entry, JsonRpcRequest)


def _as_json_rpc_error(exc: Exception, method: str) -> JsonRpcError:
    """The error response a handler's exception earns (the owner stopping is not one)."""
    if isinstance(exc, JsonRpcError):
        return exc
    if isinstance(exc, OwnerClosedError | TransportBrokenError):
        raise exc
    if isinstance(exc, UnknownSessionError):
        return JsonRpcError(RESOURCE_NOT_FOUND, f"session not found: {exc}")
    if isinstance(exc, ConnectionClosedError):
        return JsonRpcError(INTERNAL_ERROR, f"internal error: {exc}")
    if isinstance(exc, StoreError):  # its text names the store: for the agent's log only
        logger.error("handler for %r: the lifetime store failed", method, exc_info=exc)
        return JsonRpcError(INTERNAL_ERROR, STORE_FAILED_MESSAGE)
    if isinstance(exc, AgentMetaError):
        return JsonRpcError(INVALID_PARAMS, f"invalid params: {exc}")
    logger.exception("handler for %r failed", method, exc_info=exc)
    return JsonRpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}")


def _error_of(error: Mapping[str, Any]) -> JsonRpcError:
    return JsonRpcError(error["code"], error["message"], error.get("data"))
