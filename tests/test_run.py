"""``agent-meta run -- AGENT_CMD``: an unchanged SDK agent with the owner under it, over pipes.

The agent is ``tests.support.sdk_mini_agent plain``: an official-SDK agent that calls
``acp.run_agent(agent)`` and nothing of agent_meta (its ``clear`` looks the adapter up with
``adapter_of(conn)``, which only ``agent-meta run`` makes possible). Every other command here is
one that must not run without ownership: each is stopped, and the client hears nothing from it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from agent_meta._install_hint import install_hint
from tests.agent_process import BOUND, AgentProcess, prompt_params, request, running, stderr_of
from tests.sdk_release import needs_run_agent, needs_session_info

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PLAIN_AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent", "plain"]
OWN_STDIO_AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent", "own-stdio"]
"""The same agent started as gptme-acp starts: streams on duplicates of its stdio."""
OWN_PIPES_AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent", "own-pipes"]
"""The same agent on a pipe pair of its own."""

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes


@asynccontextmanager
async def supervised(
    *command: str,
    options: tuple[str, ...] = (),
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> AsyncIterator[AgentProcess]:
    """``agent-meta run [options] -- command`` with its stdin and stdout as pipes (and stderr,
    read by :func:`stderr_of`)."""
    argv = [sys.executable, "-m", "agent_meta", "run", *options, "--", *command]
    async with running(argv, cwd=cwd, env=env) as agent:
        yield agent


async def start(agent: AgentProcess) -> str:
    answer = await agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert answer["result"]["protocolVersion"] == 1
    created = await agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    return session_id


def info_updates(agent: AgentProcess, since: int = 0) -> list[dict[str, object]]:
    return [
        m["params"]["update"]
        for m in agent.messages[since:]
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]


@needs_run_agent
@needs_session_info
async def test_an_unchanged_sdk_agent_is_owned_resynced_and_can_clear() -> None:
    async with supervised(*PLAIN_AGENT) as agent:
        sid = await start(agent)
        for text in ("meta a 1", "clear", "meta b 2"):
            answer = await agent.prompt(sid, text)
            assert answer.get("result") == {"stopReason": "end_turn"}, answer
        before = len(agent.messages)
        loaded = await agent.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert loaded["result"] == {}
        assert await agent.finish() == 0
    # The clear went through adapter_of(conn): v1 has no clear, so the whole object, empty.
    assert info_updates(agent, 0)[:3] == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
        {"sessionUpdate": "session_info_update", "_meta": {}},
        {"sessionUpdate": "session_info_update", "_meta": {"b": 2}},
    ]
    # The load replays the agent's history ({"a": 1} came back there) and the resync, last
    # before the response, puts the client right.
    after = agent.messages[before:]
    assert after[-1] == loaded
    assert after[-2]["params"]["update"] == {
        "sessionUpdate": "session_info_update",
        "_meta": {"b": 2},
    }


@needs_run_agent
@needs_session_info
async def test_an_agent_that_hands_the_sdk_duplicates_of_its_stdio_is_owned() -> None:
    """gptme-acp 0.35.1 duplicates fd 0 and fd 1, points fd 1 at stderr and passes streams on
    the duplicates to ``run_agent``: its own stdio, which ``agent-meta run`` owns. The adapter
    reads the client through the agent's reader and writes the client's stdout; what the agent
    prints after its redirect goes to stderr, as alone."""
    async with supervised(*OWN_STDIO_AGENT) as agent:
        sid = await start(agent)
        for text in ("meta a 1", "clear", "meta b 2"):
            answer = await agent.prompt(sid, text)
            assert answer.get("result") == {"stopReason": "end_turn"}, answer
        before = len(agent.messages)
        loaded = await agent.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert loaded["result"] == {}
        assert await agent.finish() == 0
        errors = await stderr_of(agent)
    assert info_updates(agent, 0)[:3] == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
        {"sessionUpdate": "session_info_update", "_meta": {}},  # the clear, through adapter_of
        {"sessionUpdate": "session_info_update", "_meta": {"b": 2}},
    ]
    after = agent.messages[before:]
    assert after[-1] == loaded
    assert after[-2]["params"]["update"] == {
        "sessionUpdate": "session_info_update",
        "_meta": {"b": 2},
    }
    assert "a stray print after the redirect" in errors
    assert "agent-meta run:" not in errors, errors


@needs_run_agent
async def test_streams_that_are_not_the_agents_stdio_are_refused_saying_what_to_do() -> None:
    """``run_agent`` on a pipe pair of the agent's own: nothing there is the client, so
    ``agent-meta run`` stops it, and says why and what to do instead."""
    async with supervised(*OWN_PIPES_AGENT) as agent:
        await agent.send(request(1, "initialize", {"protocolVersion": 1}))
        assert await agent.receive() is None  # nothing reached the client
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2, errors
    assert (
        "the agent gave run_agent an input_stream writing to a pipe, not to its stdout; "
        "agent-meta run owns a connection only on the process's own stdin and stdout"
    ) in errors, errors
    assert "Adopt agent_meta in the agent's code instead: agent_meta.sdk.run_agent" in errors


@needs_run_agent
@pytest.mark.parametrize("command", [PLAIN_AGENT, OWN_STDIO_AGENT], ids=["stdio", "own-stdio"])
async def test_the_same_agent_without_agent_meta_cannot_clear(command: list[str]) -> None:
    """The baseline the tests above are measured against: the agent alone."""
    direct = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    alone = AgentProcess(direct)
    try:
        sid = await start(alone)
        answer = await alone.prompt(sid, "clear")
        assert "error" in answer  # adapter_of(conn): no adapter under this connection
        assert await alone.finish() == 0
    finally:
        if direct.returncode is None:
            direct.kill()
        with trio.CancelScope(shield=True):
            await direct.wait()
            for stream in (direct.stdin, direct.stdout):
                assert stream is not None
                await stream.aclose()


FAKE_AGENT = textwrap.dedent(
    """
    import sys
    sys.stdin.readline()
    print('{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}', flush=True)
    sys.stdin.readline()
    """
)


NEVER_BOOTED = "agent_meta's sitecustomize never ran in the agent"
#: The plain agent, found from the current directory (``python -I`` does not put it on sys.path).
PLAIN_SCRIPT = (
    "import runpy, sys; sys.path.insert(0, '.'); sys.argv[1:] = ['plain']; "
    "runpy.run_module('tests.support.sdk_mini_agent', run_name='__main__')"
)


@pytest.mark.parametrize(
    ("command", "why"),
    [
        pytest.param(
            [sys.executable, "-c", FAKE_AGENT],
            "it never imported the official ACP SDK (acp)",
            id="python, no SDK",
        ),
        pytest.param(
            [sys.executable, "-c", "import acp\n" + FAKE_AGENT],
            "but did not start its connection through acp.run_agent",
            id="SDK, no run_agent",
        ),
        pytest.param(["cat"], NEVER_BOOTED, id="not python"),
        # Isolated and -E interpreters ignore PYTHONPATH: agent_meta's sitecustomize never runs.
        pytest.param(
            [sys.executable, "-I", "-c", PLAIN_SCRIPT],
            NEVER_BOOTED,
            id="python -I",
            marks=needs_run_agent,
        ),
        pytest.param(
            [sys.executable, "-E", "-c", PLAIN_SCRIPT],
            NEVER_BOOTED,
            id="python -E",
            marks=needs_run_agent,
        ),
    ],
)
async def test_an_agent_that_answers_without_ownership_is_stopped(
    command: list[str], why: str
) -> None:
    async with supervised(*command) as agent:
        await agent.send(request(1, "initialize", {"protocolVersion": 1}))
        assert await agent.receive() is None  # nothing reached the client
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2, errors
    assert "answered the client without agent_meta" in errors
    assert why in errors, errors


async def test_a_python_that_skips_site_says_the_sitecustomize_never_ran() -> None:
    """``python -S`` runs no sitecustomize (nor finds the venv's packages): it exits unowned."""
    async with supervised(sys.executable, "-S", "-c", PLAIN_SCRIPT) as agent:
        await agent.send(request(1, "initialize", {"protocolVersion": 1}))
        assert await agent.receive() is None
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status != 0
    assert f"agent_meta never owned its connection: {NEVER_BOOTED}" in errors, errors


async def test_an_agent_that_exits_unowned_says_so() -> None:
    async with supervised(sys.executable, "-c", "print('hello')") as agent:
        assert await agent.receive() is None
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2
    assert "agent_meta never owned its connection" in errors
    assert "hello" in errors  # what it printed is shown, not sent


async def test_an_sdk_release_outside_the_range_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "site"
    (fake / "acp").mkdir(parents=True)
    (fake / "acp" / "__init__.py").write_text("async def run_agent(*a, **k): pass\n")
    info = fake / "agent_client_protocol-0.5.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agent-client-protocol\nVersion: 0.5.0\n"
    )
    script = f"import sys, time; sys.path.insert(0, {str(fake)!r}); import acp; time.sleep(60)"
    async with supervised(sys.executable, "-c", script) as agent:
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2
    assert "agent-client-protocol 0.5.0 is not supported" in errors


