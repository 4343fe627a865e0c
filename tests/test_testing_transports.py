"""The fake transports of agent_meta.testing, driven directly (no owner needed)."""

from __future__ import annotations

import contextlib
import functools
import json
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from agent_meta import FrameLostError, FrameNotSentError, Transport
from agent_meta.owner._trio_stream import StreamTransport
from agent_meta.testing import (
    ClientMirror,
    FailingTransport,
    GatedTransport,
    MirrorError,
    RecordingTransport,
    SlowTransport,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

HANG_SECONDS = 10  # only reached if a test deadlocks; never a timing assertion


def frame(n: int, session_id: str = "s") -> bytes:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {"sessionUpdate": "session_info_update", "_meta": {"n": n}},
        },
    }
    return json.dumps(message).encode() + b"\n"


def hang_guard(test: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """Turn a deadlock in the gate logic into a failure instead of a hung test run."""

    @functools.wraps(test)
    async def guarded() -> None:
        with trio.fail_after(HANG_SECONDS):
            await test()

    return guarded


def numbers(frames: list[bytes]) -> list[int]:
    return [json.loads(f)["params"]["update"]["_meta"]["n"] for f in frames]


def test_all_are_transports() -> None:
    for transport in (
        RecordingTransport(),
        SlowTransport(1),
        GatedTransport(),
        FailingTransport(fail_on=1),
    ):
        assert isinstance(transport, Transport)


# --- RecordingTransport ---------------------------------------------------------------------


async def test_recording_keeps_frames_messages_and_feeds_mirror() -> None:
    mirror = ClientMirror()
    transport = RecordingTransport(mirror=mirror)
    with trio.testing.assert_checkpoints():
        await transport.send_frame(frame(1))
    await transport.send_frame(frame(2))
    assert transport.frames == [frame(1), frame(2)]
    assert transport.data == frame(1) + frame(2)
    assert [m["params"]["update"]["_meta"] for m in transport.messages] == [{"n": 1}, {"n": 2}]
    assert mirror.meta("s") == {"n": 2}
    assert mirror.messages == transport.messages


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b'{"jsonrpc": "2.0", "id": 1, "result": null}', id="no-newline"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 1}\n{"jsonrpc": "2.0", "id": 2}\n', id="two"),
        pytest.param(b"{oops\n", id="not-json"),
        pytest.param('{"jsonrpc": "2.0", "id": 1}\n', id="str"),
    ],
)
async def test_recording_rejects_what_is_not_one_frame(bad: bytes) -> None:
    transport = RecordingTransport()
    with pytest.raises(MirrorError):
        await transport.send_frame(bad)
    assert transport.frames == []


async def test_recording_mirror_error_surfaces_after_recording() -> None:
    mirror = ClientMirror()
    transport = RecordingTransport(mirror=mirror)
    bad = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
        b'"update":{"sessionUpdate":"session_info_update","_meta":[1]}}}\n'
    )
    with pytest.raises(MirrorError, match="_meta"):
        await transport.send_frame(bad)
    assert transport.frames == [bad]  # the bytes did go out; the client could not apply them
    assert mirror.messages == []


async def test_recording_close_and_send_after_close() -> None:
    inner = RecordingTransport()
    transport = RecordingTransport(inner=inner)
    await transport.send_frame(frame(1))
    assert inner.frames == [frame(1)]
    await transport.aclose()
    await transport.aclose()
    assert transport.closed
    assert not inner.closed  # whoever created inner closes it
    with pytest.raises(trio.ClosedResourceError):
        await transport.send_frame(frame(2))
    assert transport.frames == [frame(1)]


async def test_recording_forwards_to_a_stream_transport() -> None:
    send, receive = trio.testing.memory_stream_pair()
    transport = RecordingTransport(inner=StreamTransport(send))
    await transport.send_frame(frame(1))
    mirror = ClientMirror()
    mirror.feed_bytes(bytes(await receive.receive_some()))
    assert mirror.meta("s") == {"n": 1}


@hang_guard
async def test_wait_for_frames() -> None:
    transport = RecordingTransport()
    got = []
    async with trio.open_nursery() as nursery:

        async def waiter() -> None:
            await transport.wait_for_frames(2)
            got.append(len(transport.frames))

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        await transport.send_frame(frame(1))
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        await transport.send_frame(frame(2))
    assert got == [2]
    with trio.testing.assert_checkpoints():
        await transport.wait_for_frames(1)


