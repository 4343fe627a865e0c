"""The agent's stdout as the client's test sees it: every raw line, and a reader that can stop.

The official SDK client reads an agent through an :class:`asyncio.StreamReader`; a
:class:`PipeTap` feeds that reader from the pipe and keeps a copy of every line the agent wrote,
split here, independently of the SDK, so a test can check that each is exactly one JSON-RPC
message. It can stop reading (the kernel pipe then fills and the agent's writes block) and read
on.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import struct
import termios
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from collections.abc import Sequence


class PipeTap(asyncio.Protocol):
    """Reads the agent's stdout for the SDK client and keeps a copy of every raw line.

    It can stop reading at given byte counts (:meth:`pause_at`); the test then waits for the
    pipe to fill and resumes it.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.lines: list[bytes] = []
        self.received = 0
        self.paused = asyncio.Event()
        self.transport: asyncio.ReadTransport | None = None
        self._partial = b""
        self._pause_at: list[int] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.ReadTransport", transport)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        self.lines.extend(lines)
        self.reader.feed_data(data)
        if self._pause_at and self.received >= self._pause_at[0]:
            del self._pause_at[0]
            self.pause()

    def eof_received(self) -> bool:
        self.reader.feed_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.reader.feed_eof()

    def pause(self) -> None:
        assert self.transport is not None
        self.transport.pause_reading()
        self.paused.set()

    def resume(self) -> None:
        assert self.transport is not None
        self.paused.clear()
        self.transport.resume_reading()

    def pause_at(self, offsets: Sequence[int]) -> None:
        self._pause_at = sorted(offsets)

    @property
    def unfinished(self) -> bytes:
        """Bytes after the last newline (a torn last line would stay here)."""
        return self._partial


def unread_bytes(fd: int) -> int:
    """Bytes written into the pipe and not read yet (Linux ``FIONREAD``)."""
    count: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    return count


def pipe_capacity(fd: int) -> int:
    capacity: int = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    return capacity


def corrupt_lines(lines: Sequence[bytes]) -> list[bytes]:
    """Lines that are not exactly one JSON-RPC 2.0 message (a request, notification or
    response)."""
    bad = []
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        shapes = ("method" in message) + ("result" in message) + ("error" in message)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or shapes != 1:
            bad.append(line)
    return bad
