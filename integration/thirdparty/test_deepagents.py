"""deepagents-acp, an ACP agent from PyPI that we did not write, with agent_meta under it.

The official Python SDK client drives ``deepagents_launcher.py`` over a real stdio pipe, once
with agent_meta's glue (``adapter``) and once the plain SDK way (``baseline``). One scenario per
run: three prompts (set a status, clear it, set another), then ``session/load`` and
``session/resume``. The evidence is the raw wire:

* every line the agent wrote, split and parsed here, independently of the SDK, from bytes
  copied off the pipe before the SDK's reader sees them;
* the SDK's synchronous ``observers=`` record (:class:`~integration.harness.Transcript`);
* what the SDK handed to the client's ``session_update`` for each ``session_info_update``.

The slow reader stops reading the pipe three times during prompt 1's long streamed reply and
waits until the kernel pipe is full, so the agent's writes block while it streams on. The wait
polls the pipe's fill level: it waits for a state, it does not paper over a race.

``adapter-v2`` is a wire check only: deepagents-acp echoes whatever protocol version the client
asks for, so a client that asks for 2 gets the owner's v2 rendering (``_meta: null``) around
deepagents' otherwise v1-shaped messages.

Needs ``deepagents-acp`` (``nox -s thirdparty`` installs it); skipped where it is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import os
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import acp
import pytest
from acp.schema import ClientCapabilities, Implementation

from agent_meta.testing import ClientMirror
from integration.harness import LINE_LIMIT, REPO, Transcript, agent_env, run_async
from integration.thirdparty.agents import DEEPAGENTS, SELECTION_ENV, selected
from integration.thirdparty.pipes import PipeTap, corrupt_lines, pipe_capacity, unread_bytes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from acp.client.connection import ClientSideConnection

pytestmark = [
    pytest.mark.skipif(
        DEEPAGENTS not in selected(),
        reason=f"deepagents is not in {SELECTION_ENV} (`nox -s thirdparty_all` runs it)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("deepagents_acp") is None,
        reason="deepagents-acp is not installed here: `nox -s thirdparty` builds a venv with it "
        "(integration/thirdparty/requirements.txt)",
    ),
]

LAUNCHER: Final = Path(__file__).with_name("deepagents_launcher.py")
CWD: Final = "/tmp"
#: Bytes of prompt 1's reply read between two pauses of the slow reader (the reply is ~0.9 MB).
PAUSE_STRIDE: Final = 256 * 1024
PAUSES: Final = 3
#: How long one pause may wait for the pipe to fill: a hang guard, not a timing assumption.
FILL_BOUND: Final = 20.0
#: A pipe write of up to this many bytes is atomic, so a blocked writer leaves less room.
PIPE_BUF: Final = 4096
PROMPTS: Final = ("Draft the plan.", "Done: clear the status.", "Review it.")
STATUS_REVIEWING: Final = {"status": "reviewing"}


# --- the client ------------------------------------------------------------------------------


class RecordingClient:
    """A duck-typed ``acp.Client`` that keeps what the SDK hands to application code.

    For each ``session_info_update``: whether ``_meta`` was present (``model_fields_set``) and
    its value, recorded before any ``await`` so the order is the SDK's dispatch order.
    """

    def __init__(self) -> None:
        self.info: list[tuple[bool, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) == "session_info_update":
            self.info.append(("field_meta" in update.model_fields_set, update.field_meta))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted agent asks no permission")


@dataclasses.dataclass
class Agent:
    """One launched agent under the SDK client."""

    conn: ClientSideConnection
    tap: PipeTap
    read_fd: int


@asynccontextmanager
async def launched(
    mode_args: Sequence[str], client: RecordingClient, transcript: Transcript, stderr: Any
) -> AsyncIterator[Agent]:
    """The launcher as a subprocess whose stdout is a pipe this test reads through a tap."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(LAUNCHER),
                *mode_args,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_fd,
                stderr=stderr,
                env={**os.environ, **agent_env()},
                cwd=REPO,
            )
        finally:
            os.close(write_fd)
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        tap = PipeTap(reader)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tap, pipe)
        assert process.stdin is not None
        conn = acp.connect_to_agent(
            cast("acp.Client", client), process.stdin, reader, observers=[transcript.observe]
        )
        try:
            yield Agent(conn, tap, read_fd)
        finally:
            await conn.close()
            with contextlib.suppress(OSError, RuntimeError):
                process.stdin.close()
            tap.resume()  # read to the end, so that the agent can write its last frames and exit
            try:
                await asyncio.wait_for(process.wait(), 10.0)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                transport.close()


