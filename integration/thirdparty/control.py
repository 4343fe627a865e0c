"""A control channel into a running agent: how a test makes an extension publish, and waits.

The agent runs unchanged as a subprocess; an extension loaded into its process
(:mod:`integration.thirdparty.meta_control` under ``agent-meta run --import``, or
:mod:`integration.thirdparty.plain_control` for the baseline without agent_meta) listens on the
UNIX socket named by ``AGENT_META_CONTROL``, on the agent's own event loop. The test sends one
JSON object per line, ``{"id": N, "op": NAME, ...arguments}``; the agent answers
``{"id": N, "value": ...}`` once the operation has taken effect (a publication is part of the
known state and queued), or ``{"id": N, "error": "..."}``. Long operations may send
``{"id": N, "event": ...}`` lines before their answer. So a test waits on an answer, then on
the frame the answer promises, never on time.

Operations (each backend implements what it can; see the two modules):

- ``publish`` ``session`` [``meta``] [``title``]: a ``session_info_update`` (a present key is
  sent, ``null`` included);
- ``domain_set`` / ``domain_remove`` ``session`` ``key`` ``path`` [``value``]: an edit inside one
  top-level key;
- ``report_failure`` / ``resolve_failure`` ``session`` ``incident`` ``revision`` [``record``];
- ``burst`` ``session`` ``count`` ``pad``: a worker thread publishes the ``_meta`` patches of
  :func:`burst_updates`, in order, and the answer comes when every one has been accepted;
- ``tick_until_fenced`` ``session``: a worker thread publishes ``{"tick": n}`` for n = 1, 2 ...
  until a publication is refused because the lifetime ended, or one more after
  ``stop_ticking``; the event ``"started"`` follows the first accepted one; the answer is
  ``{"accepted": N, "fenced": true|false}``;
- ``snapshot`` ``session`` and ``statistics``: what the owner knows and counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

CONTROL_ENV: Final = "AGENT_META_CONTROL"
"""The environment variable holding the control socket's path (set by the test)."""


class Backend(Protocol):
    """What an extension does for each operation."""

    async def run(
        self, op: str, args: dict[str, Any], emit: Callable[[Any], Awaitable[None]]
    ) -> Any:
        """Carry out ``op``; return its answer (JSON), or raise to answer an error."""
        ...


def burst_updates(count: int, pad: int) -> list[dict[str, Any]]:
    """The ``burst`` operation's patches: ``burst.n`` counts up; odd updates set ``burst.odd``
    and a ``pad``-byte ``burst.pad``, even ones remove ``burst.pad``."""
    updates: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        if n % 2:
            updates.append({"burst.n": n, "burst.odd": n, "burst.pad": "x" * pad})
        else:
            updates.append({"burst.n": n, "burst.pad": None})
    return updates


_running: set[asyncio.Task[None]] = set()


def _keep(task: asyncio.Task[None]) -> None:
    _running.add(task)
    task.add_done_callback(_running.discard)


def start(backend: Backend) -> bool:
    """Serve the control socket for ``backend`` on the running loop, if the test asked for
    one (``AGENT_META_CONTROL``); whether it did."""
    path = os.environ.get(CONTROL_ENV)
    if not path:
        return False
    _keep(asyncio.get_running_loop().create_task(_serve(backend, path)))
    return True


async def _serve(backend: Backend, path: str) -> None:
    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()

        async def send(message: dict[str, Any]) -> None:
            async with lock:
                writer.write(json.dumps(message).encode() + b"\n")
                await writer.drain()

        try:
            while line := await reader.readline():
                request = json.loads(line)
                _keep(asyncio.get_running_loop().create_task(_answer(backend, request, send)))
        finally:
            writer.close()

    server = await asyncio.start_unix_server(connected, path)
    try:
        await asyncio.get_running_loop().create_future()  # until the agent's loop ends
    finally:
        # Not `async with server`: from Python 3.12 its exit waits for every connection to
        # close, which would hold the agent's shutdown.
        server.close()


async def _answer(
    backend: Backend, request: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[None]]
) -> None:
    number = request.pop("id")
    op = request.pop("op")

    async def emit(event: Any) -> None:
        await send({"id": number, "event": event})

    try:
        value = await backend.run(op, request, emit)
    except Exception as exc:
        await send({"id": number, "error": f"{type(exc).__name__}: {exc}"})
    else:
        await send({"id": number, "value": value})


# --- the test's side -------------------------------------------------------------------------


class ControlError(Exception):
    """The agent answered an operation with an error."""


class Control:
    """The test's end of the control channel (asyncio)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._next = 0
        self._pending: dict[int, asyncio.Queue[dict[str, Any]]] = {}
        self._reading = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, path: str) -> Control:
        reader, writer = await asyncio.open_unix_connection(path)
        return cls(reader, writer)

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def _read(self) -> None:
        while line := await self._reader.readline():
            message = json.loads(line)
            queue = self._pending.get(message["id"])
            if queue is not None:
                queue.put_nowait(message)
        for queue in self._pending.values():
            queue.put_nowait({"error": "the agent closed the control channel"})

    def start(self, op: str, **args: Any) -> Call:
        """Send ``op``; the returned :class:`Call` yields its events and its answer."""
        self._next += 1
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pending[self._next] = queue
        self._writer.write(json.dumps({"id": self._next, "op": op, **args}).encode() + b"\n")
        return Call(op, queue)

    async def __call__(self, op: str, **args: Any) -> Any:
        """Send ``op`` and wait for its answer."""
        return await self.start(op, **args).answer()


class Call:
    """One operation in flight."""

    def __init__(self, op: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self.op = op
        self._queue = queue
        self.events: list[Any] = []

    async def event(self) -> Any:
        """The next event (an error if the answer comes first)."""
        message = await self._queue.get()
        if "event" not in message:
            raise ControlError(f"{self.op}: answered before its event: {message}")
        self.events.append(message["event"])
        return message["event"]

    async def answer(self) -> Any:
        while "event" in (message := await self._queue.get()):
            self.events.append(message["event"])
        if "error" in message:
            raise ControlError(f"{self.op}: {message['error']}")
        return message["value"]
