"""One scenario, run against a real agent with the official Python SDK client over a pipe.

The agent is a subprocess; its stdout is read through a :class:`~.pipes.PipeTap` (every raw
line kept, reading can stop), the SDK's synchronous ``observers=`` hook records every message in
wire order (:class:`~integration.harness.Transcript`, which folds them with
:class:`~agent_meta.testing.ClientMirror` as a v1 client would), and the test's control channel
(:mod:`.control`) makes the extension inside the agent publish. Every wait is for a frame or an
answer: an answer from the control channel means the owner has taken the operation; the frame
it promises is then awaited in the transcript; a request's response (``session/list`` is the
barrier) means every frame queued before it has been received (R2).

Steps, each marked in :attr:`Run.marks`:

``new``
    nothing: what the client holds once ``session/new`` is answered, and the owner's state;
``set``
    publish ``{"ext.status": "drafting", "ext.gone": 1}``;
``prompt``
    one prompt, and the agent's own ``session_info_update``\\ s (a late generated title is
    awaited);
``edits``
    remove a key, clear, set again, domain edits inside ``acme.dev/review``, failure incidents
    (two revisions, a stale report, a late resolution, a resolution, a new incident), then the
    barrier;
``burst``
    the client stops reading while a worker thread publishes :data:`BURST` updates (with
    agent_meta: through ``adapter.threadsafe``), then reads on, then the barrier;
``load`` / ``resume``
    where the agent offers them;
``close``
    where the agent answers it with success, a worker thread publishing until the lifetime is
    fenced (agent_meta only), then one publication after the close response, then the barrier;
    elsewhere the close error and one publication;
``end``
    end of input; the agent's exit (an SDK 0.6 agent, which waits forever, gets SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import acp
from acp.schema import ClientCapabilities, Implementation

from integration.harness import LINE_LIMIT, Transcript
from integration.thirdparty.control import CONTROL_ENV, Control, ControlError, burst_updates
from integration.thirdparty.pipes import PipeTap, unread_bytes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from integration.thirdparty.agents import Agent

T = TypeVar("T")

BOUND: Final = 30.0
"""The longest any one wait may take: a hang guard, not a timing assumption."""
BURST: Final = 400
"""Updates the worker thread publishes while the client is not reading."""
PAD: Final = 2048
"""Bytes of padding in every other burst update, so that the paused pipe fills."""

DRAFTING: Final = {"ext.status": "drafting", "ext.gone": 1}
FAILURE_1: Final = {"message": "model timed out", "attempt": 1}
FAILURE_2: Final = {"message": "model timed out", "attempt": 2}
FAILURE_3: Final = {"message": "rate limited"}
REVIEW: Final = {"key": "acme.dev/review"}
REFUSED: Final = "refused"
"""An edit the owner refuses (R7): answered ``False``, nothing sent."""

EDITS: Final[list[tuple[str, str, dict[str, Any], Any]]] = [
    # (label, control operation, its arguments, the shallow patch it means, or REFUSED)
    ("remove", "publish", {"meta": {"ext.gone": None}}, {"ext.gone": None}),
    ("clear", "publish", {"meta": None}, None),
    ("reset", "publish", {"meta": {"ext.status": "reviewing"}}, {"ext.status": "reviewing"}),
    (
        "domain_state",
        "domain_set",
        {**REVIEW, "path": ["state"], "value": "open"},
        {"acme.dev/review": {"state": "open"}},
    ),
    (
        "domain_reviewer",
        "domain_set",
        {**REVIEW, "path": ["reviewer"], "value": "bob"},
        {"acme.dev/review": {"state": "open", "reviewer": "bob"}},
    ),
    (
        "domain_remove",
        "domain_remove",
        {**REVIEW, "path": ["reviewer"]},
        {"acme.dev/review": {"state": "open"}},
    ),
    (
        "report_1",
        "report_failure",
        {"incident": "inc-1", "revision": 1, "record": FAILURE_1},
        {"agent-meta": {"failure": FAILURE_1}},
    ),
    (
        "report_2",
        "report_failure",
        {"incident": "inc-1", "revision": 2, "record": FAILURE_2},
        {"agent-meta": {"failure": FAILURE_2}},
    ),
    (
        "stale_report",
        "report_failure",
        {"incident": "inc-1", "revision": 1, "record": FAILURE_1},
        REFUSED,
    ),
    ("late_resolve", "resolve_failure", {"incident": "inc-1", "revision": 1}, REFUSED),
    ("resolve", "resolve_failure", {"incident": "inc-1", "revision": 2}, {"agent-meta": None}),
    (
        "report_3",
        "report_failure",
        {"incident": "inc-2", "revision": 1, "record": FAILURE_3},
        {"agent-meta": {"failure": FAILURE_3}},
    ),
]
"""The ``edits`` step, in order: a removal, a clear, domain edits (R8), failure incidents (R7)."""

AFTER_EDITS: Final = {
    "ext.status": "reviewing",
    "acme.dev/review": {"state": "open"},
    "agent-meta": {"failure": FAILURE_3},
}
"""What the extension's publications leave, folded by the patch rule (the clear removed what
came before, the agent's own ``_meta`` included)."""


