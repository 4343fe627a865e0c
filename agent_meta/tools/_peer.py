"""A minimal ACP client end over an agent subprocess's stdio, for ``agent-meta check``.

Every line either way goes through a :class:`~agent_meta.tools._watch.Watcher` in the order it
was written or read, exactly as the proxy would see it, so the checker and the proxy judge the
same frames by the same rules. Requests wait for their response within a bound; the agent's
own requests get a refusal (a cancelled permission, ``-32601`` for the rest) so that an agent
that asks never hangs the scenario.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._agent_command import exit_status
from ..sansio._lines import LineSplitter
from ._findings import WATCHED_LINE_BYTES, Frame, take_lines
from ._watch import Watcher

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from ._findings import Meta

__all__ = ["AgentExitedError", "AgentPeer", "NoAnswerError", "Reply"]

_METHOD_NOT_FOUND = -32601


class AgentExitedError(Exception):
    """The agent ended its output (exited) while a request was waiting for its response."""


class NoAnswerError(Exception):
    """The agent did not answer a request in time."""


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """A response, and what the client held for each session the moment it arrived."""

    message: dict[str, Any]
    frame: Frame
    meta: dict[str, Meta]
    meta_as_v2: dict[str, Meta]

    @property
    def ok(self) -> bool:
        return "result" in self.message

    @property
    def result(self) -> Any:
        return self.message.get("result")

    def error_text(self) -> str:
        error = self.message.get("error")
        if isinstance(error, dict):
            return f"error {error.get('code')}: {error.get('message')}"
        return f"error {error!r}"


@dataclasses.dataclass(slots=True)
class _Waiter:
    capture: bool
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    reply: Reply | None = None


class AgentPeer:
    """The client end of one connection: send requests, watch every frame, answer the agent."""

    def __init__(self, process: trio.Process, answer_within: float) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.watcher = Watcher()
        self.frames: list[Frame] = []
        """Every frame of the connection, both ways, in order (``frames[i].seq == i + 1``)."""
        self.returncode: int | None = None
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._answer_within = answer_within
        self._ids = 0
        self._waiters: dict[int, _Waiter] = {}
        self._write_lock = trio.Lock()
        self._ended = trio.Event()
        self._arrived = trio.Event()  # set, and replaced, whenever a frame arrives
        self._last_arrival = trio.current_time()  # when the agent's last frame arrived
        self._started = time.monotonic()

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls, command: Sequence[str], *, answer_within: float
    ) -> AsyncIterator[AgentPeer]:
        """Start ``command`` with piped stdin/stdout (its stderr is ours) and read its output.

        On exit, the agent's stdin is closed and its output read to the end (so frames it sends
        late are still watched), waiting at most ``answer_within``; then it is killed.
        """
        process = await trio.lowlevel.open_process(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        peer = cls(process, answer_within)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer._read)
                try:
                    yield peer
                finally:
                    with trio.CancelScope(shield=True):
                        await peer._finish()
                    nursery.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()

    async def request(self, method: str, params: dict[str, Any], *, capture: bool = False) -> Reply:
        """Send a request and wait for its response.

        With ``capture``, the reply also holds what the client held for every session when the
        response was read, before any later frame. Raises :class:`NoAnswerError` after
        ``answer_within`` seconds and :class:`AgentExitedError` when the agent's output ends first.
        """
        self._ids += 1
        request_id = self._ids
        waiter = self._waiters[request_id] = _Waiter(capture)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self._write(message)
            with trio.move_on_after(self._answer_within):
                await waiter.done.wait()
        finally:
            self._waiters.pop(request_id, None)
        if waiter.reply is not None:
            return waiter.reply
        if self._ended.is_set():
            raise AgentExitedError(f"the agent's output ended before it answered {method}")
        raise NoAnswerError(f"the agent did not answer {method} within {self._answer_within:g} s")

    async def wait_for_frame(self, after: int, match: Callable[[Frame], bool]) -> Frame | None:
        """The first frame numbered above ``after`` that ``match`` accepts, waiting at most
        ``answer_within``; ``None`` if none came by then or the agent's output ended."""
        checked = after
        with trio.move_on_after(self._answer_within):
            while True:
                for frame in self.frames[checked:]:
                    if match(frame):
                        return frame
                checked = len(self.frames)
                if self._ended.is_set():
                    return None
                await self._arrived.wait()
        return None

    async def wait_for_turn_end(self, after: int, session: str) -> Frame | None:
        """The ``state_update`` with state ``idle`` that ends a v2 turn of ``session``, the
        first after frame ``after`` (a prompt's early answer), as :meth:`wait_for_frame` finds
        it. ACP v2 answers a prompt once its message is stored, before the turn's lines run."""
        return await self.wait_for_frame(after, lambda frame: _ends_turn(frame, session))

    async def wait_quiet(self, period: float, within: float) -> bool:
        """Wait until no frame has come from the agent for ``period`` seconds, at most
        ``within`` seconds in all. Return whether it fell quiet (or its output ended), so that
        what it publishes late, after an answer, has arrived."""
        with trio.move_on_after(within):
            while not self._ended.is_set():
                arrived = self._arrived
                with trio.move_on_at(self._last_arrival + period) as window:
                    await arrived.wait()
                if window.cancelled_caught:
                    return True
            return True
        return False

    def _arrival(self) -> None:
        self._last_arrival = trio.current_time()
        self._arrived.set()
        self._arrived = trio.Event()

    async def _write(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            self.frames.append(self.watcher.observe("client", line[:-1], self._now()))
            # If the agent is gone, the waiting request ends with AgentExitedError.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stdin.send_all(line)

    def _now(self) -> float:
        return time.monotonic() - self._started

    async def _read(self) -> None:
        splitter = LineSplitter(max_line_bytes=WATCHED_LINE_BYTES)
        try:
            while True:
                try:
                    chunk = await self._stdout.receive_some(1 << 16)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not chunk:
                    break
                splitter.feed(chunk)
                for line in take_lines(splitter)[0]:
                    await self._take(self.watcher.observe("agent", line, self._now()))
            splitter.feed(b"")
            for rest in take_lines(splitter)[0]:  # an unterminated last line
                self.frames.append(self.watcher.observe("agent", rest, self._now(), last=True))
        finally:
            self._ended.set()
            self._arrival()
            for waiter in self._waiters.values():
                waiter.done.set()

    async def _take(self, frame: Frame) -> None:
        self.frames.append(frame)
        self._arrival()
        message = frame.message
        if message is None:
            return
        if "method" in message:
            if "id" in message:
                await self._answer(message)
            return
        request_id = message.get("id")
        waiter = self._waiters.get(request_id) if type(request_id) is int else None
        if waiter is None or waiter.reply is not None:
            return
        meta: dict[str, Meta] = {}
        as_v2: dict[str, Meta] = {}
        if waiter.capture:
            for session in self.watcher.session_ids:
                meta[session] = self.watcher.meta(session)
                as_v2[session] = self.watcher.meta_as_v2(session)
        waiter.reply = Reply(message, frame, meta, as_v2)
        waiter.done.set()

    async def _answer(self, message: dict[str, Any]) -> None:
        """Refuse what the agent asks: a check has no user and no files to offer."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if message["method"] == "session/request_permission":
            reply["result"] = {"outcome": {"outcome": "cancelled"}}
        else:
            reply["error"] = {
                "code": _METHOD_NOT_FOUND,
                "message": f"agent-meta check does not offer {message['method']}",
            }
        await self._write(reply)

    async def _finish(self) -> None:
        """End of input, then the agent's output to its end and its exit (bounded; see spawn)."""
        with trio.move_on_after(self._answer_within):
            async with self._write_lock:
                await self._stdin.aclose()
            await self._ended.wait()
            self.returncode = exit_status(await self._process.wait())


def _ends_turn(frame: Frame, session: str) -> bool:
    """Whether ``frame`` is ``session``'s ``state_update`` reporting ``idle``."""
    params = frame.message.get("params") if frame.message is not None else None
    update = params.get("update") if isinstance(params, dict) else None
    return (
        frame.session == session
        and isinstance(update, dict)
        and update.get("sessionUpdate") == "state_update"
        and update.get("state") == "idle"
    )
