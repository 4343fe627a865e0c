"""Direct writes: the call that queues a frame writes it itself while the writer task idles.

Over a pipe (a trio ``FdStream``, what :func:`~agent_meta.serve_stdio` uses; or an asyncio
``StreamWriter`` with an empty buffer), without a store, while the writer task is parked with
nothing to do, a frame is written in the call that queued it without blocking: one task switch
per frame fewer. The writer task stays the only writer otherwise, so R2 holds: whatever the
stream does not take at once is held in the queue, and the writer task finishes it before
anything else (and reports any error the usual way).

Runtime-neutral: each driver decides when direct writes apply (it passes its transport to
:meth:`DirectWriter.for_stream` only when that is exactly its own stream transport class), and
the writer uses that transport's ``send_nowait``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, final

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..sansio.queue._queue import SendQueue
    from ..stores._store import LifetimeStore

__all__ = ["DirectWriter", "NowaitStream"]


class NowaitStream(Protocol):
    """What a stream transport offers for direct writes."""

    @property
    def can_send_nowait(self) -> bool: ...

    def send_nowait(self, data: bytes | memoryview) -> int: ...


@final
class DirectWriter:
    """Writes queued frames in the calling task; see the module docstring for when."""

    __slots__ = ("_queue", "_send_nowait", "frames")

    def __init__(self, queue: SendQueue, send_nowait: Callable[[bytes], int]) -> None:
        self._queue = queue
        self._send_nowait = send_nowait
        self.frames = 0
        """Frames written whole by a direct write."""

    @classmethod
    def for_stream(
        cls, queue: SendQueue, stream: NowaitStream | None, store: LifetimeStore | None
    ) -> DirectWriter | None:
        """A direct writer for ``stream``, or ``None`` where direct writes do not apply.

        The driver passes its transport only when it is exactly the driver's stream transport
        class: a subclass may send frames its own way, or fail in ways that allow a retry, which
        a frame already begun here could never take. Never with a store: its persist-before-write
        must wait for the store.
        """
        if stream is None or store is not None or not stream.can_send_nowait:
            return None
        return cls(queue, stream.send_nowait)

    def write_queued(self) -> bool:
        """Write the queued frames while the pipe takes each one whole.

        Call it only while the writer task is parked with nothing to do. Returns ``True`` when
        a frame went out only in part (or not at all): it is held in the queue, and the writer
        task must be woken to finish it.
        """
        queue = self._queue
        while True:
            data = queue.next_action()
            if data is None:
                return False
            assert isinstance(data, bytes)  # no store: nothing to store first
            sent = self._send_nowait(data)
            if sent != len(data):
                queue.hold(sent)
                return True
            queue.written()
            self.frames += 1
            if queue.idle:
                return False