async def bounded(awaitable: Awaitable[T]) -> T:
    """Wait at most :data:`BOUND` seconds: a hang fails the step that hung."""
    return await asyncio.wait_for(awaitable, BOUND)


def fold(stored: dict[str, Any] | None, patch: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ACP v2 patch rule, written out here (independent of agent_meta's core)."""
    if patch is None:
        return None
    result = dict(stored or {})
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result or None


def after_burst() -> dict[str, Any]:
    state: dict[str, Any] | None = AFTER_EDITS
    for update in burst_updates(BURST, PAD):
        state = fold(state, update)
    assert state is not None
    return state


class RecordingClient:
    """A duck-typed ``acp.Client``: the transcript is the record; no permission is granted."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenario's prompts need no permission")


@dataclasses.dataclass
class Run:
    """Everything one scenario left behind."""

    agent: str
    mode: str
    session_id: str = ""
    transcript: Transcript = dataclasses.field(default_factory=Transcript, repr=False)
    lines: list[bytes] = dataclasses.field(default_factory=list, repr=False)
    unfinished: bytes = b""
    marks: dict[str, int] = dataclasses.field(default_factory=dict)
    answers: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Control answers (and request errors) by label."""
    statistics: dict[str, Any] | None = None
    """The adapter's counters at the end (agent_meta modes)."""
    snapshots: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The owner's known state at labelled points (agent_meta modes)."""
    paused: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What the paused reader saw: unread bytes, the adapter's counters while paused."""
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    returncode: int | None = None
    stderr: str = dataclasses.field(default="", repr=False)

    @property
    def meta_mode(self) -> bool:
        """agent_meta is under the agent (zero-code or glue)."""
        return self.mode != "baseline"

    def window(self, step: str) -> list[dict[str, Any]]:
        """Incoming messages from the start of ``step`` to the start of the next step."""
        steps = list(self.marks)
        following = steps[steps.index(step) + 1 :]
        end = self.marks[following[0]] if following else len(self.transcript.events)
        return self.transcript.between(self.marks[step], end)

    def ours(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages about this run's session (its notifications, requests)."""
        return [m for m in messages if (m.get("params") or {}).get("sessionId") == self.session_id]

    def info(self, step: str) -> list[dict[str, Any]]:
        """The ``session_info_update`` objects of this session during ``step``, as on the wire."""
        return info_updates(self.ours(self.window(step)))

    def response(self, step: str, method: str) -> tuple[int, dict[str, Any]]:
        """The position, in :meth:`window`, of the response to ``method``, and the response."""
        position = self.transcript.response_position(method, self.marks[step])
        return position, self.window(step)[position]


def info_updates(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "session_info_update"
    ]


@dataclasses.dataclass
class Live:
    """A running agent under the SDK client."""

    run: Run
    conn: Any
    tap: PipeTap
    read_fd: int
    control: Control
    cwd: str

    def mark(self, step: str) -> None:
        self.run.marks[step] = self.run.transcript.mark()

    def count(self) -> int:
        """``session_info_update`` frames of this session received so far."""
        return len(info_updates(self.run.ours(self.run.transcript.incoming())))

    async def until(self, condition: Callable[[], bool]) -> None:
        await self.run.transcript.until(condition, BOUND)

    async def op(self, label: str, op: str, **args: Any) -> Any:
        """A control operation on this session; a ``True`` answer promises one frame, which is
        awaited (it is written before the next operation, so nothing is merged)."""
        before = self.count()
        value = await bounded(self.control(op, session=self.run.session_id, **args))
        self.run.answers[label] = value
        if value is True:
            await self.until(lambda: self.count() > before)
        return value

    async def call(self, op: str, **args: Any) -> Any:
        """A control operation, bounded."""
        return await bounded(self.control(op, **args))

    async def barrier(self) -> None:
        """A ``session/list`` round trip: whatever was queued before it has been received. An
        error answers it as well (R2: the FIFO holds for every response); SDK 0.6 agents
        answer ``-32601``."""
        with contextlib.suppress(acp.RequestError):
            await bounded(self.conn.list_sessions(cwd=self.cwd))

    async def snapshot(self, label: str) -> None:
        if self.run.meta_mode:
            self.run.snapshots[label] = await self.call("snapshot", session=self.run.session_id)


@contextlib.asynccontextmanager
async def launched(
    argv: Sequence[str], env: dict[str, str], cwd: Path, run: Run, *, ends: bool = True
) -> AsyncIterator[tuple[Any, PipeTap, int]]:
    """The agent as a subprocess whose stdout the SDK client reads through a tap. An agent that
    does not end at the end of its input (``ends`` false) is sent SIGTERM after it, as a client
    ends it."""
    read_fd, write_fd = os.pipe()
    with (
        tempfile.TemporaryFile() as stderr,
        os.fdopen(read_fd, "rb", buffering=0) as pipe,
    ):
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_fd,
                stderr=stderr,
                env=env,
                cwd=cwd,
                start_new_session=True,  # its own process group: `agent-meta run` and the agent
            )
        finally:
            os.close(write_fd)
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        tap = PipeTap(reader)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tap, pipe)
        assert process.stdin is not None
        conn = acp.connect_to_agent(
            cast("acp.Client", RecordingClient()),
            process.stdin,
            reader,
            observers=[run.transcript.observe],
        )
        failed = True
        try:
            yield conn, tap, read_fd
            failed = False
        finally:
            await conn.close()
            with contextlib.suppress(OSError, RuntimeError):
                process.stdin.close()
            if not ends and not failed:
                process.send_signal(signal.SIGTERM)  # to agent-meta run, which passes it on
            tap.resume()  # read to the end: the agent writes its last frames and exits
            try:
                if not failed:
                    run.returncode = await asyncio.wait_for(process.wait(), BOUND)
            finally:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    await process.wait()
                transport.close()
                run.lines, run.unfinished = list(tap.lines), tap.unfinished
                stderr.seek(0)
                run.stderr = stderr.read().decode(errors="replace")
                if failed:
                    print(f"--- {run.agent} ({run.mode}) stderr ---\n{run.stderr[-4000:]}")


async def scenario(agent: Agent, mode: str, bin_dir: Path, base_url: str) -> Run:
    """Run the whole scenario once (see the module docstring)."""
    run = Run(agent.name, mode)
    workdir = Path(tempfile.mkdtemp(prefix="amtp-"))  # short: a UNIX socket path is limited
    try:
        state, project = workdir / "state", workdir / "project"
        project.mkdir()
        socket = workdir / "control.sock"
        env = agent.environment(mode, bin_dir, state, base_url) | {CONTROL_ENV: str(socket)}
        argv = agent.argv(mode, bin_dir, state)
        started = time.perf_counter()
        ends = agent.ends_at_end_of_input
        async with launched(argv, env, project, run, ends=ends) as (conn, tap, read_fd):
            await bounded(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name=agent.client_name, version="0"),
                )
            )
            run.seconds["initialize"] = time.perf_counter() - started
            created = await bounded(conn.new_session(cwd=str(project), mcp_servers=[]))
            run.session_id = created.session_id
            control = await bounded(Control.connect(str(socket)))
            live = Live(run, conn, tap, read_fd, control, str(project))
            try:
                await _steps(live, agent)
            finally:
                await control.close()
            live.mark("end")
        run.seconds["total"] = time.perf_counter() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return run


