"""What only the asyncio driver has: the thread-safe entry, its stream transport, its own
cancellation and direct writes, and the SQLite store's threads under asyncio.

The rules themselves (R1-R12) run on both drivers in ``test_owner_rules.py`` and the other
parametrized suites; this module pins the asyncio side of the seams. Threads are real; nothing
sleeps on the wall clock (threads meet on events, barriers and futures; a timeout on a future
or an event only turns a hang into a failure).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import threading
from typing import TYPE_CHECKING, Any

import pytest

import agent_meta as am
from agent_meta import OwnerOptions
from agent_meta.owner._asyncio_stream import AsyncioStreamTransport
from agent_meta.testing import ClientMirror, GatedTransport, PipeRecorder, RecordingTransport
from tests import drivers

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable
    from pathlib import Path

    from agent_meta.testing._mirror import Message

SID = "sess-1"
GUARD = 30.0  # seconds; only ever reached when something hangs


@pytest.fixture
def driver() -> drivers.AsyncioDriver:
    """This module's async tests run on the asyncio driver only."""
    return drivers.AsyncioDriver()


def metas(messages: list[Message], session_id: str = SID) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]["_meta"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == session_id
        and m["params"]["update"].get("sessionUpdate") == "session_info_update"
    ]


async def in_thread(function: Any, *args: Any) -> Any:
    """Run ``function(*args)`` in a real worker thread while the loop keeps running."""
    return await asyncio.to_thread(function, *args)


# -- the thread-safe entry ----------------------------------------------------------------------


async def test_threadsafe_calls_of_one_thread_keep_their_order(
    driver: drivers.AsyncioDriver,
) -> None:
    mirror = ClientMirror()
    t = RecordingTransport(mirror=mirror)
    async with driver.open_asyncio_owner(t, OwnerOptions(coalesce=False)) as owner:
        lt = owner.open_lifetime(SID)
        ts = owner.threadsafe

        expected: list[object] = []

        def worker() -> list[object]:
            futures: list[concurrent.futures.Future[Any]] = []
            for i in range(20):
                futures.append(ts.publish(SID, meta={"i": i}))
                expected.append(True)
                if i % 5 == 4:
                    futures.append(ts.domain_set(SID, "d", ["last"], i))
                    futures.append(ts.send_notification("x/tick", {"i": i}))
                    expected.extend([True, True])
            futures.append(ts.resync(SID))
            expected.append(True)
            return [future.result(GUARD) for future in futures]

        results = await in_thread(worker)
        await owner.wait_flushed()
    assert results == expected
    ticks = [m["params"]["i"] for m in t.messages if m.get("method") == "x/tick"]
    assert ticks == [4, 9, 14, 19]
    published = [m["i"] for m in metas(t.messages) if m and "i" in m and len(m) == 1]
    assert published == list(range(20))
    assert mirror.info(SID) == lt.snapshot()
    assert lt.snapshot().meta == {"i": 19, "d": {"last": 19}}


async def test_threadsafe_calls_of_many_threads_run_in_the_order_they_reached_the_loop(
    driver: drivers.AsyncioDriver,
) -> None:
    """Each call takes a ticket under a lock held while it is made: the ticket order is the
    order calls were appended to the facade's FIFO, which must be the order on the wire."""
    t = RecordingTransport()
    threads, per_thread = 4, 50
    async with driver.open_asyncio_owner(t, OwnerOptions(coalesce=False)) as owner:
        owner.open_lifetime(SID)
        ts = owner.threadsafe
        tickets = itertools.count()
        lock = threading.Lock()
        start = threading.Barrier(threads)

        def worker(name: str) -> list[bool]:
            start.wait(GUARD)
            futures = []
            for i in range(per_thread):
                with lock:
                    futures.append(ts.publish(SID, meta={"n": next(tickets), "by": [name, i]}))
            return [future.result(GUARD) for future in futures]

        results = await asyncio.gather(*(in_thread(worker, str(k)) for k in range(threads)))
        await owner.wait_flushed()
    assert all(result == [True] * per_thread for result in results)
    sent = metas(t.messages)
    assert [m["n"] for m in sent] == list(range(threads * per_thread))
    for k in range(threads):
        assert [m["by"][1] for m in sent if m["by"][0] == str(k)] == list(range(per_thread))


