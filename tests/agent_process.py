"""The reference agent as a child process, driven over its real pipes (a helper for the tests
that start it: no tests here).

:class:`AgentProcess` writes raw NDJSON lines to the agent's stdin and parses every line of its
stdout, in order; :func:`spawn` starts ``python -m agent_meta agent`` with given arguments.
:data:`PAD` makes "the client is not reading" deterministic: writing it returns only once the
agent has read everything sent before, while nothing is read from its stdout.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

Message = dict[str, Any]

REPOSITORY = Path(__file__).resolve().parent.parent
BOUND = 120.0
"""Seconds a whole test may take; a hung agent fails the test instead of hanging the suite."""

PAD = (b" " * 65535 + b"\n") * 32
"""Blank lines the agent skips; writing them proves it has read every line sent before."""

PAD_BOUND = 30.0
"""Seconds the agent may take to read :data:`PAD`; it reads its input whatever its output
does (each request runs in its own task, so a stuck prompt never blocks session/cancel)."""


def request(request_id: int | str | None, method: str, params: Any = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def prompt_params(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


class AgentProcess:
    """The reference agent in a child process: raw lines in, every output line kept."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.lines: list[bytes] = []
        """Every line the agent wrote, in order (without the newline)."""
        self.messages: list[Message] = []
        """``lines``, parsed."""
        self._buffer = b""
        self._ids = itertools.count(1)
        self._eof = False
        # Where each response arrived in messages, by (type of id, id): read as they come, so
        # that waiting for one answer after 20,000 chunks is not 20,000 scans of the list.
        self._responses: dict[tuple[type, int | str | None], int] = {}

    def next_id(self) -> int:
        return next(self._ids)

    async def send(self, *messages: Message | bytes) -> None:
        """Write these messages (or raw lines) to the agent's stdin in one write."""
        data = b"".join(
            m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n" for m in messages
        )
        await self.stdin.send_all(data)

    async def pad(self) -> None:
        """Return once the agent has read every line sent so far (see :data:`PAD`)."""
        try:
            with trio.fail_after(PAD_BOUND):
                await self.stdin.send_all(PAD)
        except trio.TooSlowError:
            raise AssertionError(
                "the agent stopped reading its input while its output was blocked: a client "
                "cannot then send session/cancel (or anything else) to a stuck prompt"
            ) from None

    async def receive(self) -> Message | None:
        """The next line the agent writes, parsed; ``None`` at the end of its output."""
        while b"\n" not in self._buffer:
            if self._eof:
                return None
            chunk = await self.stdout.receive_some(1 << 16)
            if not chunk:
                self._eof = True
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: Message = json.loads(line)
        self.lines.append(line)
        self.messages.append(message)
        if "method" not in message and "id" in message:
            answered = message["id"]
            self._responses.setdefault((type(answered), answered), len(self.messages) - 1)
        return message

    def response_index(self, request_id: int | str | None) -> int | None:
        """The position in :attr:`messages` of the response to ``request_id``, if received."""
        return self._responses.get((type(request_id), request_id))

    async def response(self, request_id: int | str | None) -> Message:
        """The response to ``request_id``, reading on until it arrives."""
        while (index := self.response_index(request_id)) is None:
            message = await self.receive()
            assert message is not None, f"the agent's output ended before response {request_id}"
        return self.messages[index]

    async def call(self, method: str, params: Any = None) -> Message:
        request_id = self.next_id()
        await self.send(request(request_id, method, params))
        return await self.response(request_id)

    async def initialize(self, version: int) -> None:
        answer = await self.call(
            "initialize", {"protocolVersion": version, "clientCapabilities": {}}
        )
        assert answer["result"]["protocolVersion"] == version

    async def new_session(self, cwd: str = "/tmp") -> str:
        answer = await self.call("session/new", {"cwd": cwd})
        session_id = answer["result"]["sessionId"]
        assert isinstance(session_id, str)
        return session_id

    async def prompt(self, session_id: str, text: str) -> Message:
        return await self.call("session/prompt", prompt_params(session_id, text))

    def replies(self, session_id: str, since: int) -> list[str]:
        """The agent message chunks of ``session_id`` received from position ``since`` on."""
        texts = []
        for message in self.messages[since:]:
            params: Any = message.get("params")
            if message.get("method") != "session/update" or params["sessionId"] != session_id:
                continue
            update = params["update"]
            if update["sessionUpdate"] == "agent_message_chunk":
                texts.append(update["content"]["text"])
        return texts

    async def read_to_end(self) -> bytes:
        """Read every line the agent still writes; return what follows the last newline (a
        partial line: empty unless the agent stopped in the middle of a frame)."""
        while await self.receive() is not None:
            pass
        return self._buffer

    async def finish(self) -> int:
        """Close stdin (end of input), read everything the agent still writes, and wait."""
        await self.stdin.aclose()
        partial = await self.read_to_end()
        assert not partial, f"the agent's output ends inside a line: {partial[:200]!r}"
        return await self.process.wait()


@asynccontextmanager
async def running(
    argv: Sequence[str],
    *,
    stderr: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[AgentProcess]:
    """``argv`` with its stdin and stdout as pipes (and stderr too, unless ``stderr`` is false:
    then the test's), bounded by :data:`BOUND`; killed if still running at the end. It runs in
    ``cwd``, by default the repository's root (where ``python -m tests.X`` finds its module)."""
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr else None,
        cwd=REPOSITORY if cwd is None else cwd,
        env=env,
    )
    try:
        with trio.fail_after(BOUND):
            yield AgentProcess(process)
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()


async def stderr_of(agent: AgentProcess) -> str:
    """All of the process's stderr (a pipe: :func:`running`), until it closes."""
    stream = agent.process.stderr
    assert stream is not None
    chunks = []
    while chunk := await stream.receive_some(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


@asynccontextmanager
async def spawn(*args: str, stderr: bool = False) -> AsyncIterator[AgentProcess]:
    """The reference agent with these arguments; killed if still running at the end. With
    ``stderr``, its stderr is a pipe (``process.stderr``) rather than the test's."""
    async with running(
        [sys.executable, "-m", "agent_meta", "agent", *args], stderr=stderr
    ) as agent:
        yield agent