async def _steps(live: Live, agent: Agent) -> None:
    run = live.run
    live.mark("new")  # what the session/new handler sent is before this mark
    await live.snapshot("new")
    live.mark("set")
    await live.op("set", "publish", meta=DRAFTING)

    live.mark("prompt")
    started = time.perf_counter()
    await bounded(live.conn.prompt(session_id=run.session_id, prompt=[acp.text_block("hello")]))
    if agent.late_title:  # generated after the response (hermes: in a worker thread)
        await live.until(
            lambda: any(
                str(u.get("title", "")).startswith("echo:")
                for u in info_updates(run.ours(run.transcript.incoming(run.marks["prompt"])))
            )
        )
    run.seconds["prompt"] = time.perf_counter() - started
    await live.snapshot("prompt")

    live.mark("edits")
    for label, op, args, _patch in EDITS:
        await live.op(label, op, **args)
    await live.barrier()
    await live.snapshot("edits")

    live.mark("burst")
    await _burst(live)
    await live.snapshot("burst")

    if agent.load:
        live.mark("load")
        await bounded(
            live.conn.load_session(cwd=live.cwd, session_id=run.session_id, mcp_servers=[])
        )
    if agent.resume:
        live.mark("resume")
        await bounded(live.conn.resume_session(session_id=run.session_id, cwd=live.cwd))
    await live.snapshot("restored")

    live.mark("close")
    await _close(live, agent)
    if run.meta_mode:
        run.statistics = await live.call("statistics")


