"""NDJSON framing of an inbound byte stream into lines, with a size limit (trio).

One huge line must not exhaust memory: :class:`NdjsonLineReader` refuses a line as soon as it
passes the limit and skips the rest of it, so the connection answers ``-32700`` and goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import trio

__all__ = ["DEFAULT_MAX_LINE_BYTES", "IncompleteLineError", "LineTooLongError", "NdjsonLineReader"]

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest inbound line accepted (16 MiB), far above the 64 KiB default of asyncio readers."""

_READ_SIZE: Final = 65536


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
