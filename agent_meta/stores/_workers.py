"""Worker threads for the stores, under trio or asyncio: whichever the store was opened on.

A store's blocking driver (stdlib ``sqlite3``, psycopg's sync driver) runs in worker threads:
``trio.to_thread.run_sync`` under trio, ``asyncio.to_thread`` under asyncio (told apart with
``sniffio``). A worker thread cannot be stopped, so a cancelled call still waits for its thread
before it lets the cancellation through (``trio.to_thread``'s default, done by hand for
asyncio): a store never finds its connection in use by a call that was given up on.

trio is not imported here: it is taken from ``sys.modules`` wherever it runs, so that a store
opened under asyncio (the official-SDK adapter's runtime) loads no trio.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import TYPE_CHECKING, TypeVar, final

import sniffio  # a dependency of trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import ModuleType

__all__ = ["WorkerThreads", "trio_module", "uncancellable"]

T = TypeVar("T")


@final
class WorkerThreads:
    """Runs blocking calls of one store in worker threads of the runtime it was opened on."""

    def __init__(self, owner: str) -> None:
        self.library = sniffio.current_async_library()
        """``"trio"`` or ``"asyncio"``: the runtime the store was opened on."""
        self._owner = owner

    def runtime(self) -> str:
        """The current runtime, which must be the store's."""
        library = sniffio.current_async_library()
        if library != self.library:
            raise RuntimeError(
                f"this {self._owner} was opened under {self.library}; use it there, not under "
                f"{library}"
            )
        return library

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` in a worker thread; a cancellation waits for the thread."""
        if self.runtime() == "trio":
            result: T = await trio_module().to_thread.run_sync(functools.partial(function, *args))
            return result
        return await uncancellable(asyncio.to_thread(function, *args))

    async def shielded(self, work: Callable[[], Awaitable[T]]) -> T:
        """``await work()`` shielded from cancellation (the store's close: nothing may be left
        half done)."""
        if self.runtime() != "trio":
            return await uncancellable(work())
        with trio_module().CancelScope(shield=True):
            return await work()


async def uncancellable(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the calling asyncio task is cancelled meanwhile, then
    let the (first) cancellation through: a worker thread cannot be stopped, and the store must
    not start its next call while the last one still runs (trio's ``to_thread`` does the same)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        raise cancelled
    return task.result()


def trio_module() -> ModuleType:
    """trio, which is imported wherever it runs: the stores do not import it themselves, so
    that they load no trio under asyncio (the official-SDK adapter's runtime)."""
    return sys.modules["trio"]
