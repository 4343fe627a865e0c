"""The agent side of an ACP connection over a byte stream (stdio by default), on trio.

:func:`serve_agent` reads NDJSON JSON-RPC messages (single messages and batches), negotiates the
protocol version at ``initialize`` and dispatches every request and notification to a handler
method of an :class:`Agent` object. Every outbound frame (responses, notifications, the agent's
own requests, session-info updates) goes through the connection's
:class:`~agent_meta.MetaOwner`, so what a handler queues before its response reaches the wire
before it (R2).

Concurrency: each inbound message runs in its own task, so a long ``session/prompt`` never
blocks ``session/cancel`` or other sessions. A handler's code up to its first checkpoint runs
before the next inbound message is read, so a handler can register state (say, a cancel scope)
that a later message is guaranteed to see.

Sessions: the connection knows which requests and background tasks belong to which session
(``params.sessionId``). ``session/close`` first stops that work, as ``session/cancel`` would,
and waits for it (the final updates and the idle ``state_update`` go out before the close
response); after the close response nothing more of the session is written (R6, enforced by the
owner for every frame whose ``params.sessionId`` names it).

Cancellation and shutdown: ``$/cancel_request`` cancels that request's handler (``-32800``),
or calls the callback the handler chose with :meth:`RequestContext.on_cancel_request`; for a
request that is answered already (``ctx.respond()``) it is ignored.
At the end of the input stream the connection stops reading, fails the agent's unanswered
requests (:class:`ConnectionClosedError`), lets the handlers in flight finish, cancels the
background tasks, waits until everything queued is written (at most ``OwnerOptions.drain_timeout``
seconds), and returns.
:meth:`AgentConnection.shutdown` (``serve_stdio`` calls it on SIGTERM or SIGINT) stops reading at
once and winds the work down within a bounded time, its last writes included. Frames left
unwritten at either bound (a client that stopped reading) make :func:`serve_agent` raise
:class:`~agent_meta.TransportBrokenError`; the frame it was in the middle of writing then stays
incomplete (a stalled pipe gives no way to finish it). Cancelling :func:`serve_agent` itself
cancels all of that at once, with the same effect on a frame being written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import signal
from typing import TYPE_CHECKING, Any, Literal

import trio

from ..core._errors import (
    AgentMetaError,
    FrameTooLargeError,
    OwnerClosedError,
    TransportBrokenError,
    UnknownSessionError,
)
from ..core._json import JsonObject, json_object_copy
from ..owner._base import unwritten_error
from ..owner._trio import MetaOwner, open_owner
from ..sansio._frames import build_response, session_of
from ..sansio._options import OwnerOptions
from ..wire._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
    negotiate_version,
)
from ..wire._models import (
    InvalidMessageError,
    JsonRpcMessage,
    JsonRpcNotification,
    JsonRpcRequest,
    MessageDecodeError,
    decode_line,
)
from ._agent import Agent, RequestContext, not_supported
from ._lines import DEFAULT_MAX_LINE_BYTES, IncompleteLineError, LineTooLongError, NdjsonLineReader
from ._outbound import ConnectionClosedError, OutboundRequests

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping

    from ..core._json import JsonValue
    from ..owner._store import LifetimeStore
    from ..owner._transport import Transport
    from ..wire._models import BatchEntry

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "AgentConnection",
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
_FOREGROUND = "session/prompt"  # stopped by the agent's cancel, not by the connection
_SHUTDOWN_GRACE = 5.0
_SHUTDOWN_DRAIN = 10.0


@dataclasses.dataclass(slots=True)
class _Work:
    """A request handler or a background task that belongs to a session."""

    scope: trio.CancelScope
    method: str
    session_id: str | None
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    ctx: RequestContext | None = None  # a request's context (None: a background task)


class _Batch:
    """The responses of one JSON-RPC batch: sent as one array once every request has one."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.responses: list[dict[str, Any]] = []
        self.after: list[tuple[str, Callable[[], Awaitable[None]]]] = []


