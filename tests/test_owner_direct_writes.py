"""Direct writes: over a real pipe, the call that queues a frame writes it while the writer idles.

A ``StreamTransport`` over a :class:`trio.lowlevel.FdStream` lets the owner
write a frame in the very call that queued it (no task switch) whenever its writer task is
parked with nothing to do. These tests drive real ``os.pipe()`` pairs, shrunk to one page where
they need the pipe to fill, and check what matters: frames reach the pipe at once; a frame the
pipe takes only in part is finished by the writer before anything else, so lines never
interleave; ``wait_flushed`` waits for it; the end of a lifetime never cuts a frame in half; a
broken pipe stops the owner the usual way; with a store nothing is written before it is stored.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections import Counter
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agent_meta
from agent_meta import OwnerOptions
from agent_meta.owner._trio_stream import StreamTransport
from agent_meta.testing import ClientMirror
from tests.reporting import show_lines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="shrinks pipes with F_SETPIPE_SZ (Linux)"
)

PAGE = 4096
SEEN: Counter[str] = Counter()


@asynccontextmanager
async def pipe(size: int | None = None) -> AsyncIterator[tuple[int, trio.lowlevel.FdStream]]:
    """A pipe: the raw read end (non-blocking) and an FdStream on the write end."""
    read_fd, write_fd = os.pipe()
    if size is not None:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, size)
    os.set_blocking(read_fd, False)
    stream = trio.lowlevel.FdStream(write_fd)
    try:
        yield read_fd, stream
    finally:
        await stream.aclose()
        os.close(read_fd)


def read_now(fd: int) -> bytes:
    """Everything in the pipe right now (no checkpoint, so nothing else runs meanwhile)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def read_lines(fd: int, count: int, data: bytes = b"") -> bytes:
    """Read until ``count`` whole lines have arrived."""
    while data.count(b"\n") < count:
        await trio.lowlevel.wait_readable(fd)
        data += read_now(fd)
    return data


def start_flush(nursery: trio.Nursery, owner: agent_meta.MetaOwner) -> trio.Event:
    """Start a task that waits in ``owner.wait_flushed()``; the event is set once it returns."""
    flushed = trio.Event()

    async def flush() -> None:
        await owner.wait_flushed()
        flushed.set()

    nursery.start_soon(flush)
    return flushed


def updates(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line)["params"]["update"] for line in data.splitlines()]


async def test_send_nowait_writes_only_to_a_working_fd_stream() -> None:
    memory, _ = trio.testing.memory_stream_pair()
    in_memory = StreamTransport(memory)
    assert not in_memory.can_send_nowait
    assert in_memory.send_nowait(b"{}\n") == 0  # not a pipe: always through the writer task

    async with pipe() as (read_fd, stream):
        transport = StreamTransport(stream)
        assert transport.can_send_nowait
        assert transport.send_nowait(b"{}\n") == 3
        assert read_now(read_fd) == b"{}\n"
        await stream.aclose()
        assert transport.send_nowait(b"{}\n") == 0  # closed: the writer task reports it
        with pytest.raises(agent_meta.TransportBrokenError) as broken:
            await transport.send_frame(b"{}\n")
        assert isinstance(broken.value.__cause__, trio.ClosedResourceError)  # mapped at the seam
        after = (transport.broken, transport.can_send_nowait, transport.send_nowait(b"{}\n"))
        assert after == (True, False, 0)  # broken for good: never written to again


async def test_a_publication_reaches_the_pipe_in_the_call_that_made_it() -> None:
    async with pipe() as (read_fd, stream), agent_meta.open_owner(stream) as owner:
        lifetime = owner.open_lifetime("s")
        await trio.testing.wait_all_tasks_blocked()  # the writer parks: nothing to do
        assert lifetime.publish_nowait(meta={"a": 1})
        # No checkpoint since the call: the writer task cannot have run.
        assert updates(read_now(read_fd)) == [
            {"sessionUpdate": "session_info_update", "_meta": {"a": 1}}
        ]
        stats = owner.statistics()
        assert (stats.frames_written, stats.direct_writes, stats.queued) == (1, 1, 0)


