"""Drive the reference agent with real ACP clients and keep an exact, ordered wire record.

The official Python SDK client runs each notification handler as its own asyncio task, so its
handlers can see updates late or out of order. The raw ``observers=`` hook runs synchronously in
the receive loop, before a response resolves its request: that record is the evidence here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
)

from agent_meta.testing import ClientMirror

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence

    from acp.connection import StreamEvent

REPO = Path(__file__).resolve().parent.parent
NODE_DIR = REPO / "integration" / "node"
#: Generous per-run bound: a hung agent fails the test instead of hanging the suite.
RUN_TIMEOUT = 30.0
LINE_LIMIT = 50 * 2**20


RUNTIMES = ("trio", "sdk")
"""The runtimes ``agent-meta agent --runtime`` offers."""
AGENT_RUNTIMES = tuple(
    name
    for name in RUNTIMES
    if name in os.environ.get("AGENT_META_RUNTIMES", "trio,sdk").split(",")
)
"""The runtimes the ``agent_runtime`` fixture runs a test on: each of :data:`RUNTIMES` that
``AGENT_META_RUNTIMES`` (comma-separated; default both) names. ``nox -s sdk_v2`` names only
``sdk``: ``nox -s integration`` has run the trio cases already."""

SDK_V1_ONLY = (
    "the installed official Python SDK has no ACP v2 side (acp.experimental.v2, 1.0 on): "
    "--runtime sdk speaks ACP v1 only"
)
"""Why a v2-only test skips for the ``sdk`` runtime on an SDK release before 1.0."""


def sdk_speaks_v2() -> bool:
    """Whether ``agent-meta agent --runtime sdk`` can speak ACP v2 here (the installed SDK
    has ``acp.experimental.v2``)."""
    try:
        return importlib.util.find_spec("acp.experimental.v2") is not None
    except ModuleNotFoundError:  # no acp.experimental at all
        return False


_runtime = "trio"


@contextmanager
def use_runtime(runtime: str) -> Iterator[None]:
    """Make :func:`agent_command` run the agent on ``runtime`` inside the block."""
    global _runtime  # one test at a time: the fixture sets it and restores it
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}")
    previous, _runtime = _runtime, runtime
    try:
        yield
    finally:
        _runtime = previous


def agent_command(
    *extra: str, runtime: str | None = None, launcher: Sequence[str] = ("-m", "agent_meta")
) -> list[str]:
    """The reference agent as a real subprocess, run by this interpreter, on ``runtime``
    (default: the one the ``agent_runtime`` fixture chose; trio outside it). ``launcher`` is
    what runs ``agent-meta`` (a test's own, such as
    :func:`tests.support.crash_after_persist.crashing_command`)."""
    chosen = _runtime if runtime is None else runtime
    flags = [] if chosen == "trio" else ["--runtime", chosen]  # trio: the default, unflagged
    return [sys.executable, *launcher, "agent", *flags, *extra]


def agent_env() -> dict[str, str]:
    """What the agent child needs: ``spawn_agent_process`` passes only a trimmed environment."""
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One JSON-RPC message as the client saw it go by."""

    incoming: bool
    message: dict[str, Any]


class Transcript:
    """Every message of one connection, in the exact order the client's receive loop saw it.

    Incoming messages are also folded, as they arrive, by a :class:`ClientMirror` with the
    client's protocol rules.
    """

    def __init__(self, protocol_version: int = 1) -> None:
        self.events: list[Event] = []
        self.mirror = ClientMirror(protocol_version=protocol_version)
        self._waiters: list[tuple[Callable[[], bool], asyncio.Event]] = []

    def observe(self, event: StreamEvent) -> None:
        """The SDK's raw ``observers=`` hook: synchronous, so the order is the wire order."""
        incoming = event.direction.value == "incoming"
        self.events.append(Event(incoming, event.message))
        if incoming:
            self.mirror.feed(event.message)
        for condition, ready in self._waiters:
            if condition():
                ready.set()

    async def until(self, condition: Callable[[], bool], within: float = 10.0) -> None:
        """Wait until what was received makes ``condition`` true (checked at each message)."""
        if condition():
            return
        ready = asyncio.Event()
        self._waiters.append((condition, ready))
        try:
            await asyncio.wait_for(ready.wait(), within)
        finally:
            self._waiters.remove((condition, ready))

    def mark(self) -> int:
        return len(self.events)

    def incoming(self, since: int = 0) -> list[dict[str, Any]]:
        return [e.message for e in self.events[since:] if e.incoming]

    def between(self, start: int, end: int) -> list[dict[str, Any]]:
        """Incoming messages among the events from mark ``start`` to mark ``end``."""
        return [e.message for e in self.events[start:end] if e.incoming]

    def response_position(self, method: str, since: int = 0) -> int:
        """Position, among ``incoming(since)``, of the response to the first ``method`` request."""
        request_ids = [
            e.message["id"]
            for e in self.events[since:]
            if not e.incoming and e.message.get("method") == method and "id" in e.message
        ]
        if not request_ids:
            raise AssertionError(f"no {method} request after position {since}")
        for position, message in enumerate(self.incoming(since)):
            if "method" not in message and message.get("id") == request_ids[0]:
                return position
        raise AssertionError(f"no response to {method} (id {request_ids[0]}) was received")


