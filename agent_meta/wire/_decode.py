"""Decoding inbound NDJSON lines into JSON-RPC messages, strictly (R12).

:func:`decode` is the one decoder: a line is one message or a batch. What is not a message earns
a typed error carrying the JSON-RPC code to answer (``-32700`` for what is not JSON,
``-32600`` for JSON that is not a JSON-RPC message), and the request id when it can still be
read, so that a connection answers it and goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

from pydantic import ValidationError

from ..core._envelope import (
    EMPTY_BATCH,
    NESTED_BATCH,
    LineParseError,
    envelope_fault,
    parse_line,
    readable_id,
)
from ..core._errors import AgentMetaError

if TYPE_CHECKING:
    from collections.abc import Callable

from ._models import (
    MESSAGE_TYPES,
    JsonRpcErrorResponse,
    JsonRpcMessage,
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcSuccessResponse,
    WireModel,
)

__all__ = [
    "BatchEntry",
    "InvalidMessageError",
    "MessageDecodeError",
    "MessageParseError",
    "RawMessage",
    "decode",
    "decode_message",
    "decode_raw",
    "message_from_json",
    "parse_json_line",
]


_T = TypeVar("_T")


class MessageDecodeError(AgentMetaError, ValueError):
    """An inbound line is not a JSON-RPC message; ``code`` is the JSON-RPC error code to answer.

    ``request_id`` is the message's ``id`` when one could still be read (an int64 or a string),
    else ``None``; JSON-RPC says to answer with ``id: null`` when the id cannot be determined.
    """

    code: ClassVar[int]
    is_response: bool = False
    """Whether the message is shaped like a response (:class:`InvalidMessageError`): never
    answered."""

    def __init__(self, message: str, *, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class MessageParseError(MessageDecodeError):
    """The line is not JSON (or not UTF-8): answer ``-32700 Parse error``. A line that is JSON
    except for a number no double can hold (``1e400``) keeps its readable ``request_id``."""

    code: ClassVar[int] = -32700


class InvalidMessageError(MessageDecodeError):
    """The line is JSON but not a valid JSON-RPC message: answer ``-32600 Invalid Request``.
    ``__cause__`` holds the pydantic ``ValidationError`` when there is one.

    ``is_response``: the message has the shape of a response (an object with no ``method`` but
    an ``id``, a ``result`` or an ``error``). JSON-RPC never answers a response, so a receiver
    must not answer this one either; ``request_id`` is then the id of the request it claims to
    answer, when readable (in a batch too).
    """

    code: ClassVar[int] = -32600

    def __init__(
        self, message: str, *, request_id: int | str | None = None, is_response: bool = False
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.is_response = is_response


def parse_json_line(line: bytes | str) -> Any:
    """Parse one NDJSON line (surrounding whitespace and the newline allowed) into JSON data.

    Raises :class:`MessageParseError` for invalid UTF-8, invalid JSON, ``NaN`` / ``Infinity``
    and numbers too large for a float (the rule of :func:`agent_meta.core._envelope.parse_line`).
    """
    try:
        return parse_line(line)
    except LineParseError as exc:
        raise MessageParseError(str(exc), request_id=exc.request_id) from None


def message_from_json(data: Any) -> JsonRpcMessage:
    """Turn parsed JSON into the matching envelope, or raise :class:`InvalidMessageError`.

    A message with ``method`` is a request (with ``id``) or a notification (without); otherwise
    ``error`` makes an error response and ``result`` a success response. Batches (JSON arrays)
    are not messages: split them and call this per element. Whether ``data`` is a message at
    all is :func:`~agent_meta.core._envelope.envelope_fault`'s decision (a connection that
    only forwards messages makes it without pydantic); the model is built after.
    """
    if isinstance(data, list):
        raise InvalidMessageError("a batch (JSON array) is not a single message: see decode_line")
    fault = envelope_fault(data)
    if fault is not None:
        raise InvalidMessageError(
            fault.message, request_id=fault.request_id, is_response=fault.is_response
        )
    model: type[WireModel]
    if "method" in data:
        model = JsonRpcRequest if "id" in data else JsonRpcNotification
    elif "error" in data:
        model = JsonRpcErrorResponse
    else:
        model = JsonRpcSuccessResponse
    try:
        message = model.model_validate(data)
    except ValidationError as exc:
        raise InvalidMessageError(
            f"invalid {model.__name__}: {exc}",
            request_id=readable_id(data),
            is_response="method" not in data,
        ) from exc
    assert isinstance(message, MESSAGE_TYPES)
    return message


BatchEntry: TypeAlias = "JsonRpcMessage | InvalidMessageError"
"""One entry of a batch: a message, or the error its entry earns (answered with ``id: null``)."""

RawMessage: TypeAlias = "dict[str, Any]"
"""A JSON-RPC message as it was received: its JSON object, checked to be a valid message."""


def decode(line: bytes | str) -> JsonRpcMessage | list[BatchEntry]:
    """Decode one NDJSON line: a single message, or a JSON-RPC batch (a non-empty array).

    Each batch entry is decoded on its own; an invalid entry becomes its
    :class:`InvalidMessageError` (with ``request_id`` ``None``, as the batch rules say, unless
    it :attr:`~InvalidMessageError.is_response`) and does not spoil the others. An empty array
    raises :class:`InvalidMessageError`; a line that is not JSON raises
    :class:`MessageParseError`.
    """
    data = parse_json_line(line)
    if not isinstance(data, list):
        return message_from_json(data)
    return _entries(data, message_from_json)


def decode_raw(line: bytes | str) -> RawMessage | list[RawMessage | InvalidMessageError]:
    """Decode one NDJSON line as :func:`decode` does, but keep each message as the JSON object
    received (what a connection hands on, and the SDK reads), once it is checked to be one."""
    data = parse_json_line(line)
    if not isinstance(data, list):
        return _checked(data)
    return _entries(data, _checked)


def _checked(data: Any) -> RawMessage:
    message_from_json(data)  # raises unless it is a valid message: a JSON object
    checked: RawMessage = data
    return checked


def _entries(data: list[Any], decode_entry: Callable[[Any], _T]) -> list[_T | InvalidMessageError]:
    """The entries of a batch, each decoded on its own (see :func:`decode`)."""
    if not data:
        raise InvalidMessageError(EMPTY_BATCH)
    entries: list[_T | InvalidMessageError] = []
    for item in data:
        if isinstance(item, list):
            entries.append(InvalidMessageError(NESTED_BATCH))
            continue
        try:
            entries.append(decode_entry(item))
        except InvalidMessageError as exc:
            if not exc.is_response:
                exc.request_id = None
            entries.append(exc)
    return entries


def decode_message(line: bytes | str) -> JsonRpcMessage:
    """Decode one NDJSON line into a JSON-RPC envelope.

    Raises :class:`MessageParseError` (``-32700``) when the line is not JSON and
    :class:`InvalidMessageError` (``-32600``) when it is JSON but not one valid JSON-RPC 2.0
    message. Both are :class:`MessageDecodeError` with the code to answer in ``code``.
    """
    return message_from_json(parse_json_line(line))
