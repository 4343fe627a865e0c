"""JSON-RPC request ids, error codes, the handlers' error type and version negotiation (pure).

Decoding a line into an envelope is :mod:`agent_meta.wire._models`' job; this module names what
a request id is (:data:`RequestId`, :func:`is_request_id`) and the session a message belongs to
(:func:`session_of`), the error codes ACP uses (:class:`ErrorCode`), and gives handlers one
exception type, :class:`JsonRpcError`, that the connection turns into an error response.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._json import JsonObject, JsonValue

__all__ = [
    "MAX_PROTOCOL_VERSION",
    "ErrorCode",
    "JsonRpcError",
    "RequestId",
    "is_request_id",
    "negotiate_version",
    "optional_str",
    "require_object_list",
    "require_str",
    "session_of",
]

RequestId: TypeAlias = int | str | None
"""A JSON-RPC request id, as ACP's schema has it: an integer, a string or ``null`` (a
``session/load`` with ``"id": null`` is served like any other). The wire's pydantic models
validate their own (:data:`agent_meta.wire._models.RequestId`, an int64 or a string)."""


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """Whether ``value`` is a :data:`RequestId` (a ``bool`` is not)."""
    return value is None or isinstance(value, str) or (type(value) is int)


def session_of(params: object) -> str | None:
    """The session a notification or request belongs to: its ``params.sessionId`` (ACP's
    convention for every session-scoped method), or ``None``."""
    if isinstance(params, Mapping):
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            return session_id
    return None


class ErrorCode(enum.IntEnum):
    """The JSON-RPC error codes ACP answers with (an ``int``: ``json.dumps`` writes the number).

    =================================  ======  ==================================================
    member                             code    when
    =================================  ======  ==================================================
    ``PARSE_ERROR``                    -32700  the line is not JSON (or not UTF-8)
    ``INVALID_REQUEST``                -32600  not a valid JSON-RPC 2.0 message, or at the wrong
                                               time (before ``initialize``, an id in flight)
    ``METHOD_NOT_FOUND``               -32601  no handler for the method
    ``INVALID_PARAMS``                 -32602  a field is missing, or of the wrong type or value
    ``INTERNAL_ERROR``                 -32603  the handler failed unexpectedly; the connection
                                               goes on
    ``REQUEST_CANCELLED``              -32800  cancelled (``$/cancel_request``) before it finished
    ``RESOURCE_NOT_FOUND``             -32002  ACP: a resource, such as a session, was not found
    ``UNSUPPORTED_PROTOCOL_VERSION``   -32022  ACP v2: no version the agent supports is at or
                                               below the one requested
    =================================  ======  ==================================================
    """

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    RESOURCE_NOT_FOUND = -32002
    UNSUPPORTED_PROTOCOL_VERSION = -32022


class JsonRpcError(Exception):
    """Raise from a handler to answer the request with this JSON-RPC error (never a crash)."""

    def __init__(self, code: int, message: str, data: JsonValue | None = None) -> None:
        super().__init__(message)
        self.code = int(code)  # an ErrorCode is written as its number
        self.message = message
        self.data = data

    def to_error(self) -> JsonObject:
        """The ``error`` member of the response: ``code``, ``message`` and ``data`` if any."""
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


# --------------------------------------------------------------------------- params checks


def require_str(params: Mapping[str, Any], name: str) -> str:
    """``params[name]`` as a string, or ``-32602`` naming the field."""
    value = params.get(name)
    if not isinstance(value, str):
        problem = "is missing" if name not in params else f"must be a string, not {_kind(value)}"
        raise JsonRpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {name!r} {problem}")
    return value


def optional_str(params: Mapping[str, Any], name: str) -> str | None:
    """``params[name]`` as a string, ``None`` when omitted or ``null``, else ``-32602``."""
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: {name!r} must be a string, not {_kind(value)}",
        )
    return value


def require_object_list(params: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """``params[name]`` as a non-empty list of objects, or ``-32602``."""
    value = params.get(name)
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(item, dict) for item in value)
    ):
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: {name!r} must be a non-empty array of objects",
        )
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


MAX_PROTOCOL_VERSION = 65535
"""The largest ``protocolVersion``: ACP types it ``uint16``."""


def negotiate_version(requested: object, supported: Sequence[int]) -> int:
    """The protocol version ``initialize`` answers: the highest of ``supported`` (ascending) at
    or below ``requested``.

    A version that is not an integer from 0 to 65535 (ACP's ``ProtocolVersion`` is a
    ``uint16``) is ``-32602``; one below every supported version is ``-32022`` with
    ``data: {"requested", "supported"}``, as the ACP v2 schema says (the connection stays open
    for another ``initialize``).
    """
    if type(requested) is not int or not 0 <= requested <= MAX_PROTOCOL_VERSION:
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            "invalid params: 'protocolVersion' must be an integer from 0 to 65535 (uint16)",
        )
    at_or_below = [version for version in supported if version <= requested]
    if not at_or_below:
        data: JsonObject = {"requested": requested, "supported": list(supported)}
        raise JsonRpcError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data
        )
    return at_or_below[-1]
