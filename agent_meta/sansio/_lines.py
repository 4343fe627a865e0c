"""NDJSON framing of an inbound byte stream into lines, with a size limit, without I/O.

One huge line must not exhaust memory: :class:`LineSplitter` refuses a line as soon as it
passes the limit and skips the rest of it, so the connection answers ``-32700`` and goes on.
The trio connection and the asyncio adapter each feed it from their own stream, and so do the
client-side tools (the proxy and ``check``), which watch lines instead of answering them.
"""

from __future__ import annotations

import collections
from typing import ClassVar, Final, final

from ..core._jsonrpc import ErrorCode

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "READ_SIZE",
    "IncompleteLineError",
    "LineSplitter",
    "LineTooLongError",
]

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest inbound line accepted (16 MiB), far above the 64 KiB default of asyncio readers."""

READ_SIZE: Final = 65536
"""How much a reader asks its stream for at a time."""


class LineTooLongError(Exception):
    """An inbound line exceeded the limit; the rest of it is skipped and reading goes on.

    Answered as a line that is no JSON-RPC message (``-32700``, ``id: null``), as the
    :class:`~agent_meta.sansio.inbound._gate.InboundGate` refuses it.
    """

    code: ClassVar[int] = ErrorCode.PARSE_ERROR
    request_id: ClassVar[None] = None
    is_response: ClassVar[bool] = False

    def __init__(self, limit: int) -> None:
        super().__init__(f"message longer than the {limit}-byte line limit")
        self.limit = limit


class IncompleteLineError(Exception):
    """The stream ended in the middle of a line (bytes with no final newline); answered as
    :class:`LineTooLongError` is."""

    code: ClassVar[int] = ErrorCode.PARSE_ERROR
    request_id: ClassVar[None] = None
    is_response: ClassVar[bool] = False

    def __init__(self, partial: bytes) -> None:
        super().__init__(f"the stream ended inside a message ({len(partial)} bytes, no newline)")
        self.partial = partial


@final
class LineSplitter:
    """Splits fed bytes into newline-delimited lines, never buffering more than the limit.

    Feed it chunks with :meth:`feed` (``b""`` for the end of the stream) and take lines with
    :meth:`next_line`. A line longer than ``max_line_bytes`` raises :class:`LineTooLongError`
    as soon as the limit is passed; the rest of that line is then discarded, so the next line
    taken is the one after it.

    Each chunk is split once, as it is fed (a ``bytes.split``, not a search per line): the
    client-side proxy takes every line of a connection through it.
    """

    __slots__ = ("_buffer", "_discarding", "_eof", "_limit", "_lines")

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be positive, not {max_line_bytes}")
        self._limit = max_line_bytes
        self._lines: collections.deque[bytes] = collections.deque()  # complete, not yet taken
        self._buffer = bytearray()  # the unfinished last line
        self._discarding = False  # inside an overlong line: its bytes up to the newline go
        self._eof = False

    @property
    def max_line_bytes(self) -> int:
        """The line limit in bytes (the newline not counted)."""
        return self._limit

    @property
    def buffered_bytes(self) -> int:
        """Bytes held: at most one partial line within the limit, plus the last chunk fed."""
        return len(self._buffer) + sum(len(line) + 1 for line in self._lines)

    @property
    def ended(self) -> bool:
        """The end of the stream was fed and every line before it taken."""
        return self._eof and not self._buffer and not self._lines

    def feed(self, chunk: bytes | bytearray) -> None:
        """Add bytes read from the stream; ``b""`` marks its end."""
        if not chunk:
            self._eof = True
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            if not self._discarding:  # else still inside an overlong line
                self._buffer += chunk
            return
        lines = bytes(chunk[:end]).split(b"\n")
        if self._discarding:
            del lines[0]  # the tail of the overlong line
            self._discarding = False
        elif self._buffer:
            lines[0] = bytes(self._buffer) + lines[0]
            self._buffer.clear()
        self._lines.extend(lines)
        self._buffer += chunk[end + 1 :]

    def next_line(self) -> bytes | None:
        """The next non-blank line without its ``\\n`` (and a ``\\r`` before it), or ``None``
        when more bytes are needed (or, if :attr:`ended`, none will come).

        Raises :class:`LineTooLongError` (then goes on with the next line) and, once, at the
        end of the stream, :class:`IncompleteLineError` if the last line had no newline.
        """
        lines = self._lines
        while lines:
            line = lines.popleft()
            if line.endswith(b"\r"):
                line = line[:-1]  # CRLF: the limit counts the message, not its line ending
            if len(line) > self._limit:
                raise LineTooLongError(self._limit)
            if line and not line.isspace():
                return line
        if self._eof:
            self._finish()
        elif not self._discarding and len(self._buffer) > self._limit + 1:  # + a CR
            self._buffer.clear()
            self._discarding = True
            raise LineTooLongError(self._limit)
        return None

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
