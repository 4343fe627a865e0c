"""``@agentclientprotocol/codex-acp`` 2.6.0 under ``agent-meta own``, offline, with real clients.

codex-acp is the real Codex ACP agent from npm (``integration/codex``, ``npm ci``); its model
provider is a fake OpenAI Responses server on loopback (``integration/codex/fake_responses.py``).
On ACP v1 it sends every publication's partial ``_meta`` as it is (``{"codex": ...}``, then
``{"jetbrains": ...}`` for a JetBrains AIR client), so a v1 client it talks to directly keeps
only the last; on v2 it resyncs every resume itself (``_meta: null`` with the title, then its
snapshot). Under ``own`` the official Python SDK client (v1) and the TypeScript SDK client (v1
and v2) must hold every key, get the resync exactly once, and hear nothing of a closed session.

Prompts carry ``NOTITLE`` (the fake refuses the title request): a generated title makes codex
hold its next load or resume for five seconds.
"""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import acp
import pytest
from acp.schema import ClientCapabilities, Implementation

from agent_meta.testing import ClientMirror
from integration.codex import codex_command, codex_env, codex_home, codex_ready, fake_model_server
from integration.harness import (
    LINE_LIMIT,
    QuietClient,
    Transcript,
    info_updates,
    node_ready,
    run_async,
    run_node_client,
    text,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

AIR = {"jetbrains": {"air": {"version": 1, "capabilities": ["sessionFailure"]}}}
"""What JetBrains AIR announces in its client capabilities' ``_meta``: codex-acp then publishes
``jetbrains.air`` (goal, sessionFailure) next to ``codex``."""


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a codex-acp child: its CODEX_HOME, the fake server's port."""
    reason = codex_ready()
    if reason is not None:
        pytest.skip(reason)
    with fake_model_server() as port:
        # One retry: a failing turn publishes a "Reconnecting... 1/1" failure first.
        yield codex_env(codex_home(tmp_path_factory.mktemp("codex"), port, stream_retries=1))


def own_codex() -> list[str]:
    return [sys.executable, "-m", "agent_meta", "own", "--", *codex_command()]


def keys(update: dict[str, Any]) -> set[str]:
    meta = update.get("_meta")
    return set(meta) if isinstance(meta, dict) else set()


@asynccontextmanager
async def python_sdk(
    command: list[str], env: dict[str, str], cwd: Path
) -> AsyncIterator[tuple[Any, Transcript]]:
    """The official Python SDK client (v1, announcing AIR) over ``command``."""
    wire = Transcript()
    async with acp.spawn_agent_process(
        cast("acp.Client", QuietClient()),
        command[0],
        *command[1:],
        env=env,
        cwd=str(cwd),
        observers=[wire.observe],
        transport_kwargs={"stderr": None, "limit": LINE_LIMIT},
    ) as (conn, _process):
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(field_meta=AIR),
            client_info=Implementation(name="agent-meta-integration", version="0"),
        )
        yield conn, wire


