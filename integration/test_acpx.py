"""Smoke test with acpx, a real headless ACP client (v1), which reconnects through session/resume.

Each ``acpx prompt`` spawns the agent again and reconnects to the session it saved with
``session/resume``. A fresh agent process can only resume what it stored, so this needs the
reference agent's ``--store`` (SQLite). ``--format json`` prints the raw NDJSON traffic, which
is the transcript asserted here (acpx itself stores ``title`` but ignores ``_meta``). It runs
against both runtimes of the agent (trio, and ``--runtime sdk``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from typing import TYPE_CHECKING, Any

import pytest

from agent_meta.testing import ClientMirror
from integration.harness import NODE_DIR, agent_command, agent_env, info_updates

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.usefixtures("node", "agent_runtime")

ACPX = NODE_DIR / "node_modules" / ".bin" / "acpx"
#: acpx keeps a queue owner (and the agent) alive this long after a command; 1 s is the least.
TTL = "1"


class Acpx:
    """acpx with its state isolated in a temporary HOME."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "project"
        self.home.mkdir()
        self.cwd.mkdir()
        agent = [*agent_command(), "--store", str(tmp_path / "agent.sqlite")]
        self.agent = shlex.join(agent)
        self.env = {**os.environ, **agent_env(), "HOME": str(self.home)}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(ACPX), "--agent", self.agent, "--cwd", str(self.cwd), "--ttl", TTL, *args]
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise AssertionError(
                f"acpx {args} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
        return done

    def prompt(self, text: str) -> list[dict[str, Any]]:
        """One prompt turn; returns the JSON-RPC transcript, after the agent has gone away."""
        done = self.run("--format", "json", "prompt", text)
        self.wait_for_queue_owner_exit()
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def wait_for_queue_owner_exit(self) -> None:
        """acpx's queue owner keeps the agent for TTL seconds; the next prompt must reconnect."""
        queues = self.home / ".acpx" / "queues"
        deadline = time.monotonic() + 30
        while queues.is_dir() and any(queues.glob("*.lock")):
            if time.monotonic() > deadline:
                raise AssertionError("acpx's queue owner did not exit")
            time.sleep(0.1)


def _resume_segment(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages from the session/resume request up to (not including) its response."""
    start = next((i for i, m in enumerate(transcript) if m.get("method") == "session/resume"), None)
    assert start is not None, f"acpx did not reconnect with session/resume: {transcript}"
    request_id = transcript[start]["id"]
    end = next(
        i
        for i, m in enumerate(transcript)
        if i > start and "method" not in m and m.get("id") == request_id
    )
    assert "error" not in transcript[end], f"session/resume failed: {transcript[end]}"
    return transcript[start + 1 : end]


def test_acpx_reconnects_through_resume_and_gets_the_resync(tmp_path: Path) -> None:
    # Each acpx prompt starts a new agent process: --store lets it resume the saved session.
    acpx = Acpx(tmp_path)
    acpx.run("sessions", "new")
    acpx.wait_for_queue_owner_exit()

    first = acpx.prompt('/title Smoke\n/meta set a {"x":1}\n/meta set gone 1\n/meta rm gone')
    _resume_segment(first)
    second = acpx.prompt("/meta set b 2")
    resync = info_updates(_resume_segment(second))
    assert resync, "no session_info_update between session/resume and its response"
    # v1 merged mode: the resync is the complete state the agent restored from its store.
    assert resync[-1]["_meta"] == {"a": {"x": 1}}

    # Fold what the agent sent (acpx prints both directions; requests are not folded anyway).
    mirror = ClientMirror(protocol_version=1)
    for message in first + second:
        mirror.feed(message)
    session_ids = mirror.session_ids
    assert len(session_ids) == 1, f"acpx talked to more than one session: {session_ids}"
    assert mirror.meta(session_ids[0]) == {"a": {"x": 1}, "b": 2}
    assert mirror.info(session_ids[0]).title == "Smoke"

    record = next((acpx.home / ".acpx" / "sessions").glob("*.json"))
    assert json.loads(record.read_text()).get("title") == "Smoke"
