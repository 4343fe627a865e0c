"""``agent-meta demo`` end to end: a real subprocess, its own real clients and agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from integration.harness import REPO, agent_env, node_ready, sdk_speaks_v2

if TYPE_CHECKING:
    from pathlib import Path


def _demo(*args: str, cwd: Path = REPO, columns: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **agent_env(), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "agent_meta", "demo", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_demo_plays_both_stories_and_passes() -> None:
    done = _demo()
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    for title in ("stale resolution", "burst racing a resume", "load with replay", "reopen"):
        assert title in out
    assert "v1 passed" in out
    assert "v2 passed" in out
    assert "demo passed" in out
    # The timeline shows the raw frames, nulls included, and the folded state.
    assert '"sessionUpdate": "session_info_update"' in out
    assert "client holds" in out
    # v2: a clear on the wire, and the resume's clear-then-snapshot.
    assert '"_meta": null' in out
    v2 = out[out.index("ACP v2") :]
    expected = "TypeScript SDK" if node_ready() is None else "raw NDJSON client"
    assert expected in v2.splitlines()[0]


@pytest.mark.parametrize("client", ["python", "typescript"])
def test_demo_v2_with_each_client(client: str) -> None:
    if client == "typescript" and node_ready() is not None:
        pytest.skip(node_ready() or "")
    done = _demo("--protocol", "2", "--v2-client", client)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "ACP v1" not in done.stdout
    assert "v2 7. reopen" in done.stdout
    assert "demo passed" in done.stdout


def test_demo_on_the_sdk_runtime() -> None:
    """The same story against the agent on the official Python SDK: v1 on every release, v2 on
    the SDK 1.0 (where ``nox -s sdk_v2`` runs this), said to be skipped before it."""
    done = _demo("--runtime", "sdk")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "the agent on the sdk runtime" in " ".join(done.stdout.split())
    assert "v1 passed" in done.stdout
    assert "demo passed" in done.stdout
    v2 = _demo("--runtime", "sdk", "--protocol", "2", "--v2-client", "python")
    if sdk_speaks_v2():
        assert "v2 passed" in done.stdout
        assert v2.returncode == 0, f"{v2.stdout}\n{v2.stderr}"
        assert "raw NDJSON client" in v2.stdout
        assert "v2 7. reopen" in v2.stdout
    else:
        assert "ACP v2 skipped" in done.stdout
        assert v2.returncode == 1
        assert "agent-client-protocol 1.0" in " ".join(v2.stdout.split())
        assert v2.stdout.count("demo failed: ") == 1
        assert "Traceback" not in v2.stdout + v2.stderr


def test_demo_output_piped_shows_each_frame_whole_with_what_was_sent(tmp_path: Path) -> None:
    """Piped (no terminal, no COLUMNS), from another folder: nothing wraps inside a JSON frame,
    nothing is elided, each step shows the requests sent, and the TypeScript client is found
    from the checkout rather than the current directory."""
    done = _demo(cwd=tmp_path, columns=False)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    frames = [line.split("update  ", 1)[1] for line in out.splitlines() if "update  {" in line]
    assert len(frames) > 30
    for frame in frames:  # a wrapped line would not parse
        assert json.loads(frame)["sessionUpdate"] == "session_info_update"
    sent = [
        line.split("  ", 2)[2]
        for line in map(str.strip, out.splitlines())
        if line.startswith("sent")
    ]
    for params in sent:
        json.loads(params)
    assert any('"/meta rm scratch"' in line for line in sent)
    assert "more ..." not in out
    burst = out[out.index("7. burst racing a resume") : out.index("8. load with replay")]
    resumed = burst[burst.index("sent  session/resume") : burst.index("response to session/resume")]
    assert '"session_info_update"' in resumed  # the resync, shown
    for term in ("lifetime", "resync", "fenced", "<never told>"):
        assert term in out
    v2 = out[out.index("ACP v2") :].splitlines()[0]
    assert ("TypeScript SDK client" in v2) == (node_ready() is None), v2


def test_demo_help_and_bad_arguments() -> None:
    helped = _demo("--help")
    assert helped.returncode == 0
    assert "--protocol" in helped.stdout
    bad = _demo("--bogus")
    assert bad.returncode == 2
    assert "--bogus" in bad.stderr
