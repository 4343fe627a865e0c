"""``agent-meta proxy`` between acpx (a real ACP client) and the reference agent.

The same acpx prompt runs twice from the same saved state, once straight to the agent and once
through the proxy; acpx's raw NDJSON transcript (``--format json``) must be byte-identical. The
agent command is one wrapper script at one path, rewritten between the runs, so acpx sees the
same agent and the same session both times. Then the proxy's log is read back: it holds every
frame acpx saw, and its folded state for the session is the agent's own (asked afterwards, of
a fresh agent process on the same ``--store``, with ``session/list``). Both runtimes of the
agent (trio, and ``--runtime sdk``) are run.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_meta.tools._peer import AgentPeer
from integration.harness import agent_command
from integration.test_acpx import Acpx

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.usefixtures("node", "agent_runtime")

PROMPT = '/title Proxied\n/meta set a {"x":1,"gone":null}\n/meta set b 2\n/meta rm b\n/fail i-1 1'


def write_agent(path: Path, command: list[str]) -> None:
    path.write_text(f"#!/bin/sh\nexec {shlex.join(command)}\n")
    path.chmod(0o755)


def snapshot(acpx: Acpx, store: Path, into: Path) -> None:
    shutil.copytree(acpx.home, into / "home")
    shutil.copy2(store, into / "agent.sqlite")


def restore(acpx: Acpx, store: Path, source: Path) -> None:
    shutil.rmtree(acpx.home)
    shutil.copytree(source / "home", acpx.home)
    for stale in store.parent.glob(store.name + "*"):  # the database and its WAL files
        stale.unlink()
    shutil.copy2(source / "agent.sqlite", store)


async def agent_listing(store: Path, cwd: Path) -> dict[str, Any]:
    """What a fresh agent process on ``store`` says about its sessions (``session/list``)."""
    with trio.fail_after(30):
        async with AgentPeer.spawn(agent_command("--store", str(store)), answer_within=30) as peer:
            await peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            reply = await peer.request("session/list", {"cwd": str(cwd)})
    result: dict[str, Any] = reply.result
    return result


def test_acpx_sees_the_same_bytes_through_the_proxy(tmp_path: Path) -> None:
    acpx = Acpx(tmp_path)
    store = tmp_path / "agent.sqlite"
    wrapper = tmp_path / "agent"
    log = tmp_path / "proxy.ndjson"
    acpx.agent = str(wrapper)
    write_agent(wrapper, agent_command("--store", str(store)))
    acpx.run("sessions", "new")
    acpx.wait_for_queue_owner_exit()
    saved = tmp_path / "saved"
    saved.mkdir()
    snapshot(acpx, store, saved)

    direct = acpx.run("--format", "json", "prompt", PROMPT).stdout
    acpx.wait_for_queue_owner_exit()

    restore(acpx, store, saved)
    proxy = [sys.executable, "-m", "agent_meta", "proxy", "--log", str(log), "--"]
    write_agent(wrapper, [*proxy, *agent_command("--store", str(store))])
    proxied = acpx.run("--format", "json", "prompt", PROMPT).stdout
    acpx.wait_for_queue_owner_exit()

    assert '"session_info_update"' in direct
    assert proxied.encode() == direct.encode()

    records = [json.loads(text) for text in log.read_text().splitlines()]
    transcript = [line for line in proxied.splitlines() if line.startswith("{")]
    assert sorted(r["line"] for r in records) == sorted(transcript)
    from_agent = [r["line"] for r in records if r["from"] == "agent"]
    assert [line for line in transcript if line in set(from_agent)] == from_agent
    assert all(r["findings"] == [] for r in records)

    (session,) = {r["session"] for r in records if r["session"] is not None}
    folded = [r["state"] for r in records if r["session"] == session][-1]
    listing = trio.run(agent_listing, store, acpx.cwd)
    (entry,) = [e for e in listing["sessions"] if e["sessionId"] == session]
    assert folded["_meta"] == entry["_meta"]
    assert folded["title"] == entry["title"] == "Proxied"
    assert folded["_meta"]["a"] == {"x": 1, "gone": None}  # a nested null is data
