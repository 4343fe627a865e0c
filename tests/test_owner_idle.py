"""The idle writer's rule, synchronously: when a queued frame is written by the call that
queued it, and when the driver must reschedule the parked writer task.

``IdleWriter`` is the one place both drivers ask (``owner/_idle.py``); here it runs over a real
send queue and direct writer whose pipe is a function that takes as many bytes as told, so each
case is spelled out without a runtime.
"""

from __future__ import annotations

from agent_meta import OwnerOptions
from agent_meta.owner._direct import DirectWriter
from agent_meta.owner._idle import IdleWriter
from agent_meta.sansio.queue._edits import ACCEPTED
from agent_meta.sansio.queue._queue import SendQueue


class Pipe:
    """Takes up to ``room`` bytes of each write (everything when ``None``)."""

    def __init__(self) -> None:
        self.room: int | None = None
        self.data = b""
        self.calls = 0

    def send_nowait(self, data: bytes) -> int:
        self.calls += 1
        taken = data if self.room is None else data[: self.room]
        self.data += taken
        return len(taken)


def setup(*, direct: bool = True) -> tuple[SendQueue, IdleWriter, Pipe, DirectWriter | None]:
    queue = SendQueue(OwnerOptions(coalesce=False), durable=False)
    pipe = Pipe()
    writer = DirectWriter(queue, pipe.send_nowait) if direct else None
    return queue, IdleWriter(writer), pipe, writer


def queue_frame(queue: SendQueue, idle: IdleWriter) -> None:
    assert queue.submit_raw(b'{"jsonrpc":"2.0","method":"m"}\n', None) is ACCEPTED


def test_a_busy_writer_is_neither_woken_nor_bypassed() -> None:
    queue, idle, pipe, _ = setup()
    assert not idle.express
    queue_frame(queue, idle)
    assert not idle.wake()  # it takes the frame before it parks again
    assert pipe.calls == 0


def test_a_frame_queued_while_the_writer_idles_is_written_by_the_call() -> None:
    queue, idle, pipe, writer = setup()
    idle.park()
    assert idle.express  # the queue may render publications at once
    queue_frame(queue, idle)
    assert not idle.wake()  # written here: the writer stays parked
    assert pipe.data.endswith(b"\n")
    assert idle.parked
    assert writer is not None
    assert writer.frames == 1
    assert queue.idle


def test_a_frame_the_pipe_takes_in_part_wakes_the_writer_once() -> None:
    queue, idle, pipe, writer = setup()
    idle.park()
    pipe.room = 5
    queue_frame(queue, idle)
    assert idle.wake()  # the driver reschedules it to finish the frame
    assert not idle.parked
    assert not idle.express
    assert writer is not None
    assert writer.frames == 0
    queue_frame(queue, idle)
    assert not idle.wake()  # already woken
    assert pipe.calls == 1


def test_without_direct_writes_every_frame_wakes_the_parked_writer() -> None:
    queue, idle, _, _ = setup(direct=False)
    idle.park()
    assert not idle.express
    queue_frame(queue, idle)
    assert idle.wake()
    assert not idle.wake()


def test_a_cancelled_writer_is_not_rescheduled_and_no_direct_write_begins() -> None:
    queue, idle, pipe, _ = setup()
    idle.park()
    idle.unpark()
    assert not idle.express
    queue_frame(queue, idle)
    assert not idle.wake()
    assert pipe.calls == 0


def test_once_stopped_the_writer_is_woken_and_nothing_is_written_directly() -> None:
    queue, idle, pipe, _ = setup()
    idle.park()
    queue_frame(queue, idle)
    idle.stop()
    assert idle.wake()
    idle.park()  # it parks again with nothing it may take
    assert not idle.express
    assert pipe.calls == 0
