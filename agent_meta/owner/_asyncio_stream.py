"""The asyncio byte-stream transport: :class:`AsyncioStreamTransport` over a ``StreamWriter``.

It keeps the transport seam of :mod:`agent_meta.owner._transport`. ``StreamWriter.write`` never
blocks: it hands the whole frame to the asyncio transport, which writes what the pipe takes
and buffers the rest; ``drain()`` then waits while that buffer is over its high-water mark. So a
frame is never half handed over, and flow control comes from ``drain()``. What the seam must
catch is the other asyncio habit: ``write()`` on a transport that is closing (the reader went
away) drops the data silently, so that is checked before every write.
"""

from __future__ import annotations

import asyncio

from ..core._errors import TransportBrokenError

__all__ = ["AsyncioStreamTransport"]


class AsyncioStreamTransport:
    """A :class:`~agent_meta.Transport` over an :class:`asyncio.StreamWriter` (a pipe, stdout,
    a socket), for :func:`~agent_meta.open_asyncio_owner`.

    Each frame is ``write()`` then ``await drain()``. Any failure -- the stream closing, the
    reader going away, ``drain()`` raising -- breaks this transport for good: later sends raise
    :class:`~agent_meta.TransportBrokenError` without touching the stream. A cancellation
    during ``drain()`` does not break it, since the frame was already handed over whole.

    "Written", for the owner, means handed to the ``StreamWriter``; bytes may still sit in its
    buffer (at most its high-water mark). Whoever opened the writer closes it, which flushes
    them (the owner never closes it).

    While the owner's writer task idles and the writer's buffer is empty, the owner writes a
    frame in the call that queued it (:meth:`send_nowait`; see "Direct writes" in
    ``docs/owner.md``).
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._pipe = writer.transport  # what StreamWriter.write() writes to
        self._broken: BaseException | None = None

    @property
    def writer(self) -> asyncio.StreamWriter:
        """The wrapped writer."""
        return self._writer

    @property
    def broken(self) -> bool:
        """True once a send has failed; nothing more is written."""
        return self._broken is not None

    @property
    def can_send_nowait(self) -> bool:
        """Whether :meth:`send_nowait` may write at all (the transport is not broken)."""
        return self._broken is None

    async def send_frame(self, frame: bytes) -> None:
        """``write()`` the frame, then ``await drain()``. Any failure breaks the transport for
        good and raises :class:`~agent_meta.TransportBrokenError`."""
        if self._broken is not None:
            raise TransportBrokenError("an earlier write failed") from self._broken
        writer = self._writer
        if writer.transport.is_closing():  # write() would drop the frame without a word
            raise self._break(ConnectionResetError("the stream is closed or closing"))
        try:
            writer.write(frame)
            await writer.drain()
        except asyncio.CancelledError:
            raise  # the frame was handed over whole: the stream is intact
        except BaseException as exc:
            raise self._break(exc) from exc

    def _break(self, exc: BaseException) -> TransportBrokenError:
        self._broken = exc
        error = TransportBrokenError(
            f"writing a frame failed ({type(exc).__name__}: {exc}); the stream can no longer "
            "be trusted"
        )
        error.__cause__ = exc
        return error

    def send_nowait(self, data: bytes | memoryview) -> int:
        """Write ``data`` now if the writer's buffer is empty; return how many bytes were
        handed over: all of them, or 0.

        Returns 0 when the buffer holds anything (the reader is behind: the frame waits for the
        owner's writer task, whose ``drain()`` applies backpressure), when the stream is closing
        and when the transport is broken; the caller then passes the frame to
        :meth:`send_frame`, which reports any error the usual way.
        """
        pipe = self._pipe
        if self._broken is not None or pipe.is_closing() or pipe.get_write_buffer_size():
            return 0
        pipe.write(data)
        return len(data)
