"""One harness, two runtimes: the owner's tests run once against each driver.

A test written against :class:`Driver` runs on trio (:func:`agent_meta.open_owner`) and on
asyncio (:func:`agent_meta.open_asyncio_owner`) unchanged. ``conftest.py`` gives async tests a
``driver`` fixture (parametrized ``trio`` / ``asyncio``) and runs them with
:meth:`Driver.run`; sync tests (hypothesis programs) call ``driver.run`` themselves.

What each runtime needs for deterministic tests:

- trio: ``trio.testing.wait_all_tasks_blocked`` and, with ``autojump=True``, a
  ``MockClock(autojump_threshold=0)``.
- asyncio: a loop (:class:`_TestLoop`) whose selector knows when every task is blocked: it is
  asked to wait (a non-zero timeout) only when no callback is ready, and then, if no file is
  ready either, it wakes the tasks in :meth:`Driver.wait_all_tasks_blocked` -- the same rule as
  trio's. With ``autojump=True`` its clock jumps to the next timer whenever all tasks are
  blocked, so backoffs and slow transports run in virtual time, as on trio's autojump clock.
  No test sleeps on the wall clock.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import selectors
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import trio
import trio.testing

import agent_meta as am
from agent_meta.testing import PipeRecorder
from agent_meta.testing._runtime import Event, new_event

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

T = TypeVar("T")
Owner: TypeAlias = am.MetaOwner | am.AsyncioMetaOwner
Output: TypeAlias = "am.Transport | PipeRecorder | BrokenStream | asyncio.StreamWriter"

NAMES = ("trio", "asyncio")


class Tasks(Protocol):
    """A nursery / task group: start tasks; cancel the ones started here."""

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None: ...

    def cancel(self) -> None: ...


class VirtualTime:
    """What the ``virtual_time`` fixture gives: the test's runtime clock jumps ahead whenever
    every task is blocked (trio's autojump clock, or the asyncio test loop's)."""


class BrokenStream:
    """A stream whose reader is gone: the driver's stream transport fails on it."""

    def __init__(self, stream: object) -> None:
        self.stream = stream


class Driver(abc.ABC):
    """What a test needs from a runtime, and the owner of that runtime."""

    name: str
    would_block: type[Exception]
    """What ``*_nowait`` calls raise when they would wait."""

    def __init__(self) -> None:
        self.cleanups: list[Callable[[], Awaitable[None]]] = []
        """Closed, last first, when the test body returns (under the same runtime)."""

    def __repr__(self) -> str:
        return self.name

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, autojump: bool = False) -> T:
        """Run ``fn(*args)``, then the cleanups, on a fresh event loop of this runtime."""

        async def main() -> T:
            try:
                return await fn(*args)
            finally:
                while self.cleanups:
                    await self.cleanups.pop()()

        return self._run(main, autojump)

    @abc.abstractmethod
    def _run(self, main: Callable[[], Awaitable[T]], autojump: bool) -> T: ...

    @abc.abstractmethod
    def open_owner(
        self,
        out: Output,
        options: am.OwnerOptions | None = None,
        *,
        store: am.LifetimeStore | None = None,
    ) -> AbstractAsyncContextManager[Owner]:
        """The driver's ``open_owner`` over ``out`` (a transport, or a pipe's write end)."""

    @abc.abstractmethod
    async def wait_all_tasks_blocked(self) -> None:
        """Return once every other task is blocked."""

    @abc.abstractmethod
    def task_group(self) -> AbstractAsyncContextManager[Tasks]: ...

    @abc.abstractmethod
    def fail_after(self, seconds: float) -> AbstractAsyncContextManager[None]: ...

    @abc.abstractmethod
    async def sleep(self, seconds: float) -> None: ...

    @abc.abstractmethod
    async def checkpoint(self) -> None:
        """Yield once to the scheduler (``trio.lowlevel.checkpoint``, ``asyncio.sleep(0)``)."""

    @abc.abstractmethod
    async def sleep_forever(self) -> None: ...

    @abc.abstractmethod
    async def broken_stream(self) -> BrokenStream:
        """A stream whose reader has gone away (closed after the test)."""

    def sequencer(self) -> Sequencer:
        return Sequencer()


# -- trio ------------------------------------------------------------------------------------


class _Nursery:
    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        self._nursery.start_soon(fn, *args)

    def cancel(self) -> None:
        self._nursery.cancel_scope.cancel()


class TrioDriver(Driver):
    name = "trio"
    would_block = trio.WouldBlock

    def _run(self, main: Callable[[], Awaitable[T]], autojump: bool) -> T:
        clock = trio.testing.MockClock(autojump_threshold=0) if autojump else None
        return trio.run(main, clock=clock)

    def open_owner(
        self,
        out: Output,
        options: am.OwnerOptions | None = None,
        *,
        store: am.LifetimeStore | None = None,
    ) -> AbstractAsyncContextManager[Owner]:
        target: Any = out
        if isinstance(out, PipeRecorder | BrokenStream):
            target = out.stream
        return am.open_owner(target, options, store=store)

    async def wait_all_tasks_blocked(self) -> None:
        await trio.testing.wait_all_tasks_blocked()

    @contextlib.asynccontextmanager
    async def task_group(self) -> AsyncIterator[Tasks]:
        async with trio.open_nursery() as nursery:
            yield _Nursery(nursery)

    @contextlib.asynccontextmanager
    async def fail_after(self, seconds: float) -> AsyncIterator[None]:
        with trio.fail_after(seconds):
            yield

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def checkpoint(self) -> None:
        await trio.lowlevel.checkpoint()

    async def sleep_forever(self) -> None:
        await trio.sleep_forever()

    async def broken_stream(self) -> BrokenStream:
        send, receive = trio.testing.memory_stream_one_way_pair()
        await receive.aclose()
        self.cleanups.append(send.aclose)
        return BrokenStream(send)


