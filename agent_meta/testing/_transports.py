"""Fake transports for tests: record, slow down, hold back, or fail the owner's frames.

Each one implements :class:`agent_meta.Transport` (``send_frame``). Each can wrap
an ``inner`` transport (frames it delivers are forwarded there) and can feed a
:class:`~agent_meta.testing.ClientMirror` with every frame it delivers, so a test can assert
both the exact bytes and what a client would hold.

A delivered frame must be one complete NDJSON line holding one JSON-RPC message; anything else
raises :class:`~agent_meta.testing.MirrorError` from ``send_frame`` (which the owner treats as
a broken transport), because an owner must never produce it.

They serve both drivers: awaited by :func:`~agent_meta.open_owner` (trio) or
:func:`~agent_meta.open_asyncio_owner` (asyncio), each uses that runtime's checkpoints, sleeps
and events. An instance waits in one runtime at a time.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Literal, TypeAlias

import trio

from ..core._errors import FrameLostError, FrameNotSentError
from ._mirror import ClientMirror, Message, MirrorError, parse_frames
from ._runtime import (
    Pulse,
    cancel_shielded_checkpoint,
    checkpoint,
    checkpoint_if_cancelled,
    new_event,
    sleep,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ..owner._transport import Transport
    from ._runtime import Event

__all__ = [
    "FailMode",
    "FailingTransport",
    "GatedTransport",
    "RecordingTransport",
    "SlowTransport",
]

FailMode: TypeAlias = Literal["not_sent", "lost", "partial"]
"""How :class:`FailingTransport` fails a chosen send."""


class RecordingTransport:
    """A :class:`~agent_meta.Transport` that keeps every frame it is given, in order.

    ``frames`` holds the raw bytes, ``messages`` the parsed messages. With ``mirror``, each
    frame is also fed to that :class:`~agent_meta.testing.ClientMirror`. With ``inner``, each
    frame is forwarded there first and recorded only if that succeeds. Sending after
    :meth:`aclose` raises :class:`trio.ClosedResourceError` (on either runtime).

    Frames are recorded in the order sends finish; the owner has a single writer, so that is
    the order it sent them (:class:`GatedTransport` also keeps arrival order for concurrent
    senders).
    """

    def __init__(
        self, *, mirror: ClientMirror | None = None, inner: Transport | None = None
    ) -> None:
        self.frames: list[bytes] = []
        """Every delivered frame, exactly as sent (newline included)."""
        self.messages: list[Message] = []
        """Every delivered frame, parsed."""
        self.mirror = mirror
        """The mirror fed with each delivered frame, if any."""
        self.inner = inner
        """The transport delivered frames are forwarded to, if any."""
        self.closed = False
        """True once :meth:`aclose` was called."""
        self._recorded = Pulse()

    @property
    def data(self) -> bytes:
        """All delivered bytes, as a client reading the stream would see them."""
        return b"".join(self.frames)

    async def send_frame(self, frame: bytes) -> None:
        """Deliver one frame: forward it to ``inner`` (if any), then record it."""
        await checkpoint()
        await self._deliver(frame)

    async def aclose(self) -> None:
        """Mark the transport closed; later sends fail. Idempotent.

        ``inner`` is left open: whoever created a transport closes it (the owner never
        closes a transport it was given).
        """
        await checkpoint()
        self.closed = True

    async def wait_for_frames(self, count: int) -> None:
        """Wait until at least ``count`` frames have been delivered in total (a checkpoint)."""
        if len(self.frames) >= count:
            await checkpoint()
            return
        while len(self.frames) < count:
            await self._recorded.wait()

    async def _deliver(self, frame: bytes) -> None:
        if self.closed:
            raise trio.ClosedResourceError("send_frame after aclose")
        messages = _check_frame(frame)
        if self.inner is not None:
            await self.inner.send_frame(frame)
        self._record(frame, messages)

    def _record(self, frame: bytes, messages: list[Message]) -> None:
        self.frames.append(bytes(frame))
        self.messages.extend(messages)
        self._recorded.fire()
        if self.mirror is not None:
            for message in messages:
                self.mirror.feed(message)


def _check_frame(frame: bytes) -> list[Message]:
    if not isinstance(frame, bytes | bytearray):
        raise MirrorError(f"a frame must be bytes, not {type(frame).__name__}")
    if not frame.endswith(b"\n"):
        raise MirrorError(f"frame does not end with a newline: {bytes(frame)[:300]!r}")
    return parse_frames(bytes(frame))


class SlowTransport(RecordingTransport):
    """A slow reader: each send first sleeps ``delay`` seconds, then delivers the frame.

    It sleeps in the running runtime's clock (:func:`trio.sleep` or :func:`asyncio.sleep`), so
    under the ``autojump_clock`` fixture (or any :class:`trio.testing.MockClock`, or an asyncio
    loop with a virtual clock) a backlog builds up in virtual time and the test still runs
    instantly. Use it to exercise backpressure and coalescing.
    """

    def __init__(
        self,
        delay: float,
        *,
        inner: Transport | None = None,
        mirror: ClientMirror | None = None,
    ) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, not {delay!r}")
        super().__init__(mirror=mirror, inner=inner)
        self.delay = delay
        """Seconds each send waits before delivering."""

    async def send_frame(self, frame: bytes) -> None:
        """Sleep ``delay`` seconds, then deliver (nothing is delivered if cancelled first)."""
        await sleep(self.delay)
        await self._deliver(frame)


class GatedTransport(RecordingTransport):
    """Each send blocks until the test lets it through; the test controls the pace exactly.

    Sends pass the gate, and are delivered, in arrival order. :meth:`release` lets ``n`` sends
    through (held ones first; what is left over lets later sends pass without blocking),
    :meth:`open` lets everything through from now on. :attr:`waiting` and
    :meth:`wait_for_waiting` show how many sends are held, without polling.
    """

    def __init__(
        self, *, inner: Transport | None = None, mirror: ClientMirror | None = None
    ) -> None:
        super().__init__(mirror=mirror, inner=inner)
        self._held: collections.deque[Event] = collections.deque()
        self._permits = 0
        self._open = False
        self._arrived = Pulse()
        self._next_ticket = 0
        self._finished: set[int] = set()
        self._first_unfinished = 0
        self._turn = Pulse()

    @property
    def waiting(self) -> int:
        """How many sends are held at the gate right now."""
        return len(self._held)

    @property
    def is_open(self) -> bool:
        """True after :meth:`open`: sends are no longer held."""
        return self._open

    def release(self, n: int = 1) -> None:
        """Let the next ``n`` sends through: held ones first, in order, then future ones."""
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n!r}")
        for _ in range(n):
            self._grant()

    def open(self) -> None:
        """Let every held send through and stop holding sends."""
        self._open = True
        while self._held:
            self._held.popleft().set()

    async def wait_for_waiting(self, n: int) -> None:
        """Wait until at least ``n`` sends are held at the gate (always a checkpoint)."""
        if self.waiting >= n:
            await checkpoint()
            return
        while self.waiting < n:
            await self._arrived.wait()

    async def send_frame(self, frame: bytes) -> None:
        """Wait at the gate until released, then deliver the frame after earlier sends.

        Cancelled while held, nothing is delivered and no permit is used.
        """
        ticket = self._next_ticket
        self._next_ticket += 1
        try:
            await self._pass_gate()
            while self._first_unfinished < ticket:
                await self._turn.wait()
            await self._deliver(frame)
        finally:
            self._finish(ticket)

    def _grant(self) -> None:
        if self._held:
            self._held.popleft().set()
        else:
            self._permits += 1

    async def _pass_gate(self) -> None:
        if self._open or (self._permits > 0 and not self._held):
            await checkpoint_if_cancelled()
            if not self._open:
                self._permits -= 1
            await cancel_shielded_checkpoint()
            return
        passed = new_event()
        self._held.append(passed)
        self._arrived.fire()
        try:
            await passed.wait()
        except BaseException:
            if passed.is_set():
                self._grant()  # let through in time, but cancelled: hand the permit on
            else:
                self._held.remove(passed)
            raise

    def _finish(self, ticket: int) -> None:
        self._finished.add(ticket)
        while self._first_unfinished in self._finished:
            self._finished.remove(self._first_unfinished)
            self._first_unfinished += 1
        self._turn.fire()


class FailingTransport(RecordingTransport):
    """Fails chosen sends in one of the three ways :mod:`agent_meta`'s transport seam knows.

    Send calls are counted from 1 (:attr:`calls`), retries included. ``fail_on`` picks the
    calls that fail: one call number, several, or a predicate ``(call_number, frame) -> bool``.
    ``mode`` says how they fail:

    * ``"not_sent"``: raise :class:`~agent_meta.FrameNotSentError`; nothing was written and
      the transport stays usable (the owner may retry).
    * ``"lost"``: the frame is swallowed (kept in :attr:`lost`, not in ``frames``, not fed to
      the mirror or ``inner``), then :class:`~agent_meta.FrameLostError` is raised; the stream
      stays usable.
    * ``"partial"``: the first half of the frame is "written" (kept in :attr:`partial`) and
      :class:`OSError` is raised. The stream is now corrupt, so every later send raises
      :class:`OSError` too and delivers nothing.

    Other sends are delivered like :class:`RecordingTransport` does.
    """

    def __init__(
        self,
        *,
        fail_on: Iterable[int] | int | Callable[[int, bytes], bool],
        mode: FailMode = "not_sent",
        inner: Transport | None = None,
        mirror: ClientMirror | None = None,
    ) -> None:
        if mode not in ("not_sent", "lost", "partial"):
            raise ValueError(f"mode must be 'not_sent', 'lost' or 'partial', not {mode!r}")
        super().__init__(mirror=mirror, inner=inner)
        self._should_fail: Callable[[int, bytes], bool]
        if callable(fail_on):
            self._should_fail = fail_on
        else:
            numbers = frozenset([fail_on] if isinstance(fail_on, int) else fail_on)
            self._should_fail = lambda call, _frame: call in numbers
        self.mode: FailMode = mode
        """How chosen sends fail."""
        self.calls = 0
        """How many times ``send_frame`` was called (failed calls included)."""
        self.failures = 0
        """How many sends this transport failed on purpose (later sends refused after a
        partial write included)."""
        self.lost: list[bytes] = []
        """Frames swallowed in ``"lost"`` mode."""
        self.partial = b""
        """The bytes of the half frame written in ``"partial"`` mode."""
        self.broken = False
        """True after a partial write: every later send fails."""

    async def send_frame(self, frame: bytes) -> None:
        """Deliver the frame, or fail as configured for this call number."""
        self.calls += 1
        await checkpoint()
        if self.broken:
            self.failures += 1
            raise OSError("stream is corrupt: an earlier write stopped part-way through a frame")
        if not self._should_fail(self.calls, frame):
            await self._deliver(frame)
            return
        self.failures += 1
        if self.mode == "not_sent":
            raise FrameNotSentError(f"send {self.calls} failed on purpose; nothing was written")
        if self.mode == "lost":
            self.lost.append(bytes(frame))
            raise FrameLostError(f"send {self.calls} failed on purpose; the frame was lost")
        self.broken = True
        self.partial = bytes(frame[: len(frame) // 2])
        raise OSError(f"send {self.calls} failed on purpose after {len(self.partial)} bytes")