async def failing_turn(conn: Any, wire: Transcript, cwd: Path) -> str:
    session: str = (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id
    await conn.prompt(session_id=session, prompt=text("please FAIL now NOTITLE"))
    return session


def test_python_sdk_v1_keeps_every_key_and_is_resynced_at_load(
    codex: dict[str, str], tmp_path: Path
) -> None:
    async def alone() -> tuple[Transcript, str]:
        async with python_sdk(codex_command(), codex, tmp_path) as (conn, wire):
            return wire, await failing_turn(conn, wire, tmp_path)

    async def owned() -> tuple[Transcript, str, int, int]:
        async with python_sdk(own_codex(), codex, tmp_path) as (conn, wire):
            session = await failing_turn(conn, wire, tmp_path)
            held = wire.mark()
            await conn.load_session(session_id=session, cwd=str(tmp_path), mcp_servers=[])
            loaded = wire.mark()  # the observer saw the response: everything before it too
            await conn.close_session(session_id=session)
            await conn.list_sessions()
            return wire, session, held, loaded

    wire, session = run_async(alone())
    assert set(wire.mirror.meta(session) or {}) == {"codex"}  # the break: jetbrains was wiped

    wire, session, held, loaded = run_async(owned())
    live = info_updates(wire.incoming()[:held])
    assert any(keys(update) == {"codex", "jetbrains"} for update in live), live
    assert set(wire.mirror.meta(session) or {}) == {"codex", "jetbrains"}
    # At the load response the client holds the owner's state: the whole object (the title,
    # which no live update carried after a failed turn, came with the replay).
    window = wire.between(held, loaded)
    assert keys(info_updates(window)[-1]) == {"codex", "jetbrains"}
    assert wire.mirror.info(session).title == "please FAIL now NOTITLE"
    closed = wire.response_position("session/close", since=loaded)
    after = wire.incoming(loaded)[closed + 1 :]
    assert [m for m in after if (m.get("params") or {}).get("sessionId") == session] == []


def first_session(run: Any) -> str:
    created = [line for line in run.lines if line["type"] == "response" and line["op"] == "new"]
    session: str = created[0]["result"]["sessionId"]
    return session


def _typescript(steps: list[dict[str, Any]], env: dict[str, str], version: int) -> Any:
    reason = node_ready()
    if reason is not None:
        pytest.skip(reason)
    return run_node_client(
        "steps",
        agent=own_codex(),
        steps=steps,
        protocol_version=version,
        env={**env, "AGENT_META_CLIENT_META": json.dumps(AIR)},
    )


def test_typescript_v2_gets_codexs_own_resync_once_and_nothing_after_close(
    codex: dict[str, str],
) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "new"},
        {"op": "prompt", "text": "please FAIL now NOTITLE"},
        {"op": "resume", "replay": True},
        {"op": "resume"},
        {"op": "close"},
        {"op": "new"},  # a round trip after the close: anything late has arrived by then
    ]
    run = _typescript(steps, codex, 2)
    session = first_session(run)
    for index in (2, 3):
        window = info_updates(run.step_received(index))
        clears = [u for u in window if "_meta" in u and u["_meta"] is None]
        assert len(clears) == 1, window  # codex's own; own adds no second one
        snapshot = [u for u in window[window.index(clears[0]) :] if keys(u)]
        assert keys(snapshot[-1]) == {"codex", "jetbrains"}, window
    after_close = run.step_received(5)
    assert [m for m in after_close if (m.get("params") or {}).get("sessionId") == session] == []


def test_typescript_v1_keeps_every_key(codex: dict[str, str]) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "new"},
        {"op": "prompt", "text": "please FAIL now NOTITLE"},
    ]
    run = _typescript(steps, codex, 1)
    session = first_session(run)
    sent = [u for u in info_updates(run.received()) if keys(u)]
    assert keys(sent[-1]) == {"codex", "jetbrains"}, sent
    handled = [p["update"] for p in run.handled_updates() if p["sessionId"] == session]
    assert keys([u for u in handled if keys(u)][-1]) == {"codex", "jetbrains"}


def test_typescript_v2_a_client_set_title_is_forwarded_and_kept(codex: dict[str, str]) -> None:
    """codex-acp serves session/set_title (the SDK's unstable shape): ``own`` forwards it,
    keeps the title as the client's, and lists it."""
    steps: list[dict[str, Any]] = [
        {"op": "new"},
        {"op": "prompt", "text": "hello NOTITLE"},
        {"op": "set-title", "title": "Mine"},
        {"op": "prompt", "text": "second turn"},
        {"op": "resume", "replay": True},
        {"op": "list"},
    ]
    run = _typescript(steps, codex, 2)
    session = first_session(run)
    mirror = ClientMirror(protocol_version=2)
    for message in run.received():
        mirror.feed(message)
    assert mirror.info(session).title == "Mine"
    after = [u.get("title") for u in info_updates(run.step_received(3)) if "title" in u]
    assert set(after) <= {"Mine"}, after  # no generated title reached the client
    listed = next(line for line in run.lines if line["type"] == "response" and line["op"] == "list")
    entries = {e["sessionId"]: e for e in listed["result"]["sessions"]}
    assert entries[session]["title"] == "Mine"
