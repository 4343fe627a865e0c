"""``@agentclientprotocol/codex-acp`` 2.6.0, the real Codex ACP agent, run offline for the tests.

``npm ci`` here installs it (``package.json``, ``package-lock.json``; about 450 MB, the native
Codex binary included). :func:`codex_home` writes a ``CODEX_HOME`` whose model provider is
``fake_responses.py`` on loopback, which :func:`fake_model_server` starts; :func:`codex_env` is
the environment codex-acp needs (nothing that would reach OpenAI). Facts and timings:
``docs/own.md`` and the project's notes on real agents offline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).resolve().parent
AGENT = HERE / "node_modules" / "@agentclientprotocol" / "codex-acp" / "dist" / "index.js"
NATIVE = HERE / "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
"""The Codex binary itself: as ``CODEX_PATH`` it skips a Node wrapper (about 0.3 s a start)."""

CONFIG = """\
model = "gpt-6.1-sol"
model_provider = "local"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.local]
name = "local fake"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
requires_openai_auth = false
supports_websockets = false
request_max_retries = 0
stream_max_retries = {stream_retries}

[analytics]
enabled = false

[feedback]
enabled = false

# No look-ups of chatgpt.com and api.github.com at start-up, no login shell per session.
[features]
plugins = false
shell_snapshot = false
"""
"""``config.toml``: a model in the binary's own catalog (no metadata warning), the fake as the
only provider, nothing that calls home."""

_DROPPED = (
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_PATH",
    "CODEX_CONFIG",
    "INITIAL_AGENT_MODE",
    "MODEL_PROVIDER",
    "DEFAULT_AUTH_REQUEST",
    "APP_SERVER_LOGS",
    "RUST_LOG",
)
"""Variables that would make Codex reach OpenAI or take a user's own set-up."""


def codex_ready() -> str | None:
    """Why codex-acp cannot run here, or ``None`` when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not AGENT.is_file():
        return "integration/codex/node_modules is missing: run `npm ci` in integration/codex"
    return None


def codex_command() -> list[str]:
    """codex-acp as an agent command."""
    return ["node", str(AGENT)]


def codex_home(path: Path, port: int, *, stream_retries: int = 0) -> Path:
    """Write a ``CODEX_HOME`` at ``path`` whose provider is the fake on ``port``.
    ``stream_retries`` 1: a failing turn first publishes a "Reconnecting... 1/1" failure
    (``jetbrains.air.sessionFailure``, for AIR clients), then fails."""
    path.mkdir(parents=True, exist_ok=True)
    config = CONFIG.format(port=port, stream_retries=stream_retries)
    (path / "config.toml").write_text(config, encoding="utf-8")
    return path


def codex_env(home: Path) -> dict[str, str]:
    """The environment of a codex-acp child using ``home``."""
    env = {name: value for name, value in os.environ.items() if name not in _DROPPED}
    if NATIVE.is_file():
        env["CODEX_PATH"] = str(NATIVE)
    env.update(CODEX_HOME=str(home), FAKE_API_KEY="fake-key", NO_BROWSER="1")
    env["CODEX_ACP_PROMPT_SUGGESTIONS"] = "false"  # no extra model call after each turn
    return env


@contextlib.contextmanager
def fake_model_server() -> Iterator[int]:
    """Run ``fake_responses.py`` for the block; its port."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "fake_responses.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