async def _burst(live: Live) -> None:
    """With agent_meta the client stops reading for the whole burst: the worker thread's
    publications are all accepted while nothing is read. The baseline's thread would block
    on the full pipe (the SDK writes and drains each frame in turn), so the baseline reads on."""
    run = live.run
    started = time.perf_counter()
    if run.meta_mode:
        live.tap.pause()
        run.answers["burst"] = await live.call(
            "burst", session=run.session_id, count=BURST, pad=PAD
        )
        run.paused["unread_bytes"] = unread_bytes(live.read_fd)
        run.paused["statistics"] = await live.call("statistics")
        live.tap.resume()
    else:
        run.answers["burst"] = await live.call(
            "burst", session=run.session_id, count=BURST, pad=PAD
        )
    await live.barrier()
    run.seconds["burst"] = time.perf_counter() - started


async def _close(live: Live, agent: Agent) -> None:
    run = live.run
    ticking = None
    if agent.close and run.meta_mode:
        ticking = live.control.start("tick_until_fenced", session=run.session_id)
        await bounded(ticking.event())  # a worker thread is publishing
    try:
        await bounded(live.conn.close_session(session_id=run.session_id))
    except acp.RequestError as exc:
        run.answers["close"] = {"code": exc.code, "message": str(exc)}
    else:
        run.answers["close"] = "ok"
    if ticking is not None:
        await live.call("stop_ticking")  # the client has the close response
        run.answers["ticks"] = await bounded(ticking.answer())
    live.mark("after_close")
    try:
        run.answers["after_close"] = await live.call(
            "publish", session=run.session_id, meta={"ext.after_close": True}
        )
    except ControlError as exc:
        run.answers["after_close"] = str(exc)
    await live.barrier()
