"""``agent-meta demo`` end to end: a real subprocess, its own real client and agent."""

from __future__ import annotations

import os
import subprocess
import sys

from integration.harness import REPO, agent_env


def test_demo_plays_the_story_and_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", "demo"],
        env={**os.environ, **agent_env(), "COLUMNS": "200", "NO_COLOR": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    for title in ("stale resolution", "burst racing a resume", "load with replay", "reopen"):
        assert title in out
    assert "demo passed" in out
    # The timeline shows the raw frames, nulls included, and the folded state.
    assert '"sessionUpdate": "session_info_update"' in out
    assert "client holds" in out


def test_demo_rejects_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", "demo", "--bogus"],
        env={**os.environ, **agent_env()},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--bogus" in done.stderr
