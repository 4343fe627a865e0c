"""The agent's own requests to the client: ids, waiting for the answer, cancelling, ending.

ACP lets each side pick the ids of its own requests (the same id may be in use in both
directions), so the connection numbers its requests itself and matches every inbound response
to a waiting caller by id. A response nobody waits for (answered after a cancellation, or
never asked) is logged and dropped. A response is never answered: a malformed one fails the
request it names (:class:`ClientRequestError`, ``-32600``), or is logged and dropped.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

import trio

from ..core._errors import AgentMetaError, ConnectionClosedError
from ..core._jsonrpc import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..core._json import JsonValue

__all__ = ["ClientRequestError", "OutboundRequests", "PendingRequest"]

logger = logging.getLogger("agent_meta.connection")


class ClientRequestError(AgentMetaError):
    """The client answered the agent's request with a JSON-RPC error, or with a malformed
    response.

    ``code``, ``message`` and ``data`` are the client's error object (``data`` is ``None`` when
    it sent none); for a malformed response, ``code`` is ``-32600`` and ``message`` says what
    is wrong with it. ``method`` and ``request_id`` name the request.
    """

    def __init__(
        self, method: str, request_id: int, code: int, message: str, data: JsonValue = None
    ) -> None:
        super().__init__(f"{method} (request {request_id}) failed: {code} {message}")
        self.method = method
        self.request_id = request_id
        self.code = code
        self.message = message
        self.data = data


class PendingRequest:
    """One request of the agent that waits for the client's answer."""

    __slots__ = ("_done", "answered", "error", "method", "request_id", "result", "session_id")

    def __init__(self, request_id: int, method: str, session_id: str | None) -> None:
        self.request_id = request_id
        self.method = method
        self.session_id = session_id
        self.result: Any = None
        self.error: AgentMetaError | None = None
        self.answered = False
        """True once the client answered (a request failed because the connection is going
        away is not answered: cancelling it still tells the client)."""
        self._done = trio.Event()

    def settle(
        self, *, result: Any = None, error: AgentMetaError | None = None, answered: bool = True
    ) -> None:
        if not self._done.is_set():
            self.result = result
            self.error = error
            self.answered = answered
            self._done.set()

    async def wait(self) -> JsonValue:
        """The client's result; raises what the answer (or the lack of one) means."""
        await self._done.wait()
        if self.error is not None:
            raise self.error
        result: JsonValue = self.result
        return result


class OutboundRequests:
    """The agent's requests in flight, by id."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[int, PendingRequest] = {}
        self._closed: str | None = None

    def open(self, method: str, session_id: str | None) -> PendingRequest:
        """A new request with a fresh id; raises :class:`ConnectionClosedError` once closed."""
        if self._closed is not None:
            raise ConnectionClosedError(f"cannot send {method}: {self._closed}")
        pending = PendingRequest(next(self._ids), method, session_id)
        self._pending[pending.request_id] = pending
        return pending

    def forget(self, pending: PendingRequest) -> None:
        self._pending.pop(pending.request_id, None)

    def answer(self, message: Mapping[str, Any]) -> None:
        """Route a response from the client (checked to be a valid one) to the request it
        answers."""
        request_id = message.get("id")
        pending = self._pending.pop(request_id, None) if type(request_id) is int else None
        if pending is None:
            logger.warning("ignoring a response to unknown request id %r", request_id)
            return
        if "error" in message:
            error = message["error"]
            pending.settle(
                error=ClientRequestError(
                    pending.method,
                    pending.request_id,
                    error["code"],
                    error["message"],
                    error.get("data"),
                )
            )
        else:
            pending.settle(result=message["result"])

    def malformed(self, request_id: int | str | None, reason: str) -> None:
        """A response-shaped message that is not a valid response: it fails the request it
        names, if one waits, else it is logged and dropped. It is never answered."""
        pending = self._pending.pop(request_id, None) if type(request_id) is int else None
        if pending is None:
            logger.warning("ignoring a malformed response (id %r): %s", request_id, reason[:300])
            return
        message = f"the client's answer is malformed: {reason[:300]}"
        pending.settle(
            error=ClientRequestError(
                pending.method, pending.request_id, ErrorCode.INVALID_REQUEST, message
            )
        )

    def for_session(self, session_id: str) -> list[PendingRequest]:
        """The requests in flight that belong to ``session_id``."""
        return [p for p in self._pending.values() if p.session_id == session_id]

    def close(self, reason: str) -> None:
        """No answer can arrive any more: every waiting request fails, and so does every new
        one."""
        if self._closed is None:
            self._closed = reason
        for pending in list(self._pending.values()):
            pending.settle(
                error=ConnectionClosedError(
                    f"{pending.method} (request {pending.request_id}) got no answer: {reason}"
                ),
                answered=False,
            )
        self._pending.clear()