async def hold_until_full(agent: Agent) -> int:
    """Keep the paused pipe unread until the agent has filled it; return the unread bytes."""
    capacity = pipe_capacity(agent.read_fd)
    deadline = time.monotonic() + FILL_BOUND
    while (backlog := unread_bytes(agent.read_fd)) < capacity - PIPE_BUF:
        assert time.monotonic() < deadline, f"the pipe did not fill: {backlog}/{capacity} bytes"
        await asyncio.sleep(0.002)  # polls the fill level; nothing depends on this period
    agent.tap.resume()
    return backlog


async def slow_prompt(agent: Agent, session_id: str, text: str) -> list[int]:
    """Run a prompt while the client stops reading :data:`PAUSES` times; return the backlogs."""
    start = agent.tap.received
    agent.tap.pause_at([start + k * PAUSE_STRIDE for k in range(1, PAUSES)])
    agent.tap.pause()
    prompt = asyncio.ensure_future(
        agent.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
    )
    backlogs = [await hold_until_full(agent)]
    while len(backlogs) < PAUSES:
        paused = asyncio.ensure_future(agent.tap.paused.wait())
        await asyncio.wait({prompt, paused}, return_when=asyncio.FIRST_COMPLETED)
        if not paused.done():
            paused.cancel()
            prompt.result()  # its error, if it failed
            raise AssertionError(f"prompt 1 ended after {len(backlogs)} of {PAUSES} pauses")
        backlogs.append(await hold_until_full(agent))
    await prompt
    return backlogs


# --- one run ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """Everything one scenario left behind."""

    mode: str
    protocol_version: int
    lines: list[bytes] = dataclasses.field(repr=False)
    unfinished: bytes
    transcript: Transcript = dataclasses.field(repr=False)
    client: RecordingClient = dataclasses.field(repr=False)
    session_id: str
    marks: dict[str, int]
    backlogs: list[int]
    prompt1_seconds: float
    resume_error: str | None
    stderr: str = dataclasses.field(repr=False)

    def window(self, step: str) -> list[dict[str, Any]]:
        """Incoming messages from the request of ``step`` to the next step."""
        steps = list(self.marks)
        end = self.marks[steps[steps.index(step) + 1]]
        return self.transcript.between(self.marks[step], end)

    def info_frames(self, step: str) -> list[dict[str, Any]]:
        """The ``session_info_update`` objects received during ``step``, as on the wire."""
        return [
            m["params"]["update"]
            for m in self.window(step)
            if m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "session_info_update"
        ]

    def adapter_statistics(self) -> dict[str, Any] | None:
        """The launcher's ``meta.statistics()`` line on stderr (adapter runs only)."""
        for line in self.stderr.splitlines():
            if line.startswith('{"adapter"'):
                stats: dict[str, Any] = json.loads(line)["adapter"]
                return stats
        return None


MODES: Final = {
    "adapter": ((), 1),
    "adapter-v2": ((), 2),
    "baseline": (("--baseline",), 1),
}


