"""The ``agent-meta`` command line, and the reference agent as a real subprocess over pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_meta import __version__
from agent_meta._install_hint import install_hint
from agent_meta.agents import _serve as _agent_serve
from agent_meta.agents._common._commands import COMMANDS
from agent_meta.cli._main import build_parser, main
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.trio_connection._lines import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from pathlib import Path

# --------------------------------------------------------------------------- argument parsing


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"agent-meta {__version__}"


def test_agent_defaults() -> None:
    args = build_parser().parse_args(["agent"])
    assert args.protocol == "auto"
    assert args.failure_path == "agent-meta.failure"
    assert args.max_line == DEFAULT_MAX_LINE_BYTES
    assert args.v1_meta_mode == "merged"
    assert args.no_coalesce is False
    assert args.runtime == "trio"


def test_agent_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["agent", "--help"])
    out = capsys.readouterr().out
    for word in ("--protocol", "--failure-path", "--max-line", "/meta set", "/burst"):
        assert word in out
    for name, _description, _hint in COMMANDS:  # every command the agent advertises
        assert f"/{name}" in out, f"agent --help does not list /{name}"


@pytest.mark.parametrize(
    "argv",
    [["agent", "--protocol", "3"], ["agent", "--max-line", "0"], ["agent", "--max-line", "x"], []],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: agent-meta" in capsys.readouterr().err


def test_bad_failure_path_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["agent", "--failure-path", "a..b"])
    assert exit_info.value.code == 2
    assert "non-empty names" in capsys.readouterr().err


def test_sdk_runtime_refuses_protocol_2_where_the_sdk_has_no_v2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before 1.0 the SDK has no ``acp.experimental.v2``: ``--protocol 2`` is refused (on 1.0
    it serves the v2 agent, as ``tests/test_v2_pipe_conformance.py`` shows)."""
    monkeypatch.setattr(_agent_serve, "_sdk_protocol_versions", lambda: (1,))
    with pytest.raises(SystemExit) as exit_info:
        main(["agent", "--runtime", "sdk", "--protocol", "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "speaks ACP v1 only" in err
    assert "agent-client-protocol 1.0" in err


def test_sdk_runtime_without_the_sdk_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "agent_meta.agents.sdk_agent._serve", None)  # import fails
    assert main(["agent", "--runtime", "sdk"]) == 2
    assert install_hint("sdk") in capsys.readouterr().err


def test_demo_without_its_dependencies_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "agent_meta.demo._main", None)  # makes the import fail
    assert main(["demo"]) == 2
    assert install_hint("demo") in capsys.readouterr().err


def test_demo_gets_the_remaining_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setitem(sys.modules, "agent_meta.demo._main", types.SimpleNamespace(main=fake_main))
    assert main(["demo", "--fast", "x"]) == 3
    assert seen == [["--fast", "x"]]


# --------------------------------------------------------------------------- a real subprocess


class AgentProcess:
    """The reference agent in a child process; frames are read with a hang guard."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self._buffer = b""
        self.received: list[dict[str, Any]] = []

    async def send_raw(self, data: bytes) -> None:
        await self.stdin.send_all(data)

    async def request(self, request_id: int, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any] | None:
        """The next frame, or ``None`` at the end of the agent's output."""
        while b"\n" not in self._buffer:
            chunk = await self.stdout.receive_some(65536)
            if not chunk:
                assert not self._buffer.strip(), f"partial frame at EOF: {self._buffer!r}"
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame: dict[str, Any] = json.loads(line)
        self.received.append(frame)
        return frame

    async def turn_end(self, session_id: str) -> None:
        """Read frames until a v2 turn of ``session_id`` ends (its idle ``state_update``): a
        v2 prompt is answered once its message is inserted, before its lines run."""
        while True:
            frame = await self.receive()
            assert frame is not None, f"agent output ended inside a turn of {session_id}"
            params = frame.get("params") or {}
            update = params.get("update") or {}
            if params.get("sessionId") == session_id and update.get("state") == "idle":
                return

    async def response(self, request_id: int | None) -> dict[str, Any]:
        """Read frames until the response with this id (``None``: an error with id null)."""
        while True:
            frame = await self.receive()
            assert frame is not None, f"agent output ended before response {request_id}"
            if "method" not in frame and frame.get("id") == request_id:
                return frame


