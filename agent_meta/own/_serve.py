"""The I/O of ``agent-meta own``: two pumps, the owner over stdout, signals, and the end.

- The client pump reads stdin line by line (the sans-IO line splitter, with the limit) and
  hands each line to the :class:`~agent_meta.own._relay.Relay`; at the end of the input
  it closes the child's stdin, and the child has ``--exit-grace`` seconds to exit before it is
  stopped (SIGTERM, then SIGKILL).
- The child pump reads the child's stdout the same way; when it ends, the client's requests the
  child left unanswered are answered, and ``own`` exits with the child's status once the owner
  has written what it accepted (within :data:`DRAIN_TIMEOUT`).
- SIGTERM and SIGINT are passed on to the child, which then has the same grace; a second one
  kills it.
- The owner stops when the client stops reading (a broken stdout): the child is stopped, and
  the exit status is 1, as ``agent-meta agent``'s when frames were left unwritten.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import IO, TYPE_CHECKING, Final

import trio

from ..core._errors import OwnerClosedError, StoreError, TransportBrokenError
from ..owner._trio import open_owner
from ..sansio._lines import READ_SIZE, IncompleteLineError, LineSplitter, LineTooLongError
from ..sansio._options import OwnerOptions
from ._relay import Relay
from ._reports import Reports

if TYPE_CHECKING:
    from ..stores._store import LifetimeStore
    from ._child import Child
    from ._command import OwnSettings

__all__ = ["DRAIN_TIMEOUT", "serve"]

DRAIN_TIMEOUT: Final = 10.0
"""Seconds the owner may take, once the child's output has ended, to write what it accepted;
and how long a child stopped by a signal is given before it is killed."""

NAME: Final = "agent-meta own"


def serve(child: Child, settings: OwnSettings, log: IO[str] | None) -> int:
    """Serve the client with ``child`` behind the owner until the child exits; return the exit
    status (the child's; 1 when the client stopped reading or the store failed)."""
    reports = Reports(sys.stderr, log, name=NAME)
    try:
        return trio.run(_serve, child, settings, reports)
    except KeyboardInterrupt:  # before the signal handler was in place
        return 130
    finally:
        _stop_for_good(child)
        reports.close()


async def _serve(child: Child, settings: OwnSettings, reports: Reports) -> int:
    store: LifetimeStore | None = None
    async with contextlib.AsyncExitStack() as stack:
        if settings.store is not None:
            from ..stores._open import open_store

            try:
                store = await stack.enter_async_context(open_store(settings.store))
            except StoreError as exc:
                reports.say(f"cannot open the store: {exc}")
                return 1
        try:
            return await _relay(child, settings, reports, store)
        except (TransportBrokenError, OwnerClosedError) as exc:
            reports.say(f"stopped: the client stopped reading ({exc})")
        except StoreError as exc:
            reports.say(f"stopped: the lifetime store failed ({exc})")
    return 1


async def _relay(
    child: Child, settings: OwnSettings, reports: Reports, store: LifetimeStore | None
) -> int:
    options = OwnerOptions(
        protocol_version=1,  # until initialize is answered
        coalesce=settings.coalesce,
        max_frame_bytes=settings.max_line + 2,  # whatever line the child may send
        drain_timeout=0.0,  # the end below waits for the owner itself (DRAIN_TIMEOUT), once
    )
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    child_in = trio.lowlevel.FdStream(child.stdin_fd)
    child_out = trio.lowlevel.FdStream(child.stdout_fd)
    async with (
        stdin,
        stdout,
        child_in,
        child_out,
        open_owner(stdout, options, store=store) as owner,
    ):
        relay = Relay(
            owner,
            child_in,
            reports,
            child_meta=settings.child_meta,
            coalesce=settings.coalesce,
        )
        status: int | None = None
        async with trio.open_nursery() as nursery:
            stopping = _Stopping(child, settings.exit_grace, nursery)
            nursery.start_soon(_pump_client, relay, stdin, settings.max_line, stopping)
            nursery.start_soon(_pass_signals, child, stopping)
            await _pump_child(relay, child_out, settings.max_line)
            stopping.start()  # its output ended: it has the grace to exit
            status = await child.wait()
            await relay.child_ended(status)
            nursery.cancel_scope.cancel()
        flushed = False
        if not stopping.gave_up:  # else the client has stalled for DRAIN_TIMEOUT already
            with trio.move_on_after(DRAIN_TIMEOUT):
                await owner.wait_flushed()
                flushed = True
        reports.summary(relay.statistics, owner.statistics().fenced)
    if status is None or not flushed:
        reports.say(
            "stopped: what the agent sent could not all be written (the client stopped reading?)"
        )
        return 1
    return status


class _Stopping:
    """Stops the child once it was asked to end (its input closed, a signal passed on) and did
    not within the grace: SIGTERM, then SIGKILL. If the child is gone and its output still has
    not been taken (the client stopped reading), the run is given up."""

    def __init__(self, child: Child, grace: float, nursery: trio.Nursery) -> None:
        self._child = child
        self._grace = grace
        self._nursery = nursery
        self._started = False
        self.gave_up = False
        """The child is gone and its output was not all taken within ``DRAIN_TIMEOUT``: the
        client stopped reading, and the run was given up."""

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._nursery.start_soon(self._stop)

    async def _stop(self) -> None:
        child = self._child
        with trio.move_on_after(self._grace):
            await child.wait()
        if child.running:
            child.send_signal(signal.SIGTERM)
            with trio.move_on_after(DRAIN_TIMEOUT):
                await child.wait()
        child.kill()
        await child.wait()
        await trio.sleep(DRAIN_TIMEOUT)  # its output is still being taken: the client stalls
        self.gave_up = True
        self._nursery.cancel_scope.cancel()


async def _pump_client(
    relay: Relay, stdin: trio.abc.ReceiveStream, max_line: int, stopping: _Stopping
) -> None:
    splitter = LineSplitter(max_line_bytes=max_line)
    try:
        while True:
            try:
                line = splitter.next_line()
            except LineTooLongError as exc:
                await relay.refuse_client(exc)
                continue
            except IncompleteLineError as exc:
                await relay.refuse_client(exc)
                return
            if line is not None:
                await relay.client_line(line)
            elif splitter.ended:
                return
            else:
                splitter.feed(await _receive(stdin))
    finally:
        with trio.CancelScope(shield=True):
            await relay.client_ended()
        stopping.start()


async def _pump_child(relay: Relay, child_out: trio.abc.ReceiveStream, max_line: int) -> None:
    splitter = LineSplitter(max_line_bytes=max_line)
    while True:
        try:
            line = splitter.next_line()
        except LineTooLongError as exc:
            relay.child_bad_line(f"not forwarded: {exc}")
            continue
        except IncompleteLineError as exc:
            await relay.child_line(exc.partial)  # the last line, without its newline
            await relay.flush()
            return
        if line is not None:
            await relay.child_line(line)
            continue
        await relay.flush()  # all it wrote so far is taken
        if splitter.ended:
            return
        splitter.feed(await _receive(child_out))


async def _receive(stream: trio.abc.ReceiveStream) -> bytes:
    try:
        return bytes(await stream.receive_some(READ_SIZE))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


async def _pass_signals(child: Child, stopping: _Stopping) -> None:
    """SIGTERM and SIGINT: passed on to the child (which then has the grace); a second one
    kills it."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        passed = False
        async for signum in signals:
            if passed:
                child.kill()
                continue
            passed = True
            child.send_signal(signum)
            stopping.start()


def _stop_for_good(child: Child) -> None:
    """However the run ended, the child does not outlive it."""
    if child.running:
        child.send_signal(signal.SIGTERM)
        if child.wait_for(DRAIN_TIMEOUT) is None:
            child.kill()
            child.wait_for(DRAIN_TIMEOUT)