async def scenario(mode: str) -> Run:
    mode_args, protocol_version = MODES[mode]
    client = RecordingClient()
    transcript = Transcript(protocol_version)
    marks: dict[str, int] = {}
    resume_error: str | None = None
    with tempfile.TemporaryFile() as stderr:
        async with launched(mode_args, client, transcript, stderr) as agent:
            conn = agent.conn
            await conn.initialize(
                protocol_version=protocol_version,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="agent-meta-thirdparty", version="0"),
            )
            session_id = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            marks["prompt1"] = transcript.mark()
            started = time.perf_counter()
            backlogs = await slow_prompt(agent, session_id, PROMPTS[0])
            prompt1_seconds = time.perf_counter() - started
            for step, text in (("prompt2", PROMPTS[1]), ("prompt3", PROMPTS[2])):
                marks[step] = transcript.mark()
                await conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
            marks["load"] = transcript.mark()
            await conn.load_session(cwd=CWD, session_id=session_id, mcp_servers=[])
            marks["resume"] = transcript.mark()
            try:
                await conn.resume_session(session_id=session_id, cwd=CWD)
            except Exception as exc:  # deepagents-acp answers resume with `null`
                resume_error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            await transcript.until(lambda: responded(transcript, "session/resume"))
            marks["end"] = transcript.mark()
            lines, unfinished = agent.tap.lines, agent.tap.unfinished
        stderr.seek(0)
        errors = stderr.read().decode(errors="replace")
    return Run(
        mode=mode,
        protocol_version=protocol_version,
        lines=list(lines),
        unfinished=unfinished,
        transcript=transcript,
        client=client,
        session_id=session_id,
        marks=marks,
        backlogs=backlogs,
        prompt1_seconds=prompt1_seconds,
        resume_error=resume_error,
        stderr=errors,
    )


def responded(transcript: Transcript, method: str) -> bool:
    try:
        transcript.response_position(method)
    except AssertionError:
        return False
    return True


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    return {mode: run_async(scenario(mode)) for mode in MODES}


def show(capsys: pytest.CaptureFixture[str], *lines: str) -> None:
    """Print figures past pytest's capture."""
    with capsys.disabled():
        print()
        for line in lines:
            print(f"  {line}")


# --- what the wire must show -----------------------------------------------------------------


def live_reply(run: Run) -> str:
    """Prompt 1's streamed reply, put back together from its chunks."""
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in run.window("prompt1")
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    )


def assert_clear_reached_the_wire(run: Run) -> None:
    """Prompt 2's ``set_status(null)`` arrives as a clear: v1 ``_meta: {}`` (the owner sends
    whole objects in v1), v2 ``_meta: null``; the client then holds no metadata."""
    cleared: dict[str, Any] | None = {} if run.protocol_version == 1 else None
    assert run.info_frames("prompt1") == [
        {"sessionUpdate": "session_info_update", "_meta": {"status": "drafting"}}
    ]
    assert run.info_frames("prompt2") == [
        {"sessionUpdate": "session_info_update", "_meta": cleared}
    ], "the clear did not reach the wire"
    assert run.client.info[:2] == [(True, {"status": "drafting"}), (True, cleared)]
    assert held_after(run, "prompt2") is None


def held_after(run: Run, step: str) -> dict[str, Any] | None:
    """The ``_meta`` a client of the run's protocol holds once ``step`` has ended."""
    mirror = ClientMirror(protocol_version=run.protocol_version)
    steps = list(run.marks)
    for message in run.transcript.between(0, run.marks[steps[steps.index(step) + 1]]):
        mirror.feed(message)
    return mirror.meta(run.session_id)


def assert_resync(run: Run, step: str, expected: Sequence[Any]) -> None:
    """During ``step``, after any replay and right before the response: the frames
    ``expected`` (each an ``update._meta``), and no other ``session_info_update``."""
    window = run.window(step)
    method = {"load": "session/load", "resume": "session/resume"}[step]
    response = run.transcript.response_position(method, run.marks[step])
    updates = [
        (i, m["params"]["update"])
        for i, m in enumerate(window[:response])
        if m.get("method") == "session/update"
    ]
    info = [(i, u) for i, u in updates if u["sessionUpdate"] == "session_info_update"]
    assert [u for _, u in info] == [
        {"sessionUpdate": "session_info_update", "_meta": meta} for meta in expected
    ], f"{step}: no resync before the response"
    replayed = [i for i, u in updates if u["sessionUpdate"] != "session_info_update"]
    assert all(i < info[0][0] for i in replayed), f"{step}: replay after the resync"
    assert info[-1][0] == response - 1, f"{step}: the resync does not end right at the response"


