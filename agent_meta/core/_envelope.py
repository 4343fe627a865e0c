"""One NDJSON line to JSON, and whether that JSON is one JSON-RPC 2.0 message, without pydantic.

:func:`parse_line` reads a line as the wire's JSON (:data:`~agent_meta.core._json.STRICT_JSON`:
no ``NaN`` or ``Infinity``, no number a double cannot hold; UTF-8).

:func:`envelope_fault` is the rule the wire decoder applies before it builds its pydantic
envelope (:func:`agent_meta.wire._decode.message_from_json`), and what a connection that only
forwards messages applies alone (``agent-meta own`` must not pay for pydantic on its path): a
request, a notification, a success or an error response, with exactly the members JSON-RPC
gives each (``jsonrpc: "2.0"``; an id that is an int64, a string, or ``null`` where allowed;
a string method; params an object or an array; an error with an integer code and a string
message). Anything else earns ``-32600 Invalid Request``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

from ._json import STRICT_JSON, NumberOverflowError, reject_json_constant
from ._jsonrpc import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "EnvelopeFault",
    "LineParseError",
    "envelope_fault",
    "parse_line",
    "readable_id",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_REQUEST: Final = frozenset({"jsonrpc", "id", "method", "params"})
_NOTIFICATION: Final = frozenset({"jsonrpc", "method", "params"})
_SUCCESS: Final = frozenset({"jsonrpc", "id", "result"})
_ERROR: Final = frozenset({"jsonrpc", "id", "error"})
_ERROR_OBJECT: Final = frozenset({"code", "message", "data"})


class LineParseError(ValueError):
    """A line is not JSON (or not UTF-8): answer ``-32700 Parse error``. ``request_id`` is the
    readable id of a line that is JSON except for a number no double can hold (``1e400``)."""

    code: ClassVar[int] = ErrorCode.PARSE_ERROR
    is_response: ClassVar[bool] = False  # what is no JSON has no shape

    def __init__(self, message: str, *, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


def parse_line(line: bytes | str) -> Any:
    """Parse one NDJSON line (surrounding whitespace and the newline allowed) into JSON data.

    Raises :class:`LineParseError` for invalid UTF-8, invalid JSON, ``NaN`` / ``Infinity`` and
    numbers too large for a float.
    """
    try:
        text = line.decode("utf-8") if isinstance(line, bytes | bytearray) else line
    except ValueError as exc:
        raise LineParseError(f"not a JSON message: {exc}") from None
    try:
        return STRICT_JSON.decode(text)
    except NumberOverflowError as exc:
        raise LineParseError(
            f"not a JSON message: {exc}", request_id=_id_despite_overflow(text)
        ) from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise LineParseError(f"not a JSON message: {exc}") from None
    except RecursionError:
        raise LineParseError("not a JSON message: nested too deeply to parse") from None


def _id_despite_overflow(text: str) -> int | str | None:
    """The ``id`` of an otherwise valid message holding a number too large for a double."""
    try:
        data = json.loads(text, parse_constant=reject_json_constant, parse_float=lambda _: 0.0)
    except (ValueError, RecursionError):
        return None
    return readable_id(data) if isinstance(data, dict) else None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class EnvelopeFault:
    """Why a JSON value is not a JSON-RPC message (answer ``-32600``).

    ``request_id`` is its readable ``id`` (an int64 or a string), else ``None``;
    ``is_response``: it has the shape of a response (no ``method``, but an ``id``, a ``result``
    or an ``error``), which JSON-RPC never answers.
    """

    message: str
    request_id: int | str | None = None
    is_response: bool = False

    @property
    def code(self) -> int:
        """The code it earns (the inbound gate answers it so)."""
        return ErrorCode.INVALID_REQUEST

    def __str__(self) -> str:
        return self.message


EMPTY_BATCH: Final = "an empty batch is not a valid request"
NESTED_BATCH: Final = "a batch entry cannot be a batch"


def batch_entries(data: list[object]) -> list[dict[str, Any] | EnvelopeFault] | EnvelopeFault:
    """The entries of a batch (a JSON array), each a message or why it is none, as the wire
    decoder reads them: an invalid entry is answered with ``id: null``, unless it has the
    shape of a response (never answered); an empty array is no batch at all."""
    if not data:
        return EnvelopeFault(EMPTY_BATCH)
    entries: list[dict[str, Any] | EnvelopeFault] = []
    for item in data:
        fault = EnvelopeFault(NESTED_BATCH) if isinstance(item, list) else envelope_fault(item)
        if fault is None:
            assert isinstance(item, dict)  # envelope_fault found no fault: an object
            entries.append(item)
        elif fault.is_response:
            entries.append(fault)
        else:
            entries.append(EnvelopeFault(fault.message))
    return entries


def readable_id(data: Mapping[str, object]) -> int | str | None:
    """The ``id`` of a message when it is one a response can carry (an int64 or a string)."""
    value = data.get("id")
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return value if type(value) is str else None


def envelope_fault(data: object) -> EnvelopeFault | None:
    """Why ``data`` (parsed JSON, not a batch) is not one JSON-RPC message; ``None`` if it is."""
    if not isinstance(data, dict):
        kind = "array" if isinstance(data, list) else type(data).__name__
        return EnvelopeFault(f"a JSON-RPC message is an object, not {kind}")
    request_id = readable_id(data)
    response = "method" not in data and not {"id", "result", "error"}.isdisjoint(data)

    def fault(message: str) -> EnvelopeFault:
        return EnvelopeFault(message, request_id, response)

    if "method" in data:
        kind, members = ("request", _REQUEST) if "id" in data else ("notification", _NOTIFICATION)
    elif "error" in data:
        kind, members = "error response", _ERROR
    elif "result" in data:
        kind, members = "response", _SUCCESS
    else:
        return fault("a JSON-RPC message needs a method, a result or an error")
    if data.get("jsonrpc") != "2.0":
        return fault('"jsonrpc" must be "2.0"')
    unknown = sorted(str(key) for key in data.keys() - members)
    if unknown:
        return fault(f"a JSON-RPC {kind} has no member {', '.join(map(repr, unknown))}")
    problem = _member_problem(kind, data)
    return None if problem is None else fault(f"invalid {kind}: {problem}")


def _member_problem(kind: str, data: Mapping[str, object]) -> str | None:
    if kind in ("response", "error response") and "id" not in data:
        return "a response needs the id of the request it answers"
    if "id" in data and not _valid_id(data["id"], null=kind != "response"):
        return "the id must be an integer (int64), a string" + (
            "" if kind == "response" else " or null"
        )
    if kind in ("request", "notification"):
        if not isinstance(data["method"], str):
            return "the method must be a string"
        if "params" in data and not isinstance(data["params"], dict | list):
            return "params must be an object or an array"
        return None
    if kind == "error response":
        return _error_problem(data["error"])
    return None


def _valid_id(value: object, *, null: bool) -> bool:
    if value is None:
        return null
    if type(value) is int:
        return INT64_MIN <= value <= INT64_MAX
    return type(value) is str


def _error_problem(error: object) -> str | None:
    if not isinstance(error, dict):
        return "the error must be an object"
    unknown = sorted(str(key) for key in error.keys() - _ERROR_OBJECT)
    if unknown:
        return f"the error has no member {', '.join(map(repr, unknown))}"
    if type(error.get("code")) is not int:
        return "the error code must be an integer"
    if type(error.get("message")) is not str:
        return "the error message must be a string"
    return None