async def test_an_interpreter_without_agent_meta_is_refused(tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    found = await trio.run_process(
        [base, "-c", "import agent_meta"], capture_stderr=True, check=False, cwd=tmp_path
    )
    if found.returncode == 0:
        pytest.skip(f"{base} can import agent_meta: no interpreter without it here")
    script = "import time; time.sleep(60)"
    async with supervised(base, "-c", script, cwd=tmp_path) as agent:
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2
    assert "agent_meta cannot be imported by the agent's Python" in errors
    wanted = f"its 'sdk' extra into the agent's environment ({install_hint('sdk')}, with"
    assert wanted in " ".join(errors.split())


STRAY = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, ".")
    import acp
    from tests.support.sdk_mini_agent import MiniAgent
    print("a stray print before serving")
    class Noisy(MiniAgent):
        async def prompt(self, prompt, session_id, **kwargs):
            print("a stray print while serving", flush=True)
            return await super().prompt(prompt, session_id, **kwargs)
    asyncio.run(acp.run_agent(Noisy(None), use_unstable_protocol=True))
    """
)


@needs_run_agent
@needs_session_info
async def test_stray_prints_go_to_stderr_and_the_stream_stays_clean() -> None:
    async with supervised(sys.executable, "-c", STRAY) as agent:
        sid = await start(agent)
        answer = await agent.prompt(sid, "meta a 1")
        assert answer["result"] == {"stopReason": "end_turn"}
        assert await agent.finish() == 0  # every line parsed as JSON on the way
        errors = await stderr_of(agent)
    assert "a stray print before serving" in errors
    assert "a stray print while serving" in errors


@needs_run_agent
async def test_a_client_that_stopped_reading_makes_it_exit_1() -> None:
    body = "\n".join(f"line {n:05d} " + "x" * 100 for n in range(3000))
    async with supervised(*PLAIN_AGENT) as agent:
        sid = await start(agent)
        await agent.send(request(agent.next_id(), "session/prompt", prompt_params(sid, body)))
        await agent.pad()
        await agent.stdin.aclose()
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 1, errors
    assert "stopped reading" in errors


@needs_run_agent
async def test_sigterm_is_passed_on_to_the_agent() -> None:
    async with supervised(*PLAIN_AGENT) as agent:
        await start(agent)
        agent.process.send_signal(signal.SIGTERM)
        status = await agent.process.wait()
    assert status == 128 + signal.SIGTERM  # Python's default: the agent died of it


HANGING = textwrap.dedent(
    """
    import asyncio, atexit, pathlib, sys
    sys.path.insert(0, ".")
    import acp
    from tests.support.sdk_mini_agent import MiniAgent, text_chunk
    atexit.register(pathlib.Path(sys.argv[1]).write_text, "saved")
    class Hanging(MiniAgent):
        async def prompt(self, prompt, session_id, **kwargs):
            if prompt[0].text != "hang":
                return await super().prompt(prompt, session_id, **kwargs)
            await self.conn.session_update(session_id, text_chunk("hanging"))
            await asyncio.Event().wait()  # a turn that outlives the client
    asyncio.run(acp.run_agent(Hanging(None)))
    """
)
"""The plain agent, with a prompt that never ends and an ``atexit`` handler writing argv[1]."""


@needs_run_agent
async def test_drain_timeout_bounds_the_wait_for_running_requests_at_the_end_of_input(
    tmp_path: Path,
) -> None:
    """The client closes its output while a prompt runs (the official SDK client then gives
    the agent 2 s before SIGTERM). The adapter answers running requests before the SDK sees
    the end of the input, for at most --drain-timeout (10 s by default); then the SDK cancels
    them as it would alone, and the agent exits by itself: status 0, its atexit handlers run."""
    saved = tmp_path / "saved"
    options = ("--drain-timeout", "0.5")
    async with supervised(sys.executable, "-c", HANGING, str(saved), options=options) as agent:
        sid = await start(agent)
        await agent.send(request(agent.next_id(), "session/prompt", prompt_params(sid, "hang")))
        while (message := await agent.receive()) is not None and "method" not in message:
            pass  # until the turn has started: its chunk
        assert message is not None
        assert agent.replies(sid, 0) == ["hanging"]
        assert await agent.finish() == 0
        errors = await stderr_of(agent)
    assert "still unanswered after the drain timeout of 0.5 s, and are cancelled" in errors
    assert saved.read_text() == "saved"


@pytest.mark.parametrize("value", ["-1", "nan", "soon"])
async def test_a_drain_timeout_that_is_no_number_of_seconds_is_a_usage_error(value: str) -> None:
    async with supervised(*PLAIN_AGENT, options=("--drain-timeout", value)) as agent:
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2
    assert f"--drain-timeout: not a number of seconds >= 0: {value!r}" in errors


PID_THEN_PLAIN_AGENT = [
    sys.executable,
    "-c",
    "import os, runpy, sys\n"
    "sys.stderr.write(f'agent pid {os.getpid()}\\n'); sys.stderr.flush()\n"
    "sys.argv[1:] = ['plain']\n"
    "runpy.run_module('tests.support.sdk_mini_agent', run_name='__main__')\n",
]
"""The plain agent, saying its process id on stderr first."""


@needs_run_agent
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a parent-death signal: Linux")
async def test_an_agent_does_not_outlive_a_killed_supervisor() -> None:
    """A client that gives up kills the process it started with SIGKILL, which cannot be
    passed on. The agent must not live on holding the client's stdout (the client would wait
    for its EOF forever): it dies with the supervisor."""
    async with supervised(*PID_THEN_PLAIN_AGENT) as agent:
        await start(agent)  # owned and serving
        assert agent.process.stderr is not None
        said = b""
        while b"\n" not in said.partition(b"agent pid ")[2]:
            chunk = await agent.process.stderr.receive_some()
            assert chunk, said
            said += chunk
        pid = int(said.partition(b"agent pid ")[2].split(b"\n")[0])
        pidfd = os.pidfd_open(pid)
        try:
            agent.process.kill()  # SIGKILL, to the supervisor only
            await trio.lowlevel.wait_readable(pidfd)  # readable once the agent has exited
        finally:
            os.close(pidfd)


@needs_run_agent
@needs_session_info
async def test_an_extension_imported_into_the_agent_publishes_on_its_sessions() -> None:
    # The agent finds the extension on its PYTHONPATH (kept behind agent_meta's own entry).
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    options = ("--import", "run_extension")
    async with supervised(*PLAIN_AGENT, options=options, env=env) as agent:
        sid = await start(agent)
        await agent.prompt(sid, "meta a 1")
        assert await agent.finish() == 0
    metas = [update.get("_meta") for update in info_updates(agent)]
    assert {"extension": {"loaded": True}, "a": 1} in metas, metas


async def test_an_extension_that_cannot_be_imported_stops_the_agent() -> None:
    async with supervised(*PLAIN_AGENT, options=("--import", "no_such_extension")) as agent:
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2
    assert "--import no_such_extension: ModuleNotFoundError" in errors


V2_PLAIN = [sys.executable, "-m", "tests.support.sdk_v2_mini_agent", "plain"]
V2_ROUTER = [sys.executable, "-m", "tests.support.sdk_v2_mini_agent", "router"]
V2_INIT = {"protocolVersion": 2, "info": {"name": "raw", "version": "1"}, "capabilities": {}}

needs_v2 = pytest.mark.skipif(
    importlib.util.find_spec("acp.experimental") is None,
    reason="this SDK release has no ACP v2 side",
)


@needs_v2
async def test_an_unchanged_v2_sdk_agent_is_owned_and_its_clears_reach_the_client() -> None:
    async with supervised(*V2_PLAIN) as agent:
        refused = await agent.call("initialize", {**V2_INIT, "protocolVersion": 1})
        assert refused["error"]["code"] == -32022  # the SDK alone answers -32602
        answer = await agent.call("initialize", V2_INIT)
        assert answer["result"]["protocolVersion"] == 2
        created = await agent.call("session/new", {"cwd": "/tmp"})  # no mcpServers: fine
        sid = created["result"]["sessionId"]
        for text in ('meta {"a": 1, "b": 2}', 'meta {"a": null}', "meta null", "title T"):
            answer = await agent.prompt(sid, text)
            assert "messageId" in answer["result"], answer
        resumed = await agent.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        assert resumed["result"] == {}
        assert await agent.finish() == 0
    assert info_updates(agent) == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "b": 2}},
        {"sessionUpdate": "session_info_update", "_meta": {"a": None}},
        {"sessionUpdate": "session_info_update", "_meta": None},
        {"sessionUpdate": "session_info_update", "title": "T"},
        {"sessionUpdate": "session_info_update", "_meta": {"resumed": 1}},  # live, no replay
        # The resync before the resume's answer: the clear, then the whole state.
        {"sessionUpdate": "session_info_update", "_meta": None},
        {"sessionUpdate": "session_info_update", "title": "T", "_meta": {"resumed": 1}},
    ]


@needs_v2
@pytest.mark.parametrize("version", [1, 2])
async def test_an_unchanged_router_is_owned_for_either_version(version: int) -> None:
    async with supervised(*V2_ROUTER) as agent:
        init = V2_INIT if version == 2 else {"protocolVersion": 1}
        answer = await agent.call("initialize", init)
        assert answer["result"]["protocolVersion"] == version
        created = await agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = created["result"]["sessionId"]
        for text in ('{"a": 1}', '{"b": 2}'):
            await agent.prompt(sid, f"meta {text}" if version == 2 else f"meta {text[2]} {text[6]}")
        assert await agent.finish() == 0
    rendered = [update["_meta"] for update in info_updates(agent)]
    assert rendered == ([{"a": 1}, {"b": 2}] if version == 2 else [{"a": 1}, {"a": 1, "b": 2}])


def test_a_stdout_that_is_a_regular_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """The official SDK's asyncio transports cannot write to a regular file: ``run`` says so
    and exits 2 before it starts the agent (it used to end in the agent's traceback)."""
    out = tmp_path / "out.ndjson"
    marker = tmp_path / "started"
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    with out.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "agent_meta", "run", "--", *agent],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=BOUND,
            check=False,
            cwd=ROOT,
        )
    assert done.returncode == 2
    assert "stdout is a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()  # the agent never started
    assert out.read_bytes() == b""
