"""The few runtime primitives the fake transports need, on whichever runtime awaits them.

The transports of :mod:`agent_meta.testing` serve both owners: they are awaited by the trio
driver's writer task or by the asyncio driver's. Each primitive asks ``sniffio`` which library
is running and uses its own: a checkpoint, a sleep, an event.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import sniffio  # a dependency of trio
import trio

__all__ = [
    "Event",
    "Pulse",
    "cancel_shielded_checkpoint",
    "checkpoint",
    "checkpoint_if_cancelled",
    "new_event",
    "sleep",
]


def _on_trio() -> bool:
    return sniffio.current_async_library() == "trio"


class Event(Protocol):
    """What ``trio.Event`` and ``asyncio.Event`` have in common."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> object: ...


def new_event() -> Event:
    """An event of the running library."""
    return trio.Event() if _on_trio() else asyncio.Event()


async def checkpoint() -> None:
    """Yield to the scheduler, letting a pending cancellation through."""
    if _on_trio():
        await trio.lowlevel.checkpoint()
    else:
        await asyncio.sleep(0)


async def checkpoint_if_cancelled() -> None:
    """Raise a cancellation that is already pending; otherwise do not yield (on asyncio: a
    cancellation requested of the task is delivered by one ``sleep(0)``)."""
    if _on_trio():
        await trio.lowlevel.checkpoint_if_cancelled()
        return
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        await asyncio.sleep(0)


async def cancel_shielded_checkpoint() -> None:
    """Yield without letting a cancellation through. asyncio cannot yield that way, so there
    it does not yield at all."""
    if _on_trio():
        await trio.lowlevel.cancel_shielded_checkpoint()


async def sleep(seconds: float) -> None:
    """Sleep in the running library's clock (a virtual one in tests that use one)."""
    if _on_trio():
        await trio.sleep(seconds)
    else:
        await asyncio.sleep(seconds)


class Pulse:
    """Wakes every task waiting now (:meth:`fire`); a later :meth:`wait` waits for the next
    fire. Usable from either runtime, created outside any."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: Event | None = None

    async def wait(self) -> None:
        if self._event is None:
            self._event = new_event()
        await self._event.wait()

    def fire(self) -> None:
        event, self._event = self._event, None
        if event is not None:
            event.set()
