"""The SDK adapter over each transport the official SDK serves: stdio, WebSocket, streamable HTTP.

The agent (``tests/support/sdk_mini_agent.py``) runs as a real subprocess: on stdio under
``open_stdio_adapter``, and over WebSocket and HTTP as ``agent_meta.sdk.create_asgi_app`` served
by uvicorn. The official Python SDK client drives one story on each and its raw ``observers=``
record is checked: publications through the SDK are absorbed and sent as v1 full objects, a
clear through the adapter's handle reaches the wire, ``session/load`` and ``session/resume`` get
the resync after the replay and before their response (R4), nothing of a session follows its
``session/close`` response (R6), and a permission request travels through the owner and back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, cast

import acp
import acp.http
import acp.ws
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

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's unstable routes

AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent"]


@contextlib.asynccontextmanager
async def stdio_connection(record: Transcript, client: QuietClient) -> AsyncIterator[Any]:
    async with acp.spawn_agent_process(
        cast("acp.Client", client),
        AGENT[0],
        *AGENT[1:],
        "stdio",
        env=agent_env(),
        cwd=str(REPO),
        observers=[record.observe],
        use_unstable_protocol=True,
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        yield conn


@contextlib.asynccontextmanager
async def remote_connection(
    scheme: str, record: Transcript, client: QuietClient
) -> AsyncIterator[Any]:
    server = await asyncio.create_subprocess_exec(
        *AGENT, "asgi", cwd=REPO, env={**os.environ, **agent_env()}, stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        port = int(await server.stdout.readline())
        url = f"{scheme}://127.0.0.1:{port}/acp"
        if scheme == "ws":
            transport = await acp.ws.create_websocket_stream(url)
        else:
            transport = acp.http.create_http_stream(url)
        conn = acp.connect_to_agent(
            cast("acp.Client", client),
            transport,
            observers=[record.observe],
            use_unstable_protocol=True,
        )
        try:
            yield conn
        finally:
            await conn.close()
    finally:
        server.terminate()
        await server.wait()


def connection(transport: str, record: Transcript, client: QuietClient) -> Any:
    if transport == "stdio":
        return stdio_connection(record, client)
    return remote_connection("ws" if transport == "websocket" else "http", record, client)


async def story(transport: str) -> tuple[Transcript, dict[str, int]]:
    """One connection's story; returns the record and marks taken along the way."""
    record = Transcript(protocol_version=1)
    marks: dict[str, int] = {}
    async with connection(transport, record, QuietClient(answer="ok")) as conn:
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="agent-meta-transports", version="0"),
        )
        sid = (await conn.new_session(cwd=str(REPO), mcp_servers=[])).session_id
        for line in ("meta a 1", "meta b 2", "clear", "meta c 3", "title T", "hello", "ask"):
            await conn.prompt(session_id=sid, prompt=text(line))
        marks["load"] = record.mark()
        await conn.load_session(cwd=str(REPO), session_id=sid, mcp_servers=[])
        marks["resume"] = record.mark()
        await conn.resume_session(cwd=str(REPO), session_id=sid)
        marks["close"] = record.mark()
        await conn.close_session(session_id=sid)
        await conn.prompt(session_id=sid, prompt=text("meta late 1"))
        marks["end"] = record.mark()
    return record, marks


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        if message.get("method") == "session/update":
            out.append(message["params"]["update"]["sessionUpdate"])
        else:
            out.append(message.get("method") or "response")
    return out


@pytest.mark.parametrize("transport", ["stdio", "websocket", "http"])
def test_the_adapter_keeps_the_rules_over_every_sdk_transport(transport: str) -> None:
    record, marks = run_async(story(transport))
    everything = record.incoming()
    infos = info_updates(everything)
    final = {"sessionUpdate": "session_info_update", "title": "T", "_meta": {"c": 3}}

    # Absorbed SDK publications are v1 full objects; the handle's clear empties the object.
    assert infos[:5] == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "b": 2}},
        {"sessionUpdate": "session_info_update", "_meta": {}},
        {"sessionUpdate": "session_info_update", "_meta": {"c": 3}},
        final,
    ]
    # The permission request went out through the owner and its answer came back.
    replies = [u["content"]["text"] for u in session_updates(everything, "agent_message_chunk")]
    assert "selected ok" in replies

    # Load: the replay (the history's updates), then the resync with the state, then the response.
    load = record.between(marks["load"], marks["resume"])
    assert kinds(load)[-2:] == ["session_info_update", "response"]
    assert info_updates(load)[-1] == final
    assert kinds(load).count("agent_message_chunk") >= 1  # the replay came before the resync
    # Resume (no replay): the resync, then the response.
    resume = record.between(marks["resume"], marks["close"])
    assert kinds(resume) == ["session_info_update", "response"]
    assert info_updates(resume) == [final]

    # Close: its response, then nothing of the session (the late publication is fenced).
    after_close = record.between(marks["close"], marks["end"])
    assert kinds(after_close) == ["response", "response"]
    assert record.mirror.meta("s1") == {"c": 3}
