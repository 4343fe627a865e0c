"""``agent-meta agent --runtime sdk --listen``: remote clients, a bearer token, replicas.

Each test starts real agent processes serving WebSocket and streamable HTTP (uvicorn, the SDK's
ASGI app under agent_meta's adapter) and drives them with the official Python SDK client over
WebSocket, or with a plain HTTP client where the point is the refusal itself. Replicas are two
such processes on one store file: a client may connect to either, and a session resumed on one
is taken over from the other (``docs/durability.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING, Any, cast

import acp
import acp.ws
import httpx
import pytest
from acp.schema import ClientCapabilities, Implementation

from integration.harness import (
    REPO,
    QuietClient,
    Transcript,
    agent_env,
    info_updates,
    run_async,
    session_updates,
    text,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's unstable routes

TOKEN = "integration-token-0123456789abcdef"
"""The bearer token the servers here are started with (a test value, not a secret)."""


class Server:
    """One ``agent-meta agent --runtime sdk --listen 127.0.0.1:0`` process."""

    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url

    @property
    def http_url(self) -> str:
        return self.url.replace("ws://", "http://", 1)


@contextlib.asynccontextmanager
async def server(store: Path | None = None) -> AsyncIterator[Server]:
    args = ["--store", str(store)] if store is not None else []
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_meta",
        "agent",
        "--runtime",
        "sdk",
        "--listen",
        "127.0.0.1:0",
        *args,
        cwd=REPO,
        env={**os.environ, **agent_env(), "AGENT_META_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        found = re.fullmatch(r"listening (ws://127\.0\.0\.1:\d+/acp)\n", line)
        assert found, f"unexpected first line {line!r}"
        yield Server(process, found.group(1))
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def client(to: Server, record: Transcript, token: str | None = TOKEN) -> AsyncIterator[Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    transport = await acp.ws.create_websocket_stream(to.url, headers=headers)
    conn = acp.connect_to_agent(
        cast("acp.Client", QuietClient()),
        transport,
        observers=[record.observe],
        use_unstable_protocol=True,
    )
    try:
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="agent-meta-listen", version="0"),
        )
        yield conn
    finally:
        await conn.close()


def stored_meta(store: Path, session_id: str) -> Any:
    conn = sqlite3.connect(store)
    try:
        row = conn.execute(
            "SELECT meta FROM agent_meta_lifetimes WHERE session_id = ?", (session_id,)
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else json.loads(row[0]) if row[0] else {}


def test_connections_without_the_token_are_refused_before_any_acp_message() -> None:
    async def scenario() -> tuple[list[int], str, bytes]:
        async with server() as running:
            statuses = []
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            async with httpx.AsyncClient(trust_env=False) as http:
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                    answer = await http.post(running.http_url, json=initialize, headers=headers)
                    statuses.append(answer.status_code)
            with pytest.raises(Exception, match="401"):
                await acp.ws.create_websocket_stream(running.url)
            bad = {"Authorization": "Bearer not-the-token-at-all-000"}
            with pytest.raises(Exception, match="401"):
                await acp.ws.create_websocket_stream(running.url, headers=bad)
            record = Transcript(protocol_version=1)
            async with client(running, record) as conn:  # the right token works
                created = await conn.new_session(cwd=str(REPO), mcp_servers=[])
                session_id = cast("str", created.session_id)
            running.process.send_signal(signal.SIGTERM)
            _, errors = await asyncio.wait_for(running.process.communicate(), 30)
            return statuses, session_id, errors

    statuses, session_id, errors = run_async(scenario())
    assert statuses == [401, 401, 401]
    assert re.fullmatch(r"sess-[0-9a-f]{32}", session_id)  # 128 random bits
    assert TOKEN.encode() not in errors


def test_sigterm_drains_and_exits_0(tmp_path: Path) -> None:
    """... and says nothing on stderr (uvicorn's deprecation notice of its ``websockets``
    implementation used to be printed at every start)."""
    store = tmp_path / "listen.sqlite"

    async def scenario() -> tuple[int, str, bytes]:
        async with server(store) as running:
            record = Transcript(protocol_version=1)
            async with client(running, record) as conn:
                session_id = cast(
                    "str", (await conn.new_session(cwd=str(REPO), mcp_servers=[])).session_id
                )
                await conn.prompt(session_id=session_id, prompt=text("/meta set kept 1"))
            running.process.send_signal(signal.SIGTERM)
            status = await asyncio.wait_for(running.process.wait(), 30)
            assert running.process.stderr is not None
            return status, session_id, await running.process.stderr.read()

    status, session_id, stderr = run_async(scenario())
    assert status == 0
    assert stderr == b""
    assert stored_meta(store, session_id) == {"kept": 1}


def test_a_replica_takes_a_session_over_and_the_former_holder_is_fenced(tmp_path: Path) -> None:
    """Two processes on one store file (replicas): a client resumes on B a session it made on
    A; B restores and resyncs it, and what A publishes for it afterwards reaches neither the
    store nor A's client."""
    store = tmp_path / "replicas.sqlite"

    async def scenario() -> tuple[str, Transcript, Transcript]:
        async with server(store) as a, server(store) as b:
            on_a, on_b = Transcript(protocol_version=1), Transcript(protocol_version=1)
            async with client(a, on_a) as first, client(b, on_b) as second:
                created = await first.new_session(cwd=str(REPO), mcp_servers=[])
                session_id = cast("str", created.session_id)
                await first.prompt(
                    session_id=session_id, prompt=text("/title Shared\n/meta set a 1")
                )
                start = on_b.mark()
                await second.load_session(cwd=str(REPO), session_id=session_id, mcp_servers=[])
                loaded = on_b.incoming(start)
                replayed = [
                    u
                    for u in session_updates(loaded)
                    if u.get("sessionUpdate") == "user_message_chunk"
                ]
                assert replayed, "B did not replay what A stored"
                assert info_updates(loaded)[-1] == {
                    "sessionUpdate": "session_info_update",
                    "title": "Shared",
                    "_meta": {"a": 1},
                }
                await second.prompt(session_id=session_id, prompt=text("/meta set b 2"))
                fenced_from = on_a.mark()
                # A no longer holds it: its prompt is refused before anything is stored.
                with pytest.raises(acp.RequestError) as refused:
                    await first.prompt(session_id=session_id, prompt=text("/meta set c 3"))
                assert refused.value.code == -32002
                after = info_updates(on_a.incoming(fenced_from))
                assert after == [], f"A's client got {after} after B took the session"
                return session_id, on_a, on_b

    session_id, on_a, on_b = run_async(scenario())
    assert on_b.mirror.meta(session_id) == {"a": 1, "b": 2}
    assert on_a.mirror.meta(session_id) == {"a": 1}
    assert stored_meta(store, session_id) == {"a": 1, "b": 2}


