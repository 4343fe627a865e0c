"""A real OS pipe as an owner's output, read back on demand: the stdio path, in a test.

Over a pipe an owner writes frames directly in the call that queued them while its writer task
idles (``docs/owner.md``, "Direct writes"); a fake :class:`~agent_meta.Transport` never takes
that path. :class:`PipeRecorder` gives the owner the write end of a real pipe -- a
``trio.lowlevel.FdStream`` for the trio owner, an ``asyncio.StreamWriter`` for the asyncio one
-- and reads what arrived without blocking whenever the test looks, so the same assertions hold
over both.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from typing import TYPE_CHECKING, Final

import trio

from ._mirror import Message, MirrorError, parse_frames

if TYPE_CHECKING:
    from types import TracebackType

    from ._mirror import ClientMirror

__all__ = ["PipeRecorder"]

_F_SETPIPE_SZ: Final = 1031  # Linux; elsewhere the pipe keeps its default size
_READ_SIZE: Final = 1 << 16


class PipeRecorder:
    """The owner writes to :attr:`stream` (trio) or :meth:`asyncio_writer` (asyncio), the write
    end of a pipe; :attr:`frames` / :attr:`messages` hold what has reached the read end so far,
    read without blocking when they are looked at.

    ``size`` asks the kernel for a pipe buffer of that many bytes (Linux caps it at
    ``/proc/sys/fs/pipe-max-size``). A writer blocks once the buffer is full and nobody looks;
    :meth:`read_available` empties it. With ``mirror``, each frame read is fed to that
    :class:`~agent_meta.testing.ClientMirror`. Use it as an async context manager: both ends
    are closed on exit.
    """

    def __init__(self, *, mirror: ClientMirror | None = None, size: int = 1 << 20) -> None:
        read_fd, write_fd = os.pipe()
        # Not Linux, or over the system's limit: the pipe keeps its default size.
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_fd, _F_SETPIPE_SZ, size)
        os.set_blocking(read_fd, False)
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._stream: trio.lowlevel.FdStream | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.mirror = mirror
        self._frames: list[bytes] = []
        self._messages: list[Message] = []
        self._partial = b""

    @property
    def stream(self) -> trio.lowlevel.FdStream:
        """The write end as a trio stream, for ``open_owner(recorder.stream)``."""
        if self._stream is None:
            self._stream = trio.lowlevel.FdStream(self._write_fd)
        return self._stream

    async def asyncio_writer(self) -> asyncio.StreamWriter:
        """The write end as an asyncio stream writer, for
        ``open_asyncio_owner(await recorder.asyncio_writer())``; call it on that loop."""
        if self._writer is None:
            loop = asyncio.get_running_loop()
            pipe = os.fdopen(os.dup(self._write_fd), "wb", buffering=0)
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), pipe
            )
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return self._writer

    @property
    def frames(self) -> list[bytes]:
        """Every whole frame read so far (after reading what is available now)."""
        self.read_available()
        return self._frames

    @property
    def messages(self) -> list[Message]:
        """Every whole frame read so far, parsed (after reading what is available now)."""
        self.read_available()
        return self._messages

    @property
    def partial(self) -> bytes:
        """Bytes of a line not finished yet (a frame the owner is still writing)."""
        return self._partial

    def read_available(self) -> list[Message]:
        """Read whatever the pipe holds now, without blocking; return the new messages.

        Raises :class:`~agent_meta.testing.MirrorError` for a line that is not one JSON-RPC
        message: an owner never writes one. Once the recorder is closed it reads nothing more,
        and :attr:`frames` / :attr:`messages` keep what was read.
        """
        if self._read_fd < 0:
            return []
        chunks = [self._partial]
        while True:
            try:
                chunk = os.read(self._read_fd, _READ_SIZE)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        *lines, self._partial = b"".join(chunks).split(b"\n")
        new: list[Message] = []
        for line in lines:
            if not line:
                raise MirrorError("an empty line on the pipe: the owner never writes one")
            messages = parse_frames(line + b"\n")  # one message, or a batch's answers
            self._frames.append(line + b"\n")
            self._messages.extend(messages)
            if self.mirror is not None:
                for message in messages:
                    self.mirror.feed(message)
            new.extend(messages)
        return new

    async def aclose(self) -> None:
        """Close both ends (idempotent), under the runtime that wrote to it."""
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1
        writer, self._writer = self._writer, None
        if writer is not None:
            if not writer.transport.is_closing():
                writer.transport.abort()  # what it still buffers has no reader any more
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if self._stream is not None:
            await self._stream.aclose()  # closes the write end it owns
        elif self._write_fd >= 0:
            os.close(self._write_fd)
        self._write_fd = -1

    async def __aenter__(self) -> PipeRecorder:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
