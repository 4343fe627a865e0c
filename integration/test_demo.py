"""``agent-meta demo`` end to end: a real subprocess, its own real clients and agent."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from integration.harness import REPO, agent_env, node_ready


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_meta", "demo", *args],
        env={**os.environ, **agent_env(), "COLUMNS": "200", "NO_COLOR": "1"},
        cwd=REPO,
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
    """The same story against the agent on the official Python SDK: v1 here (the demo's SDK,
    0.12); its v2 half needs the SDK 1.0, where ``nox -s sdk_v2`` plays it."""
    done = _demo("--runtime", "sdk")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "the agent on the sdk runtime" in " ".join(done.stdout.split())
    assert "v1 passed" in done.stdout
    assert "ACP v2 skipped" in done.stdout
    assert "demo passed" in done.stdout
    refused = _demo("--runtime", "sdk", "--protocol", "2")
    assert refused.returncode == 1
    assert "agent-client-protocol 1.0" in " ".join(refused.stdout.split())


def test_demo_help_and_bad_arguments() -> None:
    helped = _demo("--help")
    assert helped.returncode == 0
    assert "--protocol" in helped.stdout
    bad = _demo("--bogus")
    assert bad.returncode == 2
    assert "--bogus" in bad.stderr