# --- SlowTransport --------------------------------------------------------------------------


async def test_slow_sleeps_in_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    transport = SlowTransport(2.5)
    start = trio.current_time()
    for n in range(4):
        await transport.send_frame(frame(n))
    assert trio.current_time() - start == pytest.approx(10.0)
    assert numbers(transport.frames) == [0, 1, 2, 3]


async def test_slow_builds_backpressure(mock_clock: trio.testing.MockClock) -> None:
    transport = SlowTransport(1.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.send_frame, frame(1))
        await trio.testing.wait_all_tasks_blocked()
        assert transport.frames == []  # the send is still in progress
        mock_clock.jump(1.0)
    assert transport.frames == [frame(1)]


async def test_slow_cancelled_delivers_nothing(autojump_clock: trio.testing.MockClock) -> None:
    inner = RecordingTransport()
    transport = SlowTransport(5, inner=inner)
    with trio.move_on_after(1):
        await transport.send_frame(frame(1))
    assert transport.frames == []
    assert inner.frames == []
    await transport.send_frame(frame(2))
    assert inner.frames == transport.frames == [frame(2)]


def test_slow_rejects_negative_delay() -> None:
    with pytest.raises(ValueError, match="delay"):
        SlowTransport(-1)


# --- GatedTransport -------------------------------------------------------------------------


@hang_guard
async def test_gated_holds_and_releases_in_order() -> None:
    transport = GatedTransport()
    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(transport.send_frame, frame(n))
            await trio.testing.wait_all_tasks_blocked()
        await transport.wait_for_waiting(3)
        assert transport.waiting == 3
        assert transport.frames == []
        transport.release()
        await trio.testing.wait_all_tasks_blocked()
        assert numbers(transport.frames) == [0]
        assert transport.waiting == 2
        transport.release(2)
    assert numbers(transport.frames) == [0, 1, 2]
    assert transport.waiting == 0


@hang_guard
async def test_gated_wait_for_waiting_wakes_on_arrival() -> None:
    transport = GatedTransport()
    reached = []
    async with trio.open_nursery() as nursery:

        async def watcher() -> None:
            await transport.wait_for_waiting(2)
            reached.append(transport.waiting)

        nursery.start_soon(watcher)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(transport.send_frame, frame(1))
        await trio.testing.wait_all_tasks_blocked()
        assert reached == []
        nursery.start_soon(transport.send_frame, frame(2))
        await trio.testing.wait_all_tasks_blocked()
        assert reached == [2]
        transport.open()
    assert numbers(transport.frames) == [1, 2]


@hang_guard
async def test_gated_leftover_permits_and_open() -> None:
    transport = GatedTransport()
    transport.release(2)
    with trio.testing.assert_checkpoints():
        await transport.send_frame(frame(1))
    await transport.send_frame(frame(2))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.send_frame, frame(3))
        await transport.wait_for_waiting(1)
        assert transport.frames == [frame(1), frame(2)]
        transport.open()
    assert transport.is_open
    await transport.send_frame(frame(4))  # no longer held
    assert numbers(transport.frames) == [1, 2, 3, 4]
    with trio.testing.assert_checkpoints():
        await transport.wait_for_waiting(0)


@hang_guard
async def test_gated_cancelled_while_waiting_uses_no_permit() -> None:
    transport = GatedTransport()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.send_frame, frame(1))
        await transport.wait_for_waiting(1)
        nursery.cancel_scope.cancel()
    assert transport.waiting == 0
    assert transport.frames == []
    transport.release()
    await transport.send_frame(frame(2))  # the permit is still there
    assert transport.frames == [frame(2)]


@hang_guard
async def test_gated_permit_not_used_when_cancelled_before_passing() -> None:
    transport = GatedTransport()
    transport.release()
    with trio.CancelScope() as scope:
        scope.cancel()
        await transport.send_frame(frame(1))
    assert transport.frames == []
    await transport.send_frame(frame(2))
    assert transport.frames == [frame(2)]


def test_gated_release_validates() -> None:
    assert not GatedTransport().is_open
    with pytest.raises(ValueError, match="n must be"):
        GatedTransport().release(-1)


