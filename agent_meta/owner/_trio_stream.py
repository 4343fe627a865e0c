"""The trio byte-stream transport: :class:`StreamTransport` over any ``trio.abc.SendStream``.

It keeps the transport seam of :mod:`agent_meta.owner._transport`: a failed ``send_all`` may have
written part of a frame, so every failure breaks it for good.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import trio

from ..core._errors import TransportBrokenError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["StreamTransport"]


class StreamTransport:
    """A :class:`~agent_meta.Transport` over any :class:`trio.abc.SendStream` (a pipe, stdout,
    a socket), for :func:`~agent_meta.open_owner`.

    A byte stream cannot say how much of a failed ``send_all`` went out, so every failure,
    cancellation included, breaks this transport for good; later sends raise
    :class:`~agent_meta.TransportBrokenError` without touching the stream.

    Over a :class:`trio.lowlevel.FdStream` (what :func:`~agent_meta.serve_stdio` uses), the
    owner also writes directly with :meth:`send_nowait` while its writer task is idle, so a
    frame reaches the pipe in the call that queued it, with no task switch, and waits in the
    queue only while the pipe is full.
    """

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self._broken: BaseException | None = None
        fd_stream_type = getattr(trio.lowlevel, "FdStream", None)  # not on Windows
        self._fileno: Callable[[], int] | None = None
        if fd_stream_type is not None and isinstance(stream, fd_stream_type):
            self._fileno = stream.fileno

    @property
    def can_send_nowait(self) -> bool:
        """Whether :meth:`send_nowait` can write at all (the stream is an ``FdStream``)."""
        return self._fileno is not None and self._broken is None

    @property
    def broken(self) -> bool:
        """True once a send has failed; nothing more is written."""
        return self._broken is not None

    async def send_frame(self, frame: bytes) -> None:
        """Send one frame with ``send_all``. Any failure breaks the transport for good and
        raises :class:`~agent_meta.TransportBrokenError` (``trio.Cancelled`` is re-raised as
        it is, after marking the transport broken: part of the frame may be out)."""
        if self._broken is not None:
            raise TransportBrokenError("an earlier write failed part-way") from self._broken
        try:
            await self._stream.send_all(frame)
        except trio.Cancelled as exc:
            self._broken = exc
            raise
        except BaseException as exc:
            self._broken = exc
            raise TransportBrokenError(
                f"writing a frame failed part-way ({type(exc).__name__}: {exc}); the stream "
                "can no longer be trusted"
            ) from exc

    def send_nowait(self, data: bytes | memoryview) -> int:
        """Write what the pipe takes now, without blocking; return how many bytes went out.

        Returns 0 when the pipe is full, when the stream is not an ``FdStream``, and on any
        error: the caller then passes the data to :meth:`send_frame`, which waits for room and
        reports the error (a closed or broken pipe) the usual way. After a partial write, the
        caller must send the rest with :meth:`send_frame` before anything else.
        """
        fileno = self._fileno
        if fileno is None or self._broken is not None:
            return 0
        try:
            return os.write(fileno(), data)
        except OSError:
            return 0

    async def aclose(self) -> None:
        """Close the wrapped stream (the owner never does this itself)."""
        await self._stream.aclose()
