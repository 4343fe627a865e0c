"""Dispatching one connection's inbound messages, and answering them.

:class:`Dispatcher` decodes each line (a message or a batch) and hands it to the connection's
:class:`~agent_meta.owner._shell.ConnectionShell`, as the official-SDK adapter and
``agent-meta own`` do: the shell decides what is answered before any handler runs (refusals,
``initialize`` negotiation, ``$/cancel_request``, batches, a store that fails), keeps the
lifetimes as ACP says around every request and response, serves ``session/set_title`` (R13), and
says what each response becomes on its way out. The dispatcher carries it out the trio way: each
request's handler runs in a task of its own, in a cancel scope (so a long ``session/prompt``
never blocks ``session/cancel``), and what it raises is answered as
:func:`~agent_meta.sansio.inbound._handler_errors.failure_of` says.

A handler's code up to its first checkpoint runs before the next inbound message is read, so a
handler can register state (a cancel scope, say) that a later message is guaranteed to see.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import trio

from ..core._errors import AgentMetaError, OwnerClosedError, TransportBrokenError
from ..core._jsonrpc import ErrorCode, JsonRpcError, session_of
from ..sansio.inbound._handler_errors import failure_of
from ..sansio.inbound._titles import SET_TITLE
from ..wire._decode import InvalidMessageError, MessageDecodeError, decode_raw
from ._agent import RequestContext, not_supported
from ._work import Work

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ..core._json import JsonObject
    from ..core._jsonrpc import RequestId
    from ..owner._shell import ConnectionShell, Intake
    from ..sansio.inbound._gate import Answer, InboundGate, Undecodable
    from ..sansio.inbound._handler_errors import Failure
    from ._connection import AgentConnection
    from ._outbound import OutboundRequests
    from ._work import SessionWork

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

_AfterResponse = tuple[str, "Callable[[], Awaitable[None]]"]


class Dispatcher:
    """Routes the inbound messages of one connection and sends their answers."""

    def __init__(
        self,
        connection: AgentConnection,
        *,
        versions: tuple[int, ...],
        work: SessionWork,
        outbound: OutboundRequests,
        shell: ConnectionShell,
    ) -> None:
        self._connection = connection
        self._owner = connection.owner
        self._agent = connection.agent
        self._shell = shell
        self.protocol_version = versions[-1]
        """The negotiated version; before ``initialize``, the highest one allowed."""
        self._work = work
        self._outbound = outbound
        # The after_response callbacks of responses held in a batch, by request id.
        self._after: dict[RequestId, list[_AfterResponse]] = {}

    @property
    def gate(self) -> InboundGate:
        """What is answered before any handler runs, and what responses become."""
        return self._shell.gate

    @property
    def initialized(self) -> bool:
        """Whether ``initialize`` has been answered successfully."""
        return self._shell.gate.initialized

    # -- inbound ----------------------------------------------------------------------------
    async def dispatch_line(self, line: bytes, nursery: trio.Nursery) -> None:
        """Decode one line and start what it asks for (each request in ``nursery``)."""
        try:
            decoded = decode_raw(line)
        except MessageDecodeError as exc:
            if exc.is_response:  # it fails the agent's request it names, if one waits
                self._outbound.malformed(exc.request_id, str(exc))
            await self.refuse(exc)
            return
        if isinstance(decoded, list):
            for entry in decoded:
                if isinstance(entry, InvalidMessageError) and entry.is_response:
                    self._outbound.malformed(entry.request_id, str(entry))
        intake = self._shell.take(decoded)
        if intake.ignored is not None:
            logger.info("ignoring a notification: %s", intake.ignored)
        for message in intake.messages:
            await self._dispatch(message, nursery)
        await self._write(intake)

    async def refuse(self, failure: Undecodable) -> None:
        """Answer a line that is no JSON-RPC message as the gate says."""
        await self._write(self._shell.take(failure))

    async def _write(self, intake: Intake) -> None:
        if intake.answer is not None:
            await self._owner.send_encoded(intake.answer, None)

    async def _dispatch(self, message: Mapping[str, Any], nursery: trio.Nursery) -> None:
        if "method" not in message:
            self._outbound.answer(message)
        elif "id" in message:
            await nursery.start(self._run_request, message)
        else:
            await nursery.start(self._run_notification, message)

    # -- requests ---------------------------------------------------------------------------
    async def _run_request(
        self,
        message: Mapping[str, Any],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        request_id, method = message["id"], message["method"]
        params: JsonObject = message.get("params") or {}  # the gate refused an array
        ctx = RequestContext(
            self._connection, request_id, method, session_of(params), responder=self._result
        )
        # A load or resume takes its stored lifetime over here: a store round trip, before the
        # next request is read (so that a request pipelined behind it finds it open).
        admitted = await self._shell.admit(message)
        if admitted.answer is not None:  # the store failed: that is its answer
            task_status.started()
            await self._send(ctx, admitted.answer)
            return
        work = Work(trio.CancelScope(), method, ctx.session_id, ctx=ctx)
        self._work.handlers.append(work)
        task_status.started()
        try:
            await self._handle(ctx, work, params)
        finally:
            self._work.handlers.remove(work)
            work.done.set()

    async def _handle(self, ctx: RequestContext, work: Work, params: JsonObject) -> None:
        """Run the handler of one request and answer it as it ended."""
        failure: Failure | None = None
        result: JsonObject = {}
        with work.scope:
            try:
                result = await self._call(ctx, params)
            except Exception as exc:
                failure = self._failure(ctx.method, exc)
        if ctx.responded:
            if failure is not None:
                logger.warning("%s failed after answering: %s", ctx.method, failure.error.message)
        elif work.scope.cancelled_caught:
            cancelled = JsonRpcError(ErrorCode.REQUEST_CANCELLED, "request cancelled")
            await self._respond(ctx, {"error": cancelled.to_error()})
        elif failure is not None:
            await self._respond(ctx, {"error": failure.error.to_error()})
        else:
            await ctx.respond(result)

    @staticmethod
    def _failure(method: str, exc: Exception) -> Failure:
        """How a request whose handling raised ``exc`` is answered; re-raises what ends the
        connection instead (its owner stopped, its transport broke)."""
        failure = failure_of(exc)
        if failure is None:
            raise exc
        if failure.report:
            logger.error("%s failed: %s", method, failure.error.message, exc_info=exc)
        return failure

    async def _call(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        method = ctx.method
        if method == "initialize":
            return await self._initialize(ctx, params)
        if method == SET_TITLE:  # the connection's own (R13): the agent never sees it
            return await self._shell.policy.set_title(params)
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
        version = params["protocolVersion"]  # the gate negotiated it: a version served here
        assert type(version) is int
        try:
            self._owner.set_protocol_version(version)
        except (AgentMetaError, RuntimeError) as exc:
            raise JsonRpcError(
                ErrorCode.INVALID_REQUEST, f"cannot initialize again: {exc}"
            ) from exc
        self.protocol_version = version
        result = await self._agent.initialize(ctx, params)
        return {"protocolVersion": version, **result}

    # -- answers ----------------------------------------------------------------------------
    async def _result(self, ctx: RequestContext, result: object) -> None:
        """Answer with ``result`` (``ctx.respond``), as the shell rewrites it (an ``initialize``
        advertises ``session/set_title``, a ``session/list`` lists client-set titles); one that
        cannot be sent (not JSON, over ``max_frame_bytes``) becomes ``-32603`` (the gate), so a
        bad result costs that request, not the connection (R12)."""
        await self._respond(ctx, {"result": result})

    async def _respond(self, ctx: RequestContext, payload: dict[str, Any]) -> None:
        """Queue the response as the shell says (alone, or with the batch it completes), after
        the lifetime step it needs; then run the ``after_response`` callbacks of what was
        queued (a success's only)."""
        message = {"jsonrpc": "2.0", "id": ctx.request_id, **payload}
        await self._send(ctx, await self._shell.respond(message))

    async def _send(self, ctx: RequestContext, answer: Answer) -> None:
        callbacks = [(ctx.method, callback) for callback in ctx._after]
        if "result" not in answer.response:
            callbacks = []
        if answer.frame is None:  # held until the last response of its batch
            self._after[ctx.request_id] = callbacks
            return
        await self._owner.send_encoded(answer.frame, None)
        self._shell.sent(answer)
        for request_id in answer.answered:
            held = callbacks if request_id == ctx.request_id else self._after.pop(request_id, [])
            for method, callback in held:
                await self._run_after_response(method, callback)

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
        message: Mapping[str, Any],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        method = message["method"]
        params: JsonObject = message.get("params") or {}  # the gate dropped an array
        try:
            if method == "$/cancel_request":  # of a request still unanswered (the gate)
                self._work.cancel_request(cast("int | str", params["requestId"]))
            elif method == "session/cancel":  # of a session named by a string (the gate)
                await self._agent.cancel(self._connection, params)
            else:
                await self._agent.ext_notification(self._connection, method, params)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except Exception:
            logger.exception("notification handler for %r failed", method)