def test_resuming_an_unknown_session_takes_nothing_and_tells_nothing(tmp_path: Path) -> None:
    store = tmp_path / "listen.sqlite"

    async def scenario() -> str:
        async with server(store) as running:
            record = Transcript(protocol_version=1)
            async with client(running, record) as conn:
                with pytest.raises(acp.RequestError) as refused:
                    await conn.resume_session(session_id="sess-" + "0" * 32, cwd=str(REPO))
                return str(refused.value)

    message = run_async(scenario())
    assert "unknown session" in message
    assert TOKEN not in message
    conn = sqlite3.connect(store)
    try:
        rows = conn.execute("SELECT count(*) FROM agent_meta_lifetimes").fetchone()[0]
    finally:
        conn.close()
    assert rows == 0  # nothing was created or taken over


@pytest.mark.parametrize("where", ["in use", "no such host"])
def test_an_address_listen_cannot_take_is_one_stopped_line(where: str) -> None:
    """It used to be a 29-line traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        address = f"127.0.0.1:{port}" if where == "in use" else "no-such-host.invalid:0"
        done = subprocess.run(
            [sys.executable, "-m", "agent_meta", "agent", "--runtime", "sdk", "--listen", address],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={**os.environ, "AGENT_META_TOKEN": "a-token-for-this-test-only-0123456789"},
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f'agent-meta: stopped: ListenError("cannot listen on {address}: ')
    assert done.stdout == b""