def resync_frames(run: Run) -> list[Any]:
    """What a load or resume must resync to: v1 the whole state, v2 a clear then the state."""
    return [STATUS_REVIEWING] if run.protocol_version == 1 else [None, STATUS_REVIEWING]


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_slow_reader_gets_only_whole_lines(
    runs: dict[str, Run], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs[mode]
    bad = corrupt_lines(run.lines)
    reply = live_reply(run)
    words = reply.split(" ")
    show(
        capsys,
        f"[{mode}] lines received: {len(run.lines)}, corrupt: {len(bad)}, "
        f"messages the SDK parsed: {len(run.transcript.incoming())}",
        f"[{mode}] prompt 1: {len(words)} words streamed in {run.prompt1_seconds:.2f} s, "
        f"{len(run.backlogs)} pauses with the pipe full ({', '.join(map(str, run.backlogs))} "
        "bytes unread)",
        f"[{mode}] adapter statistics: {run.adapter_statistics()}",
    )
    assert bad == [], f"{len(bad)} corrupt lines, first: {bad[0][:200]!r}"
    assert run.unfinished == b"", "the agent's output ends inside a line"
    assert len(run.lines) == len(run.transcript.incoming())
    assert len(run.backlogs) == PAUSES
    assert words == [f"w{i:05d}" for i in range(len(words))], "a chunk was lost or doubled"
    assert len(words) >= 1000
    replayed = [u["content"]["text"] for u in _updates(run.window("load"), "agent_message_chunk")]
    assert reply in replayed, "the streamed reply differs from the one session/load replays"


@pytest.mark.parametrize("mode", ["adapter", "adapter-v2"])
def test_clear_reaches_the_wire(
    runs: dict[str, Run], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs[mode]
    show(capsys, f"[{mode}] prompt 2 (the clear) on the wire: {run.info_frames('prompt2')}")
    assert_clear_reached_the_wire(run)
    assert run.transcript.mirror.meta(run.session_id) == STATUS_REVIEWING


def test_baseline_cannot_clear(runs: dict[str, Run], capsys: pytest.CaptureFixture[str]) -> None:
    """The SDK drops a ``None`` ``_meta`` before the wire: the client keeps the old status."""
    run = runs["baseline"]
    show(capsys, f"[baseline] prompt 2 (the clear) on the wire: {run.info_frames('prompt2')}")
    assert run.info_frames("prompt2") == [{"sessionUpdate": "session_info_update"}]
    assert run.client.info[1] == (False, None)
    assert held_after(run, "prompt2") == {"status": "drafting"}
    with pytest.raises(AssertionError, match="the clear did not reach the wire"):
        assert_clear_reached_the_wire(run)


@pytest.mark.parametrize("mode", ["adapter", "adapter-v2"])
def test_load_resyncs_after_replay_before_response(
    runs: dict[str, Run], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs[mode]
    replayed = len(run.window("load")) - len(run.info_frames("load")) - 1
    show(
        capsys,
        f"[{mode}] session/load: {replayed} replayed updates, then {run.info_frames('load')}, "
        "then the response",
    )
    assert replayed > 0, "session/load replayed nothing"
    assert_resync(run, "load", resync_frames(run))


def test_baseline_load_has_no_resync(runs: dict[str, Run]) -> None:
    run = runs["baseline"]
    assert run.info_frames("load") == []
    with pytest.raises(AssertionError, match="no resync before the response"):
        assert_resync(run, "load", resync_frames(run))


@pytest.mark.parametrize("mode", list(MODES))
def test_resume_hits_deepagents_stub(
    runs: dict[str, Run], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """deepagents-acp has no ``session/resume``: the SDK's Protocol stub answers
    ``result: null``, which the SDK client rejects. That is no successful resume, so no resync
    precedes it, with the adapter or without."""
    run = runs[mode]
    window = run.window("resume")
    response = window[run.transcript.response_position("session/resume", run.marks["resume"])]
    show(
        capsys,
        f"[{mode}] session/resume: {run.info_frames('resume')}, then {response}; "
        f"the SDK client raised {run.resume_error}",
    )
    assert "result" in response
    assert response["result"] is None
    assert run.resume_error is not None
    assert "ResumeSessionResponse" in run.resume_error
    assert run.info_frames("resume") == []


def _updates(messages: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]