class AgentConnection:
    """One client connection as the handlers see it. Created by :func:`serve_agent`."""

    def __init__(
        self,
        owner: MetaOwner,
        agent: Agent,
        *,
        protocol_versions: Collection[int],
        background: trio.Nursery,
        stop_scope: trio.CancelScope | None = None,
    ) -> None:
        self.owner = owner
        self.agent = agent
        self._versions = tuple(sorted(set(protocol_versions)))
        self._protocol_version = self._versions[-1]
        self._initialized = False
        self._background = background
        self._requests: trio.Nursery | None = None
        self._in_flight: dict[RequestId | None, _Work] = {}
        self._tasks: list[_Work] = []  # background tasks
        self._outbound = OutboundRequests()
        self._reading = trio.CancelScope()
        self._stop_scope = stop_scope or trio.CancelScope()  # shutdown() sets its deadline
        self._shutting_down = False

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version; before ``initialize``, the highest one allowed."""
        return self._protocol_version

    @property
    def initialized(self) -> bool:
        """True once ``initialize`` has been answered successfully."""
        return self._initialized

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
        work = _Work(trio.CancelScope(), name or "background", session_id)

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
        while True:
            work = [w for rid, w in self._in_flight.items() if rid != keep]
            work += self._tasks
            work = [w for w in work if w.session_id == session_id]
            if not work:
                return
            await self._cancel_agent_work(session_id)
            for item in work:
                if item.method != _FOREGROUND:
                    item.scope.cancel()
            for item in work:
                await item.done.wait()

    async def _cancel_agent_work(self, session_id: str) -> None:
        try:
            await self.agent.cancel(self, {"sessionId": session_id})
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("the cancel handler failed for session %r", session_id)

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
        if self._shutting_down:
            return
        self._shutting_down = True
        self._reading.cancel()
        self._stop_scope.deadline = trio.current_time() + grace + drain
        if self._requests is not None:
            self._requests.start_soon(self._wind_down, grace)
        else:
            self._outbound.close("the agent is shutting down")

    async def _wind_down(self, grace: float) -> None:
        sessions = {w.session_id for w in [*self._in_flight.values(), *self._tasks]}
        for session_id in sessions - {None}:
            assert session_id is not None
            await self._cancel_agent_work(session_id)
        for work in [*self._in_flight.values(), *self._tasks]:
            if work.method != _FOREGROUND:
                work.scope.cancel()
        # Only now: a request the cancellations reached was withdrawn, not failed.
        self._outbound.close("the agent is shutting down")
        with trio.move_on_after(grace):
            for work in list(self._in_flight.values()):
                await work.done.wait()
        for work in list(self._in_flight.values()):
            work.scope.cancel()

    def _input_ended(self) -> None:
        if not self._shutting_down:  # a graceful stop closes them once it has cancelled
            self._outbound.close("the client's input ended")

    # ----------------------------------------------------------------------- dispatch

    async def _dispatch_line(self, line: bytes, nursery: trio.Nursery) -> None:
        try:
            decoded = decode_line(line)
        except InvalidMessageError as exc:
            if exc.is_response:  # JSON-RPC never answers a response
                self._outbound.malformed(exc.request_id, str(exc))
                return
            await self._send_error(exc.request_id, JsonRpcError(exc.code, str(exc)))
            return
        except MessageDecodeError as exc:
            await self._send_error(exc.request_id, JsonRpcError(exc.code, str(exc)))
            return
        if not isinstance(decoded, list):
            await self._dispatch(decoded, nursery, None)
            return
        expected = sum(_answered(entry) for entry in decoded)
        batch = _Batch(expected) if expected else None
        for entry in decoded:
            await self._dispatch_entry(entry, nursery, batch)

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

    async def _run_request(
        self,
        message: JsonRpcRequest,
        batch: _Batch | None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        request_id, method = message.id, message.method
        params = message.params if isinstance(message.params, dict) else {}
        ctx = RequestContext(self, request_id, method, session_of(params))
        ctx._respond = functools.partial(self._respond_result, ctx, batch)
        refusal = self._refusal(message)
        if refusal is not None:
            task_status.started()
            await self._respond(ctx, batch, {"error": refusal.to_error()})
            return
        work = _Work(trio.CancelScope(), method, ctx.session_id, ctx=ctx)
        self._in_flight[request_id] = work
        task_status.started()
        try:
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
                ctx._answer = "answered"
                await self._respond_result(ctx, batch, result)
        finally:
            del self._in_flight[request_id]
            work.done.set()

    def _refusal(self, message: JsonRpcRequest) -> JsonRpcError | None:
        """Why a decoded request is refused before any handler runs, if it is."""
        if message.id is None and self._speaks_v2(message):
            # ACP v2's RequestId "MUST NOT be null"; v1 allows it.
            return JsonRpcError(INVALID_REQUEST, "a request id must not be null in ACP v2")
        if message.id in self._in_flight:
            return JsonRpcError(INVALID_REQUEST, f"request id {message.id!r} is already in flight")
        if isinstance(message.params, list):
            return JsonRpcError(INVALID_PARAMS, "invalid params: ACP params are an object")
        return None

    def _speaks_v2(self, message: JsonRpcRequest) -> bool:
        """Whether ``message`` falls under ACP v2's rules: the negotiated version once
        initialized; before that, the version an ``initialize`` would negotiate (any other
        request then fails as sent before ``initialize``)."""
        if self._initialized:
            return self._protocol_version >= 2
        if message.method != "initialize" or not isinstance(message.params, dict):
            return False
        try:
            return negotiate_version(message.params.get("protocolVersion"), self._versions) >= 2
        except JsonRpcError:
            return False  # the initialize fails anyway, with the error its version earns

    async def _respond_result(
        self, ctx: RequestContext, batch: _Batch | None, result: object
    ) -> None:
        """Answer with ``result``; one the owner refuses becomes ``-32603`` (R12), so a bad
        result (not JSON, over ``max_frame_bytes``) costs that request, not the connection."""
        try:
            frame = build_response(ctx.request_id, result=result)  # validates, as the owner will
            if len(frame) > self.owner.max_frame_bytes:
                raise FrameTooLargeError(
                    f"a response of {len(frame)} bytes is over the frame limit of "
                    f"{self.owner.max_frame_bytes} bytes"
                )
        except AgentMetaError as exc:
            logger.exception("the result of %r cannot be sent", ctx.method)
            message = f"internal error: the result cannot be sent ({exc})"
            await self._respond(ctx, batch, {"error": {"code": INTERNAL_ERROR, "message": message}})
            return
        await self._respond(ctx, batch, {"result": result})

    async def _respond(
        self, ctx: RequestContext, batch: _Batch | None, payload: dict[str, Any]
    ) -> None:
        """Queue the response (or add it to its batch), then run the ``after_response``
        callbacks once it is queued (skipped for errors)."""
        callbacks = ctx._after if "result" in payload else []
        if batch is not None:
            await self._add_to_batch(batch, {"id": ctx.request_id, **payload}, ctx, callbacks)
            return
        if "error" in payload:
            await self._send_error(ctx.request_id, _error_of(payload["error"]))
        else:
            await self.owner.send_response(ctx.request_id, result=payload["result"])
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
        await self.owner.send_response_batch(batch.responses)
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

    async def _call(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        if method == "initialize":
            return await self._initialize(ctx, params)
        if not self._initialized:
            raise JsonRpcError(INVALID_REQUEST, f"{method!r} before 'initialize'")
        handler_name = _REQUESTS.get(method)
        if handler_name is None:
            if method.startswith("_"):
                return await self.agent.ext_method(ctx, method, params)
            raise not_supported(method)
        if method == "session/close" and ctx.session_id is not None:
            return await self._close_session(ctx, params, ctx.session_id)
        handler: Callable[[RequestContext, JsonObject], Awaitable[JsonObject]]
        handler = getattr(self.agent, handler_name)
        return await handler(ctx, params)

    async def _close_session(
        self, ctx: RequestContext, params: JsonObject, session_id: str
    ) -> JsonObject:
        """``session/close``: the session's work stops and drains first; after the agent's
        handler, its lifetime ends, so nothing of it follows the response (R6)."""
        await self.end_session_work(session_id, keep=ctx.request_id)
        result = await self.agent.close_session(ctx, params)
        if self.owner.has_lifetime(session_id):
            self.owner.close_lifetime(session_id)
        return result

    async def _initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        version = negotiate_version(params.get("protocolVersion"), self._versions)
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
                self._cancel_request(params)
            elif method == "session/cancel":
                if not isinstance(params.get("sessionId"), str):
                    logger.info("ignoring session/cancel: its sessionId is not a string")
                    return
                await self.agent.cancel(self, params)
            else:
                await self.agent.ext_notification(self, method, params)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("notification handler for %r failed", method)

    def _cancel_request(self, params: JsonObject) -> None:
        """``$/cancel_request``: cancel the request's handler, or call the callback it chose
        (:meth:`RequestContext.on_cancel_request`). ACP v2: "Receivers MUST ignore this
        notification for an unknown or already-answered request ID", so a request answered
        with ``ctx.respond()`` whose handler works on (a v2 prompt's turn) is left alone."""
        request_id = params.get("requestId")
        if type(request_id) is not int and type(request_id) is not str:
            return
        work = self._in_flight.get(request_id)
        if work is None or work.ctx is None or work.ctx.responded:
            return  # unknown or already answered: ignored
        callback = work.ctx._on_cancel
        if callback is None:
            work.scope.cancel()
        else:
            callback()

    async def _send_error(self, request_id: RequestId | None, error: JsonRpcError) -> None:
        try:
            await self.owner.send_response(request_id, error=error.to_error())
        except (OwnerClosedError, TransportBrokenError):
            raise
        except AgentMetaError:  # its data is not JSON, or too large: send it without
            logger.exception("the data of a %d error response cannot be sent", error.code)
            bare = JsonRpcError(error.code, error.message[:1000])
            await self.owner.send_response(request_id, error=bare.to_error())


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
    if isinstance(exc, AgentMetaError):
        return JsonRpcError(INVALID_PARAMS, f"invalid params: {exc}")
    logger.exception("handler for %r failed", method, exc_info=exc)
    return JsonRpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}")


