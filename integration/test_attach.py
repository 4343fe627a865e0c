"""``agent-meta attach URL``: a stdio client reaches a host serving ACP over a WebSocket.

The host is a real ``agent-meta agent --runtime sdk --listen`` process (``test_listen.py``'s
``server``); ``attach`` runs as the official Python SDK client's agent subprocess on stdio, as
an editor would start it. What the client folds through ``attach`` is what the host sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, cast

import acp
import pytest
from acp.schema import ClientCapabilities, Implementation

from integration.harness import (
    REPO,
    QuietClient,
    Transcript,
    agent_env,
    info_updates,
    run_async,
    text,
)
from integration.test_listen import TOKEN, Server, server

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's unstable routes

ATTACH = [sys.executable, "-m", "agent_meta", "attach"]


def attach_env(token: str = TOKEN) -> dict[str, str]:
    return {**agent_env(), "AGENT_META_TOKEN": token}


def attached_client(to: Server, record: Transcript) -> Any:
    """The official Python SDK client with ``agent-meta attach URL`` as its agent: an async
    context manager yielding the connection and the process."""
    return acp.spawn_agent_process(
        cast("acp.Client", QuietClient()),
        ATTACH[0],
        *ATTACH[1:],
        to.url,
        env=attach_env(),
        cwd=str(REPO),
        observers=[record.observe],
        transport_kwargs={"stderr": None},
    )


def test_a_stdio_client_drives_the_host_and_a_second_one_resumes_its_session(
    tmp_path: Path,
) -> None:
    """Two clients through ``attach``: the first makes a session and publishes; the second
    resumes it on the same host (its connections share the store: it takes the session over),
    and holds its title and ``_meta`` at the resume's response."""

    async def main() -> None:
        async with server(tmp_path / "sessions.sqlite") as host:
            first = Transcript()
            async with attached_client(host, first) as (conn, _process):
                await conn.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="attach-first", version="0"),
                )
                session = (await conn.new_session(cwd=str(REPO), mcp_servers=[])).session_id
                await conn.prompt(session_id=session, prompt=text("/title Shared\n/meta set k 1"))
                assert first.mirror.meta(session) == {"k": 1}
                second = Transcript()
                async with attached_client(host, second) as (other, _):
                    await other.initialize(
                        protocol_version=1,
                        client_capabilities=ClientCapabilities(),
                        client_info=Implementation(name="attach-second", version="0"),
                    )
                    await other.resume_session(session_id=session, cwd=str(REPO))
                    held = second.mirror.info(session)
                    assert held.title == "Shared"
                    assert second.mirror.meta(session) == {"k": 1}
                    assert info_updates(second.incoming())  # the resync came through attach

    run_async(main())


def attach_run(host: Server, lines: Sequence[object], token: str = TOKEN) -> Any:
    """``agent-meta attach URL`` with ``lines`` on its stdin, then its end: the completed
    process (run in a thread, so the host's loop goes on)."""
    return asyncio.to_thread(
        subprocess.run,
        [*ATTACH, host.url],
        input="".join(json.dumps(line) + "\n" for line in lines),
        env={**os.environ, **attach_env(token)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_wrong_token_is_refused_before_any_message_and_attach_exits_1() -> None:
    async def main() -> subprocess.CompletedProcess[str]:
        async with server() as host:
            initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
            initialize["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
            done: subprocess.CompletedProcess[str]
            done = await attach_run(host, [initialize], token="another-token-0123456789")
            return done

    done = run_async(main())
    assert done.returncode == 1
    assert done.stdout == ""
    assert "the host refused the connection: HTTP 401" in done.stderr


def test_the_end_of_stdin_still_gets_every_answer_of_the_host() -> None:
    """A client that writes its requests and closes stdin at once still reads every answer:
    ``attach`` waits for them before it closes the connection (and exits 0)."""
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": 1, "clientCapabilities": {}}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new",
         "params": {"cwd": str(REPO), "mcpServers": []}},
        {"jsonrpc": "2.0", "id": "two", "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}},
    ]  # fmt: skip

    async def main() -> subprocess.CompletedProcess[str]:
        async with server() as host:
            done: subprocess.CompletedProcess[str] = await attach_run(host, lines)
            return done

    done = run_async(main())
    assert done.returncode == 0, done.stderr
    received = [json.loads(line) for line in done.stdout.splitlines()]
    answered = {m["id"]: m for m in received if "method" not in m}
    assert {0, 1, "two", 3} <= answered.keys()
    assert "result" in answered[1]
    assert answered[3]["error"]["code"] == -32601