# --- FailingTransport -----------------------------------------------------------------------


async def test_failing_not_sent_writes_nothing_and_stays_usable() -> None:
    mirror = ClientMirror()
    inner = RecordingTransport()
    transport = FailingTransport(fail_on=[2, 3], inner=inner, mirror=mirror)
    await transport.send_frame(frame(1))
    for attempt in (2, 3):
        with pytest.raises(FrameNotSentError, match=f"send {attempt}"):
            await transport.send_frame(frame(2))
    await transport.send_frame(frame(2))  # the retry, call 4
    assert transport.calls == 4
    assert transport.failures == 2
    assert numbers(transport.frames) == numbers(inner.frames) == [1, 2]
    assert mirror.meta("s") == {"n": 2}
    assert transport.lost == []
    assert transport.partial == b""
    assert not transport.broken


async def test_failing_lost_swallows_the_frame() -> None:
    mirror = ClientMirror()
    inner = RecordingTransport()
    transport = FailingTransport(fail_on=2, mode="lost", inner=inner, mirror=mirror)
    await transport.send_frame(frame(1))
    with pytest.raises(FrameLostError):
        await transport.send_frame(frame(2))
    await transport.send_frame(frame(3))
    assert numbers(transport.frames) == numbers(inner.frames) == [1, 3]
    assert transport.lost == [frame(2)]
    assert mirror.meta("s") == {"n": 3}
    assert [m["params"]["update"]["_meta"]["n"] for m in mirror.messages] == [1, 3]


async def test_failing_partial_breaks_the_stream_for_good() -> None:
    inner = RecordingTransport()
    transport = FailingTransport(fail_on=2, mode="partial", inner=inner)
    await transport.send_frame(frame(1))
    with pytest.raises(OSError, match="send 2"):
        await transport.send_frame(frame(2))
    assert transport.broken
    assert transport.partial == frame(2)[: len(frame(2)) // 2]
    assert not transport.partial.endswith(b"\n")
    for _ in range(2):
        with pytest.raises(OSError, match="corrupt"):
            await transport.send_frame(frame(3))
    assert transport.calls == 4
    assert transport.failures == 3
    assert transport.frames == inner.frames == [frame(1)]
    # What a client reading the stream got: one whole line, then a half line it must not parse.
    mirror = ClientMirror()
    mirror.feed_bytes(transport.data + transport.partial)
    assert mirror.meta("s") == {"n": 1}
    assert mirror.partial == transport.partial


async def test_failing_predicate_sees_call_number_and_frame() -> None:
    seen: list[tuple[int, bytes]] = []

    def choose(call: int, data: bytes) -> bool:
        seen.append((call, data))
        return b'"other"' in data

    transport = FailingTransport(fail_on=choose)
    await transport.send_frame(frame(1))
    with pytest.raises(FrameNotSentError):
        await transport.send_frame(frame(2, "other"))
    await transport.send_frame(frame(3))
    assert seen == [(1, frame(1)), (2, frame(2, "other")), (3, frame(3))]
    assert numbers(transport.frames) == [1, 3]


async def test_failing_accepts_any_iterable() -> None:
    transport = FailingTransport(fail_on=iter(range(1, 3)), mode="lost")
    for n in range(1, 5):
        with pytest.raises(FrameLostError) if n < 3 else contextlib.nullcontext():
            await transport.send_frame(frame(n))
    assert numbers(transport.frames) == [3, 4]
    assert numbers(transport.lost) == [1, 2]


def test_failing_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        FailingTransport(fail_on=1, mode="sometimes")  # type: ignore[arg-type]


@hang_guard
async def test_gated_permit_handed_on_when_cancelled_after_release() -> None:
    # A held send is cancelled and, before it runs again, released: the permit must go on to
    # the next held send instead of vanishing.
    transport = GatedTransport()
    first = trio.CancelScope()

    async def send_first() -> None:
        with first:
            await transport.send_frame(frame(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_first)
        await transport.wait_for_waiting(1)
        nursery.start_soon(transport.send_frame, frame(2))
        await transport.wait_for_waiting(2)
        first.cancel()
        transport.release()
    assert transport.frames == [frame(2)]
    assert transport.waiting == 0