def _error_of(error: Mapping[str, Any]) -> JsonRpcError:
    return JsonRpcError(error["code"], error["message"], error.get("data"))


async def serve_agent(
    agent: Agent,
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream | Transport,
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    task_status: trio.TaskStatus[AgentConnection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``agent`` until ``receive_stream`` ends (see the module docstring for shutdown).

    ``protocol_versions`` limits what ``initialize`` may negotiate (``(1,)``, ``(2,)`` or
    both). ``options`` and ``store`` are passed to :func:`~agent_meta.open_owner` (the
    protocol version in ``options`` is replaced by the negotiated one). Malformed input is
    answered with the JSON-RPC error it deserves and the connection goes on: ``-32700`` for a
    line that is not JSON or is longer than ``max_line_bytes``, ``-32600`` for JSON that is not
    a JSON-RPC message, except a malformed response: a response is never answered (it fails
    the agent's request it names, or is dropped). Started with ``nursery.start``, it reports the
    :class:`AgentConnection` once it serves. Raises :class:`~agent_meta.TransportBrokenError` /
    :class:`~agent_meta.OwnerClosedError` when the output breaks, and
    :class:`~agent_meta.TransportBrokenError` when frames accepted before the end could not
    all be written within ``options.drain_timeout`` or the bound of
    :meth:`AgentConnection.shutdown` (the client stopped reading).
    """
    versions = tuple(sorted(set(protocol_versions)))
    if not versions or not set(versions) <= set(SUPPORTED_PROTOCOL_VERSIONS):
        raise ValueError(f"protocol_versions must be a non-empty subset of (1, 2): {versions!r}")
    reader = NdjsonLineReader(receive_stream, max_line_bytes=max_line_bytes)
    highest: Literal[1, 2] = 2 if versions[-1] == 2 else 1
    options = dataclasses.replace(options or OwnerOptions(), protocol_version=highest)
    stop = trio.CancelScope()  # a graceful stop's bound, the owner's last writes included
    flushed = False
    with stop:
        async with open_owner(send_stream, options, store=store) as owner:
            async with trio.open_nursery() as background:
                connection = AgentConnection(
                    owner, agent, protocol_versions=versions, background=background, stop_scope=stop
                )
                async with trio.open_nursery() as requests:
                    connection._requests = requests
                    task_status.started(connection)
                    with connection._reading:
                        await _read_loop(connection, reader, requests)
                    connection._input_ended()
                background.cancel_scope.cancel()
            with trio.move_on_after(options.drain_timeout):
                await owner.wait_flushed()
                flushed = True
            if not flushed:  # the owner would only wait again: stop it now
                raise unwritten_error(f"within the drain timeout of {options.drain_timeout} s")
    if not flushed:
        raise unwritten_error("within the bound of the graceful stop")


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
    handle_signals: bool = False,
) -> None:
    """:func:`serve_agent` over this process's stdin and stdout (which then carry only ACP).

    Duplicates of the file descriptors are used, so closing the streams leaves ``sys.stdin``
    and ``sys.stdout`` usable; log to stderr. With ``handle_signals``, the first SIGTERM or
    SIGINT stops the agent gracefully (:meth:`AgentConnection.shutdown`: it returns within a
    bounded time, having written what was accepted) and a second one ends the process at once.
    """
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    serve = functools.partial(
        serve_agent,
        agent,
        stdin,
        stdout,
        protocol_versions=protocol_versions,
        max_line_bytes=max_line_bytes,
        options=options,
        store=store,
    )
    async with stdin, stdout:
        if not handle_signals:
            await serve()
            return
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:

                async def serve_then_stop_watching(
                    *, task_status: trio.TaskStatus[AgentConnection] = trio.TASK_STATUS_IGNORED
                ) -> None:
                    try:
                        await serve(task_status=task_status)
                    finally:
                        nursery.cancel_scope.cancel()  # the signal watcher's work is over

                connection = await nursery.start(serve_then_stop_watching)
                nursery.start_soon(_stop_on_signals, connection, signals)


async def _stop_on_signals(connection: AgentConnection, signals: AsyncIterator[int]) -> None:
    stopping = False
    async for signum in signals:
        if stopping:
            logger.warning("signal %d again: exiting at once", signum)
            os._exit(128 + signum)
        logger.warning("signal %d: stopping (send it again to exit at once)", signum)
        stopping = True
        connection.shutdown()


def run_stdio_agent(
    agent_factory: Callable[[], Agent],
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    handle_signals: bool = True,
) -> None:
    """Run the agent made by ``agent_factory`` on stdio until stdin ends (own trio run).

    SIGTERM and SIGINT stop it gracefully (see :func:`serve_stdio`) unless ``handle_signals``
    is false.
    """

    async def main() -> None:
        await serve_stdio(
            agent_factory(),
            protocol_versions=protocol_versions,
            max_line_bytes=max_line_bytes,
            options=options,
            store=store,
            handle_signals=handle_signals,
        )

    trio.run(main)
