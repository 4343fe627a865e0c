"""A real OS pipe as an owner's output, read back on demand: the stdio path, in a test.

Over a pipe the trio owner writes frames directly in the call that queued them while its
writer task idles (``docs/owner.md``, "Direct writes"); a fake :class:`~agent_meta.Transport`
never takes that path. :class:`PipeRecorder` gives the owner the write end of a real pipe, as a
``trio.lowlevel.FdStream``, and reads what arrived without blocking whenever the test looks, so
the same assertions hold over both.
"""

from __future__ import annotations

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
    """The owner writes to :attr:`stream` (a pipe); :attr:`frames` / :attr:`messages` hold
    what has reached the read end so far, read without blocking when they are looked at.

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
        self.stream = trio.lowlevel.FdStream(write_fd)
        """The write end, for ``open_owner(recorder.stream)``."""
        self.mirror = mirror
        self._frames: list[bytes] = []
        self._messages: list[Message] = []
        self._partial = b""

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
        message: an owner never writes one.
        """
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
        """Close both ends (idempotent)."""
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1
        await self.stream.aclose()

    async def __aenter__(self) -> PipeRecorder:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
