"""SDK 0.6's API generation, under the adapter and under ``agent-meta run``, over real pipes.

0.6 has no ``run_agent`` and camelCase handlers: agents build ``AgentSideConnection(factory,
writer, reader)`` on their stdio and wait forever (:mod:`tests.support.sdk06_mini_agent` is such
an agent). Its schema has no ``SessionInfoUpdate``, so the agent publishes through the
adapter's lifetime handle. The adapter's own seams are those of 0.8 (``sender_factory``, the
connection reading :class:`~agent_meta.sdk._streams.SeamReader`, the marking dispatcher), so
the rest of the suite's rules hold here through the same code; these tests are what runs a 0.6
agent itself. They run where the installed SDK is 0.6 (``nox -s sdk_matrix``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import trio

from agent_meta import OwnerOptions, open_asyncio_owner
from agent_meta.sdk import SdkAdapter, run_agent
from agent_meta.sdk._release import installed_release
from agent_meta.sdk._run import _listen, sdk_connection_class
from tests.agent_process import AgentProcess, stderr_of
from tests.sdk_pair import GUARD, RawClient, pipe_reader, pipe_writer, run_entry
from tests.test_run import ROOT, start, supervised
from tests.test_sdk_gate import EndingSource, answers

RELEASE = installed_release()

pytestmark = pytest.mark.skipif(
    RELEASE.runs_agent,
    reason=f"agent-client-protocol {RELEASE.version} has run_agent and snake_case handlers: "
    "SDK 0.6's API generation is not there (the rest of the suite runs on it)",
)

OWN = [sys.executable, "-m", "tests.support.sdk06_mini_agent", "own"]
"""The 0.6 agent as 0.6 agents start: ``AgentSideConnection`` on its stdio, then wait."""
OWN_PIPES = [sys.executable, "-m", "tests.support.sdk06_mini_agent", "own-pipes"]
"""The same connection on a pipe pair of its own."""

LOAD = {"cwd": "/tmp", "mcpServers": []}


def info(meta: Any) -> dict[str, Any]:
    return {"sessionUpdate": "session_info_update", "_meta": meta}


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"text": text, "type": "text"}}


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def test_a_06_agent_served_by_run_agent() -> None:
    """``agent_meta.sdk.run_agent(factory, writer, reader)`` in place of the agent's own
    ``AgentSideConnection(factory, writer, reader)`` and its wait: publications are whole v1
    objects (a clear is ``{}``), the load's replay is followed by the resync right before the
    response, and it returns once the client's input has ended."""
    from agent_meta.sdk import adapter_of
    from tests.support.sdk06_mini_agent import Agent06

    seen: list[Any] = []

    def factory(conn: Any) -> Agent06:
        seen.append(conn)
        return Agent06(conn)

    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await run_agent(factory, writer, reader)

    async def scenario(client: RawClient) -> None:
        initialized = await client.call("initialize", {"protocolVersion": 1})
        # The owner adds the client-set title's capability, in both shapes (R13).
        titles: dict[str, object] = {"setTitle": {}, "title": {}}
        assert initialized["result"]["agentCapabilities"] == {
            "loadSession": True,
            "sessionCapabilities": titles,
        }
        sid = (await client.call("session/new", LOAD))["result"]["sessionId"]
        for text in ("meta a 1", "hello", "clear", "meta b 2"):
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
            answer = await client.call("session/prompt", prompt)
            assert answer["result"] == {"stopReason": "end_turn"}, answer
        assert (await adapter_of(seen[0])).lifetime(sid).snapshot().meta == {"b": 2}
        before = len(client.messages)
        loaded = await client.call("session/load", {"sessionId": sid, **LOAD})
        assert loaded["result"] == {}
        assert updates(client.messages[before:]) == [chunk("hello"), info({"b": 2})]

    client = asyncio.run(run_entry(serve, scenario))  # returns: run_agent returned at the end
    assert updates(client.messages) == [
        info({"a": 1}),
        chunk("hello"),
        info({}),
        info({"b": 2}),
        chunk("hello"),  # the load's replay
        info({"b": 2}),  # the resync, last before the load's response
    ]


def test_bad_input_and_early_requests_are_answered_before_the_06_sdk() -> None:
    """The adapter answers what ACP answers before any handler runs (0.6's own reader skips a
    line that is not JSON, and serves a request before ``initialize``)."""
    from tests.support.sdk06_mini_agent import Agent06

    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await run_agent(Agent06, writer, reader)

    async def scenario(client: RawClient) -> None:
        await client.send_line(b"not json")
        refused = await client.read_until(lambda m: "error" in m)
        assert refused["error"]["code"] == -32700
        early = await client.call("session/new", LOAD)
        assert early["error"]["code"] == -32600  # before initialize: nothing is created
        assert "result" in await client.call("initialize", {"protocolVersion": 1})
        assert (await client.call("session/new", LOAD))["result"] == {"sessionId": "s1"}

    asyncio.run(run_entry(serve, scenario))