# -- asyncio ---------------------------------------------------------------------------------


class _Selector(selectors.BaseSelector):
    """The default selector, plus "every task is blocked" detection and virtual time."""

    def __init__(self, loop: _TestLoop) -> None:
        self._inner = selectors.DefaultSelector()
        self._loop = loop
        self.idle_waiters: list[asyncio.Future[None]] = []

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return self._inner.select(0)  # callbacks are ready: tasks are running
        ready = self._inner.select(0)
        if ready:
            return ready
        if self.idle_waiters:  # every task is blocked
            waiters, self.idle_waiters = self.idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            return []
        if self._loop.autojump and timeout is not None:
            self._loop.offset += timeout  # jump to the next timer
            return []
        return self._inner.select(timeout)


class _TestLoop(asyncio.SelectorEventLoop):
    """An asyncio loop for tests: see the module docstring."""

    def __init__(self, autojump: bool) -> None:
        self.autojump = autojump
        self.offset = 0.0
        self.idle_selector = _Selector(self)
        super().__init__(self.idle_selector)

    def time(self) -> float:
        return super().time() + self.offset


class _TaskGroup:
    def __init__(self, group: asyncio.TaskGroup) -> None:
        self._group = group
        self._tasks: list[asyncio.Task[object]] = []

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        async def call() -> object:
            return await fn(*args)

        self._tasks.append(self._group.create_task(call()))

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()


class AsyncioDriver(Driver):
    name = "asyncio"
    would_block = asyncio.QueueFull

    def _run(self, main: Callable[[], Awaitable[T]], autojump: bool) -> T:
        async def wrapped() -> T:
            return await main()

        with asyncio.Runner(loop_factory=lambda: _TestLoop(autojump)) as runner:
            return runner.run(wrapped())

    def open_owner(
        self,
        out: Output,
        options: am.OwnerOptions | None = None,
        *,
        store: am.LifetimeStore | None = None,
    ) -> AbstractAsyncContextManager[Owner]:
        return self.open_asyncio_owner(out, options, store=store)

    @contextlib.asynccontextmanager
    async def open_asyncio_owner(
        self,
        out: Output,
        options: am.OwnerOptions | None = None,
        *,
        store: am.LifetimeStore | None = None,
    ) -> AsyncIterator[am.AsyncioMetaOwner]:
        """:meth:`open_owner`, typed as the asyncio owner."""
        target: Any = out
        if isinstance(out, PipeRecorder):
            target = await out.asyncio_writer()
        elif isinstance(out, BrokenStream):
            target = out.stream
        async with am.open_asyncio_owner(target, options, store=store) as owner:
            yield owner

    async def wait_all_tasks_blocked(self) -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, _TestLoop), "run the test with driver.run"
        waiter = loop.create_future()
        loop.idle_selector.idle_waiters.append(waiter)
        await waiter

    @contextlib.asynccontextmanager
    async def task_group(self) -> AsyncIterator[Tasks]:
        async with asyncio.TaskGroup() as group:
            yield _TaskGroup(group)

    @contextlib.asynccontextmanager
    async def fail_after(self, seconds: float) -> AsyncIterator[None]:
        async with asyncio.timeout(seconds):
            yield

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def checkpoint(self) -> None:
        await asyncio.sleep(0)

    async def sleep_forever(self) -> None:
        await asyncio.get_running_loop().create_future()

    async def broken_stream(self) -> BrokenStream:
        read_fd, write_fd = os.pipe()
        os.close(read_fd)
        writer = await asyncio_pipe_writer(write_fd)

        async def close() -> None:
            if not writer.transport.is_closing():
                writer.transport.abort()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

        self.cleanups.append(close)
        return BrokenStream(writer)


async def asyncio_pipe_writer(fd: int) -> asyncio.StreamWriter:
    """An ``asyncio.StreamWriter`` that owns (and closes) the pipe write end ``fd``."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(fd, "wb", buffering=0),
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


# -- shared ----------------------------------------------------------------------------------


class Sequencer:
    """``trio.testing.Sequencer`` for either runtime: ``async with seq(i)`` blocks until every
    block numbered below ``i`` has finished."""

    def __init__(self) -> None:
        self._done = -1
        self._waiting: dict[int, Event] = {}

    @contextlib.asynccontextmanager
    async def __call__(self, position: int) -> AsyncIterator[None]:
        if self._done < position - 1:
            event = self._waiting.setdefault(position, new_event())
            await event.wait()
        try:
            yield
        finally:
            self._done = position
            following = self._waiting.pop(position + 1, None)
            if following is not None:
                following.set()


def get(name: str) -> Driver:
    """A fresh driver (each test gets its own cleanups)."""
    return TrioDriver() if name == "trio" else AsyncioDriver()