def _error_code(frame: dict[str, Any]) -> int:
    error = frame["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    code = error["code"]
    assert isinstance(code, int)
    return code


async def test_bad_inbound_input_over_a_real_pipe() -> None:
    command = [sys.executable, "-m", "agent_meta", "agent", "--max-line", "2048"]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    agent = AgentProcess(process)
    try:
        with trio.fail_after(30):
            await agent.request(
                0, "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}}
            )
            assert (await agent.response(0))["result"]["protocolVersion"] == 2
            sessions = []
            for request_id in (1, 2):
                await agent.request(request_id, "session/new", {"cwd": "/tmp"})
                sessions.append((await agent.response(request_id))["result"]["sessionId"])
            a, b = sessions
            await agent.request(
                3,
                "session/prompt",
                {"sessionId": a, "prompt": [{"type": "text", "text": "/meta set k 1"}]},
            )
            await agent.response(3)
            await agent.turn_end(a)

            await agent.send_raw(b'{"jsonrpc": "2.0", "id": 4, "method": \n')
            assert _error_code(await agent.response(None)) == ErrorCode.PARSE_ERROR
            await agent.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": 7}\n')
            assert _error_code(await agent.response(5)) == ErrorCode.INVALID_REQUEST
            await agent.request(6, "session/frobnicate", {})
            assert _error_code(await agent.response(6)) == ErrorCode.METHOD_NOT_FOUND
            await agent.request(7, "session/new", {"cwd": 42})
            assert _error_code(await agent.response(7)) == ErrorCode.INVALID_PARAMS
            huge = json.dumps(
                {"jsonrpc": "2.0", "id": 8, "method": "x", "params": {"p": "y" * 4096}}
            )
            await agent.send_raw(huge.encode() + b"\n")
            assert _error_code(await agent.response(None)) == ErrorCode.PARSE_ERROR
            await agent.request(
                9,
                "session/prompt",
                {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]},
            )
            assert _error_code(await agent.response(9)) == ErrorCode.RESOURCE_NOT_FOUND

            # Nothing was lost for the real sessions: both still work and keep their state.
            await agent.request(
                10,
                "session/prompt",
                {"sessionId": b, "prompt": [{"type": "text", "text": "/meta set other 2"}]},
            )
            assert "result" in await agent.response(10)
            await agent.turn_end(b)  # its /meta is published by then
            await agent.request(11, "session/list", {})
            listed = {s["sessionId"]: s for s in (await agent.response(11))["result"]["sessions"]}
            assert listed[a]["_meta"] == {"k": 1}
            assert listed[b]["_meta"] == {"other": 2}

            # EOF in the middle of a line: one parse error, then a clean exit.
            await agent.send_raw(b'{"jsonrpc": "2.0", "id": 12, "meth')
            await agent.stdin.aclose()
            assert _error_code(await agent.response(None)) == ErrorCode.PARSE_ERROR
            assert await agent.receive() is None
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_sdk_runtime_on_a_regular_file_says_why_it_cannot_run(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "agent_meta", "agent", "--runtime", "sdk"],
            stdin=stdin,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert b"stdin is a regular file" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--listen", "127.0.0.1:0"], "--listen needs --runtime sdk"),
        (["--runtime", "trio", "--listen", "0"], "--listen needs --runtime sdk"),
        (["--token-file", "token"], "--token-file needs --listen"),
        (["--runtime", "sdk", "--token-file", "token"], "--token-file needs --listen"),
        (
            ["--runtime", "sdk", "--listen", "127.0.0.1:0", "--max-line", "1000"],
            "--max-line applies to stdio only",
        ),
    ],
)
def test_an_option_the_others_would_make_it_ignore_is_a_usage_error(
    options: list[str], says: str, tmp_path: Path
) -> None:
    """It used to be ignored: ``agent --listen 127.0.0.1:0`` ran a stdio agent."""
    (tmp_path / "token").write_text("a-token-for-this-test\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", "agent", *options],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr.decode()
    assert b"usage: agent-meta" in done.stderr
    assert done.stdout == b""


def test_listen_without_its_server_says_which_extra_to_install() -> None:
    """Without uvicorn (the ``sdk-http`` extra), ``--listen`` is refused before anything runs,
    with the extra to install, not a traceback from inside the server."""
    program = (
        "import sys\n"
        "sys.modules['uvicorn'] = None  # as if it were not installed\n"
        "from agent_meta.cli._main import main\n"
        "sys.exit(main(['agent', '--runtime', 'sdk', '--listen', '127.0.0.1:0']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={**os.environ, "AGENT_META_TOKEN": "a-token-for-this-test-only-0123456789"},
        timeout=60,
        check=False,
    )
    errors = done.stderr.decode()
    assert done.returncode == 2, errors
    assert install_hint("sdk-http") in errors
    assert "Traceback" not in errors