async def test_a_resync_is_written_in_the_call_clear_first_then_the_state() -> None:
    async with pipe() as (read_fd, stream), agent_meta.open_owner(stream) as owner:
        lifetime = owner.open_lifetime("s", seed=agent_meta.SessionInfoPatch(meta={"seeded": True}))
        await trio.testing.wait_all_tasks_blocked()
        assert lifetime.resync()
        assert [update.get("_meta") for update in updates(read_now(read_fd))] == [
            None,
            {"seeded": True},
        ]


async def test_a_partly_written_frame_is_finished_before_any_later_frame() -> None:
    async with (
        pipe(PAGE) as (read_fd, stream),
        agent_meta.open_owner(stream, OwnerOptions(coalesce=False, capacity=16)) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await trio.testing.wait_all_tasks_blocked()
        assert lifetime.publish_nowait(meta={"big": "x" * 5000, "step": 0})  # over a page
        assert lifetime.publish_nowait(meta={"step": 1})
        assert lifetime.publish_nowait(meta={"step": 2})
        await owner.send_response(7, result={"done": True})  # queued behind them
        stats = owner.statistics()
        assert (stats.frames_written, stats.direct_writes) == (0, 0)
        assert stats.queued == 4  # the half-written frame, two more, the response

        async with trio.open_nursery() as nursery:
            flushed = start_flush(nursery, owner)
            await trio.testing.wait_all_tasks_blocked()
            assert not flushed.is_set()  # the pipe is full and nobody reads it
            # The pipe took one page of the first frame and nothing else.
            first = read_now(read_fd)
            assert len(first) == PAGE
            assert b"\n" not in first
            data = await read_lines(read_fd, 4, first)
            await trio.testing.wait_all_tasks_blocked()
            assert flushed.is_set()

    lines = data.splitlines()
    assert [json.loads(line)["params"]["update"]["_meta"]["step"] for line in lines[:3]] == [
        0,
        1,
        2,
    ]
    assert json.loads(lines[3]) == {"jsonrpc": "2.0", "id": 7, "result": {"done": True}}
    stats = owner.statistics()
    assert (stats.frames_written, stats.direct_writes) == (4, 0)  # the writer task wrote all


async def test_wait_flushed_waits_for_the_rest_of_a_half_written_frame() -> None:
    async with (
        pipe(PAGE) as (read_fd, stream),
        agent_meta.open_owner(stream) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await trio.testing.wait_all_tasks_blocked()
        assert lifetime.publish_nowait(meta={"big": "z" * 5000})  # one page of it went out
        assert owner.statistics().queued == 1  # nothing is queued, but a frame is unfinished
        async with trio.open_nursery() as nursery:
            flushed = start_flush(nursery, owner)
            await trio.testing.wait_all_tasks_blocked()
            assert not flushed.is_set()
            data = await read_lines(read_fd, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert flushed.is_set()
        assert updates(data) == [
            {"sessionUpdate": "session_info_update", "_meta": {"big": "z" * 5000}}
        ]
        assert owner.statistics().queued == 0


async def test_ending_a_lifetime_never_cuts_its_half_written_frame() -> None:
    async with (
        pipe(PAGE) as (read_fd, stream),
        agent_meta.open_owner(stream, OwnerOptions(coalesce=False, capacity=16)) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await trio.testing.wait_all_tasks_blocked()
        assert lifetime.publish_nowait(meta={"big": "y" * 5000, "step": 0})  # half written
        assert lifetime.publish_nowait(meta={"step": 1})  # queued
        first = read_now(read_fd)
        owner.close_lifetime("s")
        await owner.send_response(1, result=None)
        data = await read_lines(read_fd, 3, first)
        await owner.wait_flushed()
        assert read_now(read_fd) == b""

    lines = data.splitlines()
    assert json.loads(lines[0])["params"]["update"]["_meta"]["step"] == 0
    assert json.loads(lines[1])["params"]["update"]["_meta"] == {"step": 1}  # queued before
    assert json.loads(lines[2]) == {"jsonrpc": "2.0", "id": 1, "result": None}
    assert len(lines) == 3
    assert owner.statistics().fenced == 0


async def test_ending_a_lifetime_while_its_resync_is_half_written_still_waits_for_it() -> None:
    # The resync's clear went out whole and its snapshot only in part, from the queue's own
    # entry (not a publish_now frame). Closing the session drops nothing that has begun: the
    # drain at exit waits for the rest, so the owner never leaves a line cut in half.
    seed = agent_meta.SessionInfoPatch(meta={"big": "x" * 6000})
    async with pipe(PAGE) as (read_fd, stream):
        async with agent_meta.open_owner(stream) as owner:
            lifetime = owner.open_lifetime("s", seed=seed)
            await trio.testing.wait_all_tasks_blocked()
            assert lifetime.resync()
            owner.close_lifetime("s")
            assert owner.statistics().queued == 1
            async with trio.open_nursery() as nursery:
                flushed = start_flush(nursery, owner)
                await trio.testing.wait_all_tasks_blocked()
                assert not flushed.is_set()  # nobody reads: the snapshot's rest still waits
                data = await read_lines(read_fd, 2)
        assert read_now(read_fd) == b""
    assert [update["_meta"] for update in updates(data)] == [None, {"big": "x" * 6000}]
    assert owner.statistics().fenced == 0  # nothing was dropped: both frames went out


async def test_no_direct_write_begins_once_the_owner_is_cancelled() -> None:
    # The writer task, parked idle, is cancelled with the owner's scope; until it runs, a
    # direct write could begin a frame that nobody would finish. It must not begin one.
    async with pipe(PAGE) as (read_fd, stream):
        with trio.CancelScope() as scope:
            async with agent_meta.open_owner(stream) as owner:
                lifetime = owner.open_lifetime("s")
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                assert lifetime.publish_nowait(meta={"big": "x" * 6000})
                assert owner.statistics().direct_writes == 0
                await trio.sleep_forever()
        assert read_now(read_fd) == b""


async def test_a_subclass_of_stream_transport_gets_every_frame_through_send_frame() -> None:
    class CountingTransport(StreamTransport):
        def __init__(self, stream: trio.abc.SendStream) -> None:
            super().__init__(stream)
            self.sent: list[bytes] = []

        async def send_frame(self, frame: bytes) -> None:
            self.sent.append(frame)
            await super().send_frame(frame)

    async with pipe() as (read_fd, stream):
        transport = CountingTransport(stream)
        async with agent_meta.open_owner(transport) as owner:
            lifetime = owner.open_lifetime("s")
            await trio.testing.wait_all_tasks_blocked()
            assert lifetime.publish_nowait(meta={"a": 1})
            await owner.wait_flushed()
        assert owner.statistics().direct_writes == 0
        assert read_now(read_fd) == b"".join(transport.sent)
        assert len(transport.sent) == 1


async def test_a_broken_pipe_met_by_a_direct_write_stops_the_owner() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the client is gone
    stream = trio.lowlevel.FdStream(write_fd)
    accepted: list[bool] = []

    async def run() -> None:
        async with agent_meta.open_owner(stream) as owner:
            lifetime = owner.open_lifetime("s")
            await trio.testing.wait_all_tasks_blocked()
            accepted.append(lifetime.publish_nowait(meta={"a": 1}))
            await trio.sleep_forever()

    with pytest.raises(agent_meta.TransportBrokenError):
        await run()
    await stream.aclose()
    assert accepted == [True]  # the failed write is the writer's to report, not the caller's


async def test_with_a_store_nothing_is_written_before_it_is_stored() -> None:
    store = agent_meta.MemoryStore()
    async with (
        pipe() as (read_fd, stream),
        agent_meta.open_owner(stream, store=store) as owner,
    ):
        lifetime = owner.open_lifetime("s")
        await owner.wait_flushed()
        assert lifetime.publish_nowait(meta={"a": 1})
        assert read_now(read_fd) == b""  # waits for the store first
        await owner.wait_flushed()
        assert updates(read_now(read_fd))[-1]["_meta"] == {"a": 1}
        stored = store.records["s"]
    assert stored.meta == '{"a":1}'


# -- random programs over a one-page pipe, with a reader that stops and goes ------------------

value = st.one_of(
    st.integers(-3, 3),
    st.none(),
    st.sampled_from(["é", "z" * 1500, "w" * 3000, "v" * 5000]),  # some frames outgrow the pipe
)
publish = st.tuples(
    st.just("publish"),
    st.sampled_from(["s0", "s1"]),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), value, min_size=1, max_size=2),
)
read = st.tuples(st.just("read"), st.sampled_from([1, 100, PAGE, 4 * PAGE]))
checkpoint = st.tuples(st.just("yield"))
operation = st.one_of(
    publish,
    publish,
    publish,
    read,
    read,
    checkpoint,
    checkpoint,
    st.tuples(st.just("clear"), st.sampled_from(["s0", "s1"])),
    st.tuples(st.just("resync"), st.sampled_from(["s0", "s1"])),
    st.tuples(st.just("close"), st.sampled_from(["s0", "s1"])),
    st.tuples(st.just("respond"), st.integers(0, 99)),
)


async def run_program(coalesce: bool, program: list[tuple[Any, ...]]) -> None:
    mirror = ClientMirror()
    responses_sent: list[int] = []
    responses_seen: list[int] = []
    received = 0

    def take(data: bytes) -> None:
        nonlocal received
        received += len(data)
        messages = mirror.feed_bytes(data)
        responses_seen.extend(message["id"] for message in messages if "id" in message)

    async with (
        pipe(PAGE) as (read_fd, stream),
        agent_meta.open_owner(stream, OwnerOptions(coalesce=coalesce, capacity=4)) as owner,
    ):
        for op in program:
            kind = op[0]
            if kind in ("publish", "clear", "resync"):
                sid = op[1]
                if not owner.has_lifetime(sid):
                    owner.open_lifetime(sid).resync()  # as a resume handler does
                lifetime = owner.lifetime(sid)
                try:
                    if kind == "publish":
                        lifetime.publish_nowait(meta=op[2])
                    elif kind == "clear":
                        lifetime.publish_nowait(meta=None)
                    else:
                        lifetime.resync()
                except trio.WouldBlock:
                    pass  # the pipe and the queue are full: the program moves on
            elif kind == "close":
                if owner.has_lifetime(op[1]):
                    owner.close_lifetime(op[1])
            elif kind == "respond":
                if owner.statistics().queued < 4:
                    await owner.send_response(op[1], result=None)
                    responses_sent.append(op[1])
            elif kind == "read":
                data = b""
                while len(data) < op[1]:
                    try:
                        chunk = os.read(read_fd, op[1] - len(data))
                    except BlockingIOError:
                        break
                    data += chunk
                take(data)
            else:
                await trio.lowlevel.checkpoint()

        async def drain() -> None:
            while True:
                await trio.lowlevel.wait_readable(read_fd)
                take(read_now(read_fd))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await owner.wait_flushed()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        take(read_now(read_fd))

        assert mirror.partial == b""  # every frame arrived whole
        for sid in owner.lifetime_ids():
            assert mirror.meta(sid) == owner.lifetime(sid).snapshot().meta, sid
        assert responses_seen == responses_sent
        stats = owner.statistics()
        assert received == stats.bytes_written
        SEEN["examples"] += 1
        SEEN["frames"] += stats.frames_written
        SEEN["written directly"] += stats.direct_writes


@pytest.fixture(scope="module", autouse=True)
def _report_random_programs(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if SEEN["examples"]:
        frames = SEEN["frames"]
        direct = SEEN["written directly"]
        show_lines(
            request.config,
            [
                f"direct writes: {SEEN['examples']:,} programs over a one-page pipe: "
                f"{frames:,} frames, {direct:,} written by the call that queued them, "
                f"{frames - direct:,} by the writer task"
            ],
        )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(coalesce=st.booleans(), program=st.lists(operation, min_size=10, max_size=50))
def test_random_programs_over_a_full_pipe_deliver_whole_frames_in_order(
    coalesce: bool, program: list[tuple[Any, ...]]
) -> None:
    trio.run(run_program, coalesce, program)