def session_updates(messages: Iterable[dict[str, Any]], kind: str | None = None) -> list[Any]:
    """The ``update`` objects of the ``session/update`` notifications, optionally of one kind."""
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update"
        and (kind is None or m["params"]["update"].get("sessionUpdate") == kind)
    ]


def info_updates(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return session_updates(messages, "session_info_update")


class QuietClient:
    """A duck-typed ``acp.Client``: the transcript is the record, so handlers do nothing.

    A ``session/request_permission`` (the reference agent's ``/ask``) is answered with
    ``answer``, an option id (``None``: the client refuses with an error). ``asked`` keeps
    what each request held, as the SDK parsed it.
    """

    def __init__(self, answer: str | None = None) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.asked.append({"sessionId": session_id, "title": tool_call.title, "options": options})
        if self.answer is None:
            raise NotImplementedError("this client answers no permission request")
        outcome = AllowedOutcome(outcome="selected", option_id=self.answer)
        return RequestPermissionResponse(outcome=outcome)


@asynccontextmanager
async def python_client(
    *agent_args: str, transcript: Transcript | None = None, client: QuietClient | None = None
) -> AsyncIterator[tuple[Any, Transcript]]:
    """Spawn the reference agent under the official Python SDK client and initialize (v1)."""
    record = transcript if transcript is not None else Transcript()
    command = agent_command(*agent_args)
    async with (
        acp.spawn_agent_process(
            cast("acp.Client", client or QuietClient()),  # duck-typed, as the SDK allows
            command[0],
            *command[1:],
            env=agent_env(),
            cwd=str(REPO),
            observers=[record.observe],
            transport_kwargs={"stderr": None, "limit": LINE_LIMIT},
        ) as (conn, _process)
    ):
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="agent-meta-integration", version="0"),
        )
        yield conn, record


def text(value: str) -> list[Any]:
    return [acp.text_block(value)]


def run_async(main: Any) -> Any:
    """Run an asyncio coroutine from a plain sync test, with a bound so nothing hangs."""

    async def bounded() -> Any:
        return await asyncio.wait_for(main, RUN_TIMEOUT)

    return asyncio.run(bounded())


# --- Node clients -----------------------------------------------------------------------------


def node_ready() -> str | None:
    """Why the Node clients cannot run here, or None when they can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        return "integration/node/node_modules is missing: run `npm ci` in integration/node"
    return None


@dataclasses.dataclass
class NodeRun:
    """The lines printed by ``ts_client.mjs``, parsed."""

    lines: list[dict[str, Any]]
    stderr: str

    def received(self) -> list[dict[str, Any]]:
        return [line["message"] for line in self.lines if line["type"] == "recv"]

    def step_received(self, index: int) -> list[dict[str, Any]]:
        """The raw messages received between step ``index`` being sent and its response marker."""
        start = next(
            i
            for i, line in enumerate(self.lines)
            if line["type"] == "step" and line["index"] == index
        )
        end = next(
            i
            for i, line in enumerate(self.lines)
            if line["type"] == "response" and line["index"] == index
        )
        return [line["message"] for line in self.lines[start:end] if line["type"] == "recv"]

    def handled_updates(self) -> list[dict[str, Any]]:
        """``session/update`` params as the SDK's own handler got them (parsed, validated)."""
        return [line["params"] for line in self.lines if line["type"] == "update"]


def run_node_client(
    scenario: str,
    *,
    agent: Sequence[str] | None = None,
    steps: Any = None,
    protocol_version: int = 2,
    env: Mapping[str, str] | None = None,
) -> NodeRun:
    """Run ``ts_client.mjs`` (the official TypeScript SDK, ACP v2 or v1) against an agent
    command; ``env`` is the environment the client and the agent start with (default: this
    process's), plus what the agent needs (:func:`agent_env`)."""
    env = dict(os.environ if env is None else env)
    env.update(agent_env())
    env["AGENT_META_AGENT"] = json.dumps(list(agent or agent_command()))
    env["AGENT_META_CWD"] = str(REPO)
    env["AGENT_META_ACP"] = str(protocol_version)
    argv = ["node", str(NODE_DIR / "ts_client.mjs"), scenario]
    if steps is not None:
        argv.append(json.dumps(steps))
    done = subprocess.run(
        argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines or lines[-1]["type"] != "done":
        raise AssertionError(
            f"ts_client.mjs {scenario} failed (exit {done.returncode})\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return NodeRun(lines, done.stderr)