def test_a_cancel_request_ends_a_running_06_prompt() -> None:
    """0.6's connection ignores ``$/cancel_request``; the adapter passes one for a running
    prompt on as that session's ``session/cancel``, so the turn ends ``cancelled``."""
    from tests.support.sdk06_mini_agent import Agent06

    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await run_agent(Agent06, writer, reader)

    async def scenario(client: RawClient) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        sid = (await client.call("session/new", LOAD))["result"]["sessionId"]
        wait = {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
        await client.send({"id": 1, "method": "session/prompt", "params": wait})
        await client.send({"method": "$/cancel_request", "params": {"requestId": 1}})
        answered = await client.read_until(lambda m: m.get("id") == 1)
        assert answered["result"] == {"stopReason": "cancelled"}

    asyncio.run(run_entry(serve, scenario))


def test_a_06_prompt_running_when_the_input_ends_is_answered_before_the_connection_closes() -> None:
    """On 0.6 ``run_agent`` builds the connection and closes it once the SDK has been handed
    the end of the input (0.6 alone would cancel the running prompt, unanswered); the adapter
    hands the end on only once the prompt has been answered."""
    from tests.support.sdk06_mini_agent import Agent06

    class EndAware(Agent06):
        async def prompt(self, params: Any) -> Any:
            await source.ended.wait()  # the input has ended while this prompt runs
            for _ in range(3):  # work that takes a few turns of the loop, as any prompt does
                await asyncio.sleep(0)
            return await super().prompt(params)

    source = EndingSource()

    async def scenario() -> list[dict[str, Any]]:
        to_client_r, to_client_w = os.pipe()
        opened: list[asyncio.BaseTransport] = []
        writer = await pipe_writer(to_client_w)  # the owner's; the client only reads
        client = RawClient(await pipe_reader(to_client_r, opened), writer)
        async with asyncio.timeout(GUARD):
            async with open_asyncio_owner(writer, OwnerOptions(protocol_version=1)) as owner:
                adapter = SdkAdapter(owner, source, writer=writer)
                served = asyncio.create_task(
                    _listen(sdk_connection_class(), EndAware, adapter.connection_kwargs())
                )
                prompt = {"sessionId": "s1", "prompt": [{"type": "text", "text": "hello"}]}
                for request_id, method, params in (
                    (1, "initialize", {"protocolVersion": 1}),
                    (2, "session/new", LOAD),
                    (3, "session/prompt", prompt),
                ):
                    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
                    source.queue.put_nowait({**message, "params": params})
                    if request_id < 3:
                        await client.read_until(answers(request_id))
                source.queue.put_nowait(None)  # the input ends while the prompt runs
                await served
            writer.close()
            while await client.read_one() is not None:
                pass
        for transport in opened:
            transport.close()
        return client.messages

    messages = asyncio.run(scenario())
    assert messages[-2:] == [
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s1", "update": chunk("hello")},
        },
        {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}},
    ]


async def test_a_06_agent_under_agent_meta_run_is_owned() -> None:
    """The agent unchanged, building its connection on its stdio: owned. Like the agent alone
    (and box-agent), it waits forever once its input has ended; SIGTERM ends it, as alone."""
    async with supervised(*OWN) as agent:
        sid = await start(agent)
        for text in ("meta a 1", "hello", "clear", "meta b 2"):
            answer = await agent.prompt(sid, text)
            assert answer.get("result") == {"stopReason": "end_turn"}, answer
        before = len(agent.messages)
        loaded = await agent.call("session/load", {"sessionId": sid, **LOAD})
        assert loaded["result"] == {}
        assert updates(agent.messages[before:]) == [chunk("hello"), info({"b": 2})]
        await agent.stdin.aclose()
        agent.process.send_signal(signal.SIGTERM)
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 128 + signal.SIGTERM, errors
    assert "agent-meta run:" not in errors, errors
    assert updates(agent.messages)[:4] == [info({"a": 1}), chunk("hello"), info({}), info({"b": 2})]


async def test_the_06_agent_alone_cannot_publish() -> None:
    """The baseline: without agent_meta the agent has no adapter, and 0.6's schema no
    ``SessionInfoUpdate``: its ``meta`` prompt is answered with an error."""
    process = await trio.lowlevel.open_process(
        OWN, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    alone = AgentProcess(process)
    try:
        with trio.fail_after(60):
            sid = await start(alone)
            assert "error" in await alone.prompt(sid, "meta a 1")
            assert (await alone.prompt(sid, "hello"))["result"] == {"stopReason": "end_turn"}
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
            for stream in (process.stdin, process.stdout):
                assert stream is not None
                await stream.aclose()


async def test_a_06_connection_on_streams_that_are_not_stdio_is_refused() -> None:
    async with supervised(*OWN_PIPES) as agent:
        status = await agent.process.wait()
        errors = await stderr_of(agent)
    assert status == 2, errors
    assert (
        "the agent gave AgentSideConnection an input_stream writing to a pipe, not to its stdout"
    ) in errors, errors