async def test_a_threadsafe_call_waiting_for_room_holds_back_the_calls_behind_it(
    driver: drivers.AsyncioDriver,
) -> None:
    t = GatedTransport()
    async with driver.open_asyncio_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"hold": True})
        await t.wait_for_waiting(1)  # the writer is stuck on the first frame
        ts = owner.threadsafe

        def calls() -> list[concurrent.futures.Future[Any]]:
            return [
                ts.publish(SID, meta={"a": 1}),  # takes the one free slot
                ts.publish(SID, meta={"b": 2}),  # waits for room
                ts.send_notification("x/after"),  # must not overtake it
            ]

        first, second, third = await in_thread(calls)
        await driver.wait_all_tasks_blocked()
        assert first.result(0) is True
        assert not second.done()
        assert not third.done()
        assert owner.statistics().waiting_producers == 1
        t.open()
        assert await asyncio.wrap_future(second) is True
        assert await asyncio.wrap_future(third) is True
        await owner.wait_flushed()
    order = [m.get("method") == "x/after" or metas([m])[0] for m in t.messages]
    assert order == [{"hold": True}, {"a": 1}, {"b": 2}, True]


async def test_a_threadsafe_notification_of_a_closed_session_is_fenced(
    driver: drivers.AsyncioDriver,
) -> None:
    t = RecordingTransport()
    async with driver.open_asyncio_owner(t) as owner:
        owner.open_lifetime(SID)
        chunk = {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk"}}
        before = owner.threadsafe.send_notification("session/update", chunk)
        owner.close_lifetime(SID)
        after = owner.threadsafe.send_notification("session/update", chunk)
        assert await asyncio.wrap_future(before) is False  # it runs after the close (R6)
        assert await asyncio.wrap_future(after) is False
        other = owner.threadsafe.send_notification("x/tick", {"i": 1})
        assert await asyncio.wrap_future(other) is True
        await owner.wait_flushed()
    assert [m.get("method") for m in t.messages] == ["x/tick"]
    assert owner.statistics().fenced == 2


async def test_threadsafe_calls_raise_the_owners_typed_errors(
    driver: drivers.AsyncioDriver,
) -> None:
    t = RecordingTransport()
    async with driver.open_asyncio_owner(t) as owner:
        old = owner.open_lifetime("old")
        owner.close_lifetime("old")
        lt = owner.open_lifetime(SID)
        ts = owner.threadsafe

        def calls() -> list[object]:
            raised: list[object] = []
            bad_calls: tuple[Callable[[], object], ...] = (
                lambda: ts.publish(SID, meta={"x": math.nan}),
                lambda: ts.publish(SID, meta=["not", "a", "mapping"]),  # type: ignore[arg-type]
                lambda: ts.domain_set(SID, 1, ["k"], 1),  # type: ignore[arg-type]
                lambda: ts.domain_set(SID, "d", "k", 1),  # a bare str is not a path
                lambda: ts.report_failure(SID, "i", True, {}),
                lambda: ts.send_notification(123),  # type: ignore[arg-type]
            )
            for bad in bad_calls:
                try:
                    bad()
                except am.MetaValueError as exc:
                    raised.append(type(exc))
            unknown = ts.publish("never-opened", meta={"a": 1})
            raised.append(type(unknown.exception(GUARD)))
            raised.append(ts.publish(old, meta={"late": 1}).result(GUARD))  # fenced (R6)
            raised.append(ts.resolve_failure(SID, "nope", 1).result(GUARD))  # not current (R7)
            return raised

        raised = await in_thread(calls)
        assert lt.snapshot() == am.SessionInfo()
    assert raised == [
        am.MetaValueError,
        am.MetaValueError,
        am.MetaValueError,
        am.MetaPathError,
        am.MetaValueError,
        am.MetaValueError,
        am.UnknownSessionError,
        False,
        False,
    ]
    assert t.frames == []


async def test_values_are_copied_in_the_calling_thread(driver: drivers.AsyncioDriver) -> None:
    """A worker that mutates its object right after the call changes nothing (R1)."""
    t = RecordingTransport()
    async with driver.open_asyncio_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        ts = owner.threadsafe
        value: dict[str, Any] = {"items": [1]}
        made = threading.Event()

        def call() -> concurrent.futures.Future[bool]:
            future = ts.publish(SID, meta={"k": value})
            value["items"].append(2)  # the loop has not run the call yet
            made.set()
            return future

        thread = threading.Thread(target=lambda: results.append(call()))
        results: list[concurrent.futures.Future[bool]] = []
        thread.start()
        thread.join(GUARD)  # blocks the loop: the call cannot run before the mutation
        assert made.is_set()
        assert await asyncio.wrap_future(results[0]) is True
        assert lt.snapshot().meta == {"k": {"items": [1]}}


async def test_calls_made_before_the_block_ends_are_run_and_later_ones_refused(
    driver: drivers.AsyncioDriver,
) -> None:
    t = RecordingTransport()
    futures: list[concurrent.futures.Future[Any]] = []
    async with driver.open_asyncio_owner(t) as owner:
        owner.open_lifetime(SID)
        ts = owner.threadsafe

        def calls() -> None:
            futures.append(ts.publish(SID, meta={"a": 1}))
            futures.append(ts.send_notification("x/last"))
            cancelled = ts.publish(SID, meta={"never": 1})
            assert cancelled.cancel()  # not started yet: it never runs
            futures.append(cancelled)

        thread = threading.Thread(target=calls)
        thread.start()
        thread.join(GUARD)  # blocks the loop: the calls are still pending when the block ends
        assert not futures[0].done()
    assert futures[0].result(0) is True
    assert futures[1].result(0) is True
    assert futures[2].cancelled()
    assert [m.get("method") for m in t.messages] == ["session/update", "x/last"]
    assert metas(t.messages) == [{"a": 1}]

    def late() -> BaseException | None:
        try:
            ts.publish(SID, meta={"late": 1})
        except am.OwnerClosedError as exc:
            return exc
        return None

    assert isinstance(await in_thread(late), am.OwnerClosedError)


class _BreaksOnRequest(RecordingTransport):
    """Delivers the first frame; every later send waits until :meth:`fail_next`, then fails
    part-way (``OSError``): the stream is broken for good."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked = asyncio.Event()
        self._fail = asyncio.Event()

    def fail_next(self) -> None:
        self._fail.set()

    async def send_frame(self, frame: bytes) -> None:
        if self.frames:
            self.blocked.set()
            await self._fail.wait()
            raise OSError("the reader went away mid-frame")
        await super().send_frame(frame)


async def test_a_broken_transport_fails_waiting_thread_calls_and_refuses_later_ones(
    driver: drivers.AsyncioDriver,
) -> None:
    t = _BreaksOnRequest()
    made: list[concurrent.futures.Future[Any]] = []
    facades: list[am.ThreadsafeOwner] = []

    async def run() -> None:
        async with driver.open_asyncio_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
            owner.open_lifetime(SID)
            ts = owner.threadsafe
            facades.append(ts)
            first = await in_thread(lambda: ts.publish(SID, meta={"a": 1}))
            assert await asyncio.wrap_future(first) is True
            await owner.wait_flushed()  # acknowledged: it is on the wire
            made.append(await in_thread(lambda: ts.publish(SID, meta={"b": 2})))
            await t.blocked.wait()  # the writer is stuck sending b
            made.append(await in_thread(lambda: ts.publish(SID, meta={"c": 3})))  # last slot
            made.append(await in_thread(lambda: ts.publish(SID, meta={"d": 4})))  # waits
            await driver.wait_all_tasks_blocked()
            assert not made[2].done()
            t.fail_next()
            await driver.sleep_forever()

    with pytest.raises(am.TransportBrokenError):
        await run()
    assert metas(t.messages) == [{"a": 1}]  # what was acknowledged was delivered
    assert [future.result(0) for future in made[:2]] == [True, True]  # accepted before
    assert isinstance(made[2].exception(0), am.OwnerClosedError)  # never hangs

    def late() -> object:
        try:
            facades[0].publish(SID, meta={"late": 1})
        except am.OwnerClosedError as exc:
            return exc
        return None

    assert isinstance(await in_thread(late), am.OwnerClosedError)


# -- cancellation in asyncio terms ----------------------------------------------------------------


async def test_a_cancellation_requested_before_the_call_is_delivered_before_any_effect(
    driver: drivers.AsyncioDriver,
) -> None:
    t = RecordingTransport()
    async with driver.open_asyncio_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        task = asyncio.current_task()
        assert task is not None
        for call in (
            lambda: lt.publish(meta={"a": 1}),
            lambda: lt.domain("d").set(["k"], 1),
            lambda: owner.send_response(1, result=None),
            owner.wait_flushed,
        ):
            task.cancel()  # requested of this very task, before the call
            with pytest.raises(asyncio.CancelledError):
                await call()
            task.uncancel()
        assert lt.snapshot() == am.SessionInfo()
        assert owner.statistics().publications == 0
    assert t.frames == []


async def test_nowait_calls_raise_queue_full_and_change_nothing(
    driver: drivers.AsyncioDriver,
) -> None:
    t = GatedTransport()
    async with driver.open_asyncio_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"hold": True})
        await t.wait_for_waiting(1)
        lt.publish_nowait(meta={"a": 1})
        for call in (
            lambda: lt.publish_nowait(meta={"b": 2}),
            lambda: lt.domain("d").set_nowait(["k"], 1),
            lambda: lt.report_failure_nowait("i", 1, {}),
            lambda: owner.send_notification_nowait("x/y"),
            lambda: owner.send_response_nowait(1, result=None),
            lambda: owner.send_request_nowait(2, "fs/read_text_file"),
        ):
            with pytest.raises(asyncio.QueueFull):
                call()
        assert lt.snapshot().meta == {"hold": True, "a": 1}
        t.open()


# -- the stream transport and direct writes ----------------------------------------------------


async def test_a_publication_reaches_the_pipe_in_the_call_that_made_it(
    driver: drivers.AsyncioDriver,
) -> None:
    async with PipeRecorder() as pipe, driver.open_asyncio_owner(pipe) as owner:
        lt = owner.open_lifetime(SID)
        for i in range(3):
            await lt.publish(meta={"i": i})
            assert metas(pipe.messages)[-1] == {"i": i}  # no task switch happened
        lt.resync()
        assert metas(pipe.messages)[-2:] == [None, {"i": 2}]
        assert owner.statistics().direct_writes == 5


async def test_no_direct_write_begins_once_the_parked_writer_is_cancelled(
    driver: drivers.AsyncioDriver,
) -> None:
    """The writer task, parked idle, is cancelled; until it runs, a direct write could begin a
    frame that nobody would finish (the future it awaits tells the idle writer inside
    ``Task.cancel()``, as trio's abort callback does)."""
    async with PipeRecorder(size=4096) as pipe:

        async def run() -> None:
            async with driver.open_asyncio_owner(pipe) as owner:
                lt = owner.open_lifetime(SID)
                await driver.wait_all_tasks_blocked()
                (writer,) = [
                    task
                    for task in asyncio.all_tasks()
                    if getattr(task.get_coro(), "__qualname__", "") == "OwnerBase._writer_loop"
                ]
                writer.cancel()
                assert lt.publish_nowait(meta={"big": "x" * 6000})  # queued, not written
                assert owner.statistics().direct_writes == 0

        with pytest.raises(ExceptionGroup) as caught:  # leaving the block: it had stopped
            await run()
        assert caught.group_contains(am.OwnerClosedError)
        assert pipe.read_available() == []
        assert pipe.partial == b""


async def test_a_reader_that_falls_behind_gets_every_frame_whole_and_in_order(
    driver: drivers.AsyncioDriver,
) -> None:
    """A one-page pipe that nobody reads: direct writes stop once the writer's buffer holds
    anything, the writer task takes over, and ``drain()`` holds it back at the high-water
    mark; the producers wait for room (``coalesce=False``). Reading everything at the end
    yields every frame, whole, in order."""
    count = 400
    async with PipeRecorder(size=4096) as pipe:
        writer = await pipe.asyncio_writer()
        writer.transport.set_write_buffer_limits(high=8192)
        async with driver.open_asyncio_owner(
            pipe, OwnerOptions(coalesce=False, capacity=4)
        ) as owner:
            lt = owner.open_lifetime(SID)

            async def produce() -> None:
                for i in range(count):
                    await lt.publish(meta={"i": i, "pad": "x" * 100})

            producer = asyncio.create_task(produce())
            while not producer.done():  # the test is the slow reader
                await driver.wait_all_tasks_blocked()
                pipe.read_available()
            await owner.wait_flushed()
        while pipe.partial or writer.transport.get_write_buffer_size():
            pipe.read_available()
            await driver.checkpoint()
        stats = owner.statistics()
    assert [m["i"] for m in metas(pipe.messages)] == list(range(count))
    assert 0 < stats.direct_writes < count  # some frames waited for the writer task


async def test_a_reader_that_goes_away_stops_the_owner_and_keeps_what_was_acknowledged(
    driver: drivers.AsyncioDriver,
) -> None:
    read_fd, write_fd = os.pipe()
    writer = await drivers.asyncio_pipe_writer(write_fd)
    received = b""

    async def run() -> None:
        nonlocal received
        async with driver.open_asyncio_owner(writer) as owner:
            lt = owner.open_lifetime(SID)
            for i in range(3):
                await lt.publish(meta={"i": i})
            await owner.wait_flushed()  # acknowledged
            received = os.read(read_fd, 1 << 16)
            os.close(read_fd)  # the client goes away
            await driver.wait_all_tasks_blocked()  # the pipe transport notices
            await lt.publish(meta={"i": 3})
            await owner.wait_flushed()

    try:
        with pytest.raises(am.TransportBrokenError):
            await run()
    finally:
        if not writer.transport.is_closing():
            writer.transport.abort()
    mirror = ClientMirror()
    mirror.feed_bytes(received)
    assert metas(mirror.messages) == [{"i": 0}, {"i": 1}, {"i": 2}]


async def test_the_stream_transport_refuses_a_closing_stream_and_stays_broken(
    driver: drivers.AsyncioDriver,
) -> None:
    read_fd, write_fd = os.pipe()
    writer = await drivers.asyncio_pipe_writer(write_fd)
    transport = AsyncioStreamTransport(writer)
    frame = b'{"jsonrpc":"2.0","method":"x"}\n'
    await transport.send_frame(frame)
    assert transport.send_nowait(frame) == len(frame)  # the buffer is empty
    writer.close()  # closing: write() would now drop frames without a word
    assert transport.send_nowait(frame) == 0
    with pytest.raises(am.TransportBrokenError):
        await transport.send_frame(frame)
    assert transport.broken
    assert not transport.can_send_nowait
    await writer.wait_closed()
    assert os.read(read_fd, 1 << 16) == frame * 2
    os.close(read_fd)


async def test_a_stream_closing_with_data_still_buffered_never_drops_a_frame_silently(
    driver: drivers.AsyncioDriver,
) -> None:
    """While a closed writer still flushes its buffer, asyncio's ``write()`` drops data
    without a word and ``drain()`` returns at once; the transport must refuse instead."""
    async with PipeRecorder(size=4096) as pipe:
        writer = await pipe.asyncio_writer()
        transport = AsyncioStreamTransport(writer)
        big = b'{"jsonrpc":"2.0","method":"x","params":{"p":"' + b"x" * 20000 + b'"}}\n'
        writer.write(big)  # more than the pipe takes: the rest waits in the buffer
        assert writer.transport.get_write_buffer_size()
        writer.close()  # closing, not closed: it flushes first
        with pytest.raises(am.TransportBrokenError):
            await transport.send_frame(b'{"jsonrpc":"2.0","method":"y"}\n')
        while writer.transport.get_write_buffer_size():
            pipe.read_available()
            await driver.checkpoint()
        pipe.read_available()
        assert pipe.frames == [big]


async def test_a_cancelled_drain_does_not_break_the_stream_transport(
    driver: drivers.AsyncioDriver,
) -> None:
    async with PipeRecorder(size=4096) as pipe:
        writer = await pipe.asyncio_writer()
        writer.transport.set_write_buffer_limits(high=0)  # every drain waits for the reader
        transport = AsyncioStreamTransport(writer)
        big = b'{"jsonrpc":"2.0","method":"x","params":{"p":"' + b"x" * 20000 + b'"}}\n'
        sending = asyncio.create_task(transport.send_frame(big))
        await driver.wait_all_tasks_blocked()  # in drain(): the pipe is full
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        assert not transport.broken  # the frame was handed over whole
        assert transport.send_nowait(big) == 0  # but it still waits in the buffer
        while writer.transport.get_write_buffer_size():
            pipe.read_available()
            await driver.checkpoint()
        pipe.read_available()
        assert pipe.frames == [big]


async def test_with_a_store_there_are_no_direct_writes(driver: drivers.AsyncioDriver) -> None:
    async with PipeRecorder() as pipe:
        store = am.MemoryStore()
        async with driver.open_asyncio_owner(pipe, store=store) as owner:
            lt = owner.open_lifetime(SID)
            await lt.publish(meta={"a": 1})
            assert store.records[SID].meta == '{"a":1}'  # accepted once stored
            await owner.wait_flushed()
        assert owner.statistics().direct_writes == 0
        assert store.writes >= 1
        assert metas(pipe.messages) == [{"a": 1}]


# -- the SQLite store's threads under asyncio ------------------------------------------------------


async def test_a_cancelled_store_call_still_waits_for_its_thread(
    driver: drivers.AsyncioDriver, tmp_path: Path
) -> None:
    """The worker thread of a cancelled call cannot be stopped; the store's lock is held until
    it ends, so the next call never finds the connection inside a transaction."""
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow(_: Any) -> None:
        started.set()
        release.wait(GUARD)
        order.append("slow")

    def quick(_: Any) -> None:
        order.append("quick")

    async with await am.SQLiteStore.open(tmp_path / "s.sqlite") as store:
        first = asyncio.create_task(store.run(slow))
        await in_thread(started.wait, GUARD)
        second = asyncio.create_task(store.run(quick))
        await driver.wait_all_tasks_blocked()
        first.cancel()
        await driver.wait_all_tasks_blocked()
        assert order == []  # neither the cancellation nor the next call went past the thread
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second
    assert order == ["slow", "quick"]
    assert store.closed


async def test_a_store_opened_under_asyncio_refuses_trio(
    driver: drivers.AsyncioDriver, tmp_path: Path
) -> None:
    """A store belongs to the runtime it was opened on (its lock and threads are that
    runtime's); using it under the other says so instead of failing obscurely."""
    path = tmp_path / "s.sqlite"
    store = await am.SQLiteStore.open(path)
    try:
        import trio

        async def load() -> None:
            await store.read("s")

        with pytest.raises(RuntimeError, match="opened under asyncio"):
            await asyncio.to_thread(trio.run, load)
    finally:
        await store.aclose()
