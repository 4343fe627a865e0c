"""JSON-RPC plumbing for the agent-side connection: NDJSON line reading, error codes, params.

Decoding a line into an envelope is :mod:`agent_meta._wire`'s job; this module frames the byte
stream into lines (with a size limit, so one huge line cannot exhaust memory), names the error
codes ACP uses, and gives handlers one exception type, :class:`JsonRpcError`, that the
connection turns into an error response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

    import trio

    from ._json import JsonObject, JsonValue

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "IncompleteLineError",
    "JsonRpcError",
    "LineTooLongError",
    "NdjsonLineReader",
    "optional_str",
    "require_object_list",
    "require_str",
]

PARSE_ERROR: Final = -32700
"""The line is not JSON (or not UTF-8)."""
INVALID_REQUEST: Final = -32600
"""The JSON is not a valid JSON-RPC 2.0 message (or arrives at the wrong time)."""
METHOD_NOT_FOUND: Final = -32601
"""No handler for the method (or not in the negotiated protocol version)."""
INVALID_PARAMS: Final = -32602
"""The params are missing a field, or a field has the wrong type or value."""
INTERNAL_ERROR: Final = -32603
"""The handler failed unexpectedly; the connection goes on."""
REQUEST_CANCELLED: Final = -32800
"""The request was cancelled (``$/cancel_request``) before it finished."""
RESOURCE_NOT_FOUND: Final = -32002
"""ACP's code for "a given resource, such as a session, was not found"."""

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest inbound line accepted (16 MiB), far above the 64 KiB default of asyncio readers."""

_READ_SIZE: Final = 65536


class JsonRpcError(Exception):
    """Raise from a handler to answer the request with this JSON-RPC error (never a crash)."""

    def __init__(self, code: int, message: str, data: JsonValue | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> JsonObject:
        """The ``error`` member of the response: ``code``, ``message`` and ``data`` if any."""
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class LineTooLongError(Exception):
    """An inbound line exceeded the limit; the reader skips the rest of it and goes on."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"message longer than the {limit}-byte line limit")
        self.limit = limit


class IncompleteLineError(Exception):
    """The stream ended in the middle of a line (bytes with no final newline)."""

    def __init__(self, partial: bytes) -> None:
        super().__init__(f"the stream ended inside a message ({len(partial)} bytes, no newline)")
        self.partial = partial


class NdjsonLineReader:
    """Splits a byte stream into newline-delimited lines, never buffering more than the limit.

    :meth:`receive_line` returns one line without its ``\\n`` (and without a ``\\r`` before it),
    skipping blank lines, or ``None`` at a clean end of stream. A line longer than
    ``max_line_bytes`` raises :class:`LineTooLongError` as soon as the limit is passed; the rest
    of that line is then discarded, so the next call returns the line after it. Cancelling
    :meth:`receive_line` loses no bytes: the buffer stays with the reader.
    """

    def __init__(
        self, stream: trio.abc.ReceiveStream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be positive, not {max_line_bytes}")
        self._stream = stream
        self._limit = max_line_bytes
        self._buffer = bytearray()
        self._discarding = False
        self._eof = False

    @property
    def max_line_bytes(self) -> int:
        """The line limit in bytes (the newline not counted)."""
        return self._limit

    async def receive_line(self) -> bytes | None:
        """Return the next non-blank line, or ``None`` at end of stream.

        Raises :class:`LineTooLongError` (then goes on with the next line) and, once, at the
        end of the stream, :class:`IncompleteLineError` if the last line had no newline.
        """
        while True:
            line = self._take_line()
            if line is not None:
                if line.strip():
                    return line
                continue
            if self._eof:
                self._finish()
                return None
            if not self._discarding and len(self._buffer) > self._limit + 1:  # + a CR
                self._buffer.clear()
                self._discarding = True
                raise LineTooLongError(self._limit)
            chunk = await self._stream.receive_some(_READ_SIZE)
            if not chunk:
                self._eof = True
            elif self._discarding and b"\n" not in chunk:
                continue
            else:
                self._buffer += chunk

    def _take_line(self) -> bytes | None:
        index = self._buffer.find(b"\n")
        if index < 0:
            if self._discarding:
                self._buffer.clear()
            return None
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        if self._discarding:
            self._discarding = False
            return b""  # the tail of the overlong line: skipped like a blank line
        if line.endswith(b"\r"):
            line = line[:-1]  # CRLF: the limit counts the message, not its line ending
        if len(line) > self._limit:
            self._discarding = False
            raise LineTooLongError(self._limit)
        return line

    def _finish(self) -> None:
        partial = bytes(self._buffer)
        self._buffer.clear()
        if self._discarding:
            self._discarding = False
            return
        message = partial[:-1] if partial.endswith(b"\r") else partial
        if len(message) > self._limit:
            raise LineTooLongError(self._limit)  # over the limit matters more than unfinished
        if partial.strip():
            raise IncompleteLineError(partial)
        return


# --------------------------------------------------------------------------- params helpers


def require_str(params: Mapping[str, Any], name: str) -> str:
    """``params[name]`` as a string, or ``-32602`` naming the field."""
    value = params.get(name)
    if not isinstance(value, str):
        problem = "is missing" if name not in params else f"must be a string, not {_kind(value)}"
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {name!r} {problem}")
    return value


def optional_str(params: Mapping[str, Any], name: str) -> str | None:
    """``params[name]`` as a string, ``None`` when omitted or ``null``, else ``-32602``."""
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise JsonRpcError(
            INVALID_PARAMS, f"invalid params: {name!r} must be a string, not {_kind(value)}"
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
            INVALID_PARAMS, f"invalid params: {name!r} must be a non-empty array of objects"
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
