"""The JSON-RPC error each exception out of a request's handling earns, for both connections.

A request fails when its handler raises, or before it runs, when the lifetime store cannot be
read to open the lifetime it names. What the client is told depends only on the exception's
class; the store's location and the database's own message are never part of it (they go to
the agent's log, :attr:`Failure.report`).
"""

from __future__ import annotations

import dataclasses
from typing import final

from ...core._errors import (
    STORE_FAILED_MESSAGE,
    AgentMetaError,
    ConnectionClosedError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
    UnknownSessionError,
)
from ...core._jsonrpc import ErrorCode, JsonRpcError

__all__ = ["Failure", "failure_of"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """How a request that failed with an exception is answered."""

    error: JsonRpcError
    """The error response's code, message and data."""
    report: bool
    """Whether the agent's log must hold the exception (its traceback, the store's detail):
    the client is told less than it."""


def failure_of(exc: Exception) -> Failure | None:
    """The answer to a request whose handling raised ``exc``, or ``None`` when the connection
    itself failed (its owner stopped, its transport broke): that ends the connection instead.

    - :class:`~agent_meta.JsonRpcError`: itself;
    - :class:`~agent_meta.UnknownSessionError`: ``-32002`` "session not found: ...";
    - :class:`~agent_meta.ConnectionClosedError`: ``-32603`` "internal error: ...";
    - :class:`~agent_meta.StoreError`: ``-32603`` with :data:`STORE_FAILED_MESSAGE` only
      (reported);
    - any other :class:`~agent_meta.AgentMetaError` (a bad value): ``-32602`` "invalid params:
      ...";
    - anything else: ``-32603`` "internal error: " and the exception's class name (reported).
    """
    if isinstance(exc, JsonRpcError):
        return Failure(exc, report=False)
    if isinstance(exc, OwnerClosedError | TransportBrokenError):
        return None
    if isinstance(exc, UnknownSessionError):
        return Failure(
            JsonRpcError(ErrorCode.RESOURCE_NOT_FOUND, f"session not found: {exc}"), report=False
        )
    if isinstance(exc, ConnectionClosedError):
        return Failure(
            JsonRpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {exc}"), report=False
        )
    if isinstance(exc, StoreError):  # its text names the store: for the agent's log only
        return Failure(JsonRpcError(ErrorCode.INTERNAL_ERROR, STORE_FAILED_MESSAGE), report=True)
    if isinstance(exc, AgentMetaError):
        return Failure(
            JsonRpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {exc}"), report=False
        )
    unexpected = JsonRpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
    return Failure(unexpected, report=True)
