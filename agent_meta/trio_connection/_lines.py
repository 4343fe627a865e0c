"""Reading NDJSON lines from a trio stream: the sans-IO :class:`~agent_meta.sansio._lines.
LineSplitter` fed by ``receive_some``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sansio._lines import (
    DEFAULT_MAX_LINE_BYTES,
    READ_SIZE,
    IncompleteLineError,
    LineSplitter,
    LineTooLongError,
)

if TYPE_CHECKING:
    import trio

__all__ = ["DEFAULT_MAX_LINE_BYTES", "IncompleteLineError", "LineTooLongError", "NdjsonLineReader"]


class NdjsonLineReader:
    """Splits a trio byte stream into newline-delimited lines, never buffering more than the
    limit (see :class:`~agent_meta.sansio._lines.LineSplitter`).

    Cancelling :meth:`receive_line` loses no bytes: the buffer stays with the reader.
    """

    def __init__(
        self, stream: trio.abc.ReceiveStream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        self._splitter = LineSplitter(max_line_bytes=max_line_bytes)
        self._stream = stream

    @property
    def max_line_bytes(self) -> int:
        """The line limit in bytes (the newline not counted)."""
        return self._splitter.max_line_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes read but not yet returned as lines."""
        return self._splitter.buffered_bytes

    async def receive_line(self) -> bytes | None:
        """Return the next non-blank line, or ``None`` at end of stream.

        Raises :class:`LineTooLongError` (then goes on with the next line) and, once, at the
        end of the stream, :class:`IncompleteLineError` if the last line had no newline.
        """
        while True:
            line = self._splitter.next_line()
            if line is not None:
                return line
            if self._splitter.ended:
                return None
            self._splitter.feed(await self._stream.receive_some(READ_SIZE))
