"""What the adapter answers before the SDK's own routing and validation, on a real SDK agent.

These are the places where the SDK on its own answers differently from agent_meta's own
connection (and from ACP): a request before ``initialize``, a batch, ``session/new`` without
``mcpServers``, ``$/cancel_request`` on releases that ignore it, a prompt still running when
the client's input ends. Each test runs the installed SDK release behind the adapter.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any, cast

import acp
import pytest

from agent_meta import OwnerOptions, open_asyncio_owner
from agent_meta.sdk import SdkAdapter
from agent_meta.sdk._release import installed_release
from tests.sdk_pair import GUARD, RawClient, pipe_reader, pipe_writer, run
from tests.sdk_release import needs_run_agent
from tests.support.sdk_mini_agent import MiniAgent

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),  # the SDK warns on unstable routes
    needs_run_agent,
]

Message = dict[str, Any]


class WaitingAgent(MiniAgent):
    """``wait`` prompts run until :attr:`go` is set, or until ``session/cancel`` ends them."""

    def __init__(self, adapter: SdkAdapter | None) -> None:
        super().__init__(adapter)
        self.go = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled: list[str] = []

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        if prompt[0].text != "wait":
            return await super().prompt(prompt, session_id, **kwargs)
        self.started.set()
        await self.go.wait()
        reason = "cancelled" if session_id in self.cancelled else "end_turn"
        return acp.schema.PromptResponse(stop_reason=reason)

    async def cancel(self, session_id: str, **_: Any) -> None:
        self.cancelled.append(session_id)
        self.go.set()


def errors(client: RawClient) -> list[Message]:
    return [m for m in client.messages if isinstance(m, dict) and "error" in m]


def test_a_request_before_initialize_is_refused_and_creates_nothing() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        early = await client.call("session/new", {"cwd": "/", "mcpServers": []})
        assert early["error"] == {"code": -32600, "message": "'session/new' before 'initialize'"}
        await client.call("initialize", {"protocolVersion": 1})
        created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
        assert created["result"]["sessionId"] == "s1"  # the early one made no session

    _, adapter = asyncio.run(run(MiniAgent, scenario))
    assert adapter.statistics().refused_requests == 1


def test_session_new_without_mcp_servers_is_served() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        created = await client.call("session/new", {"cwd": "/"})
        assert created["result"]["sessionId"] == "s1"

    _, adapter = asyncio.run(run(MiniAgent, scenario))
    assert adapter.statistics().completed_params == 1


async def read_array(client: RawClient) -> list[Message]:
    while True:
        message: Any = await client.read_one()
        assert message is not None, "the agent's output ended"
        if isinstance(message, list):
            return message


def test_a_batch_is_served_entry_by_entry_and_answered_as_one_array() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/"}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s9"}},
            {"jsonrpc": "2.0", "id": 3, "method": 7},
        ]
        await client.send_line(json.dumps(batch).encode())
        answer = await read_array(client)
        by_id = {entry["id"]: entry for entry in answer}
        assert set(by_id) == {1, 2, None}
        assert {by_id[1]["result"]["sessionId"], by_id[2]["result"]["sessionId"]} == {"s1", "s2"}
        assert by_id[None]["error"]["code"] == -32600
        # Both sessions' lifetimes opened as their responses were queued.
        assert adapter.owner.has_lifetime("s1")
        assert adapter.owner.has_lifetime("s2")

    client, adapter = asyncio.run(run(MiniAgent, scenario))
    assert adapter.statistics().batches == 1
    assert sum(isinstance(m, list) for m in client.messages) == 1


def test_an_empty_batch_is_one_invalid_request() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.send_line(b"[]")
        refused = await client.read_until(lambda m: isinstance(m, dict) and "error" in m)
        assert (refused["id"], refused["error"]["code"]) == (None, -32600)

    asyncio.run(run(MiniAgent, scenario))


async def start_waiting_prompt(client: RawClient, agent: WaitingAgent) -> str:
    await client.call("initialize", {"protocolVersion": 1})
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]}
    await client.send({"id": 50, "method": "session/prompt", "params": params})
    await agent.started.wait()
    return session_id


def collecting(agents: list[WaitingAgent]) -> Callable[[SdkAdapter], WaitingAgent]:
    """A factory of :class:`WaitingAgent` that keeps each agent it makes in ``agents``."""

    def make(adapter: SdkAdapter) -> WaitingAgent:
        agents.append(WaitingAgent(adapter))
        return agents[-1]

    return make


def test_a_cancel_request_ends_a_running_prompt_as_the_release_can() -> None:
    agents: list[WaitingAgent] = []
    make = collecting(agents)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start_waiting_prompt(client, agents[0])
        await client.send({"method": "$/cancel_request", "params": {"requestId": 50}})
        answer = await client.read_until(lambda m: m.get("id") == 50)
        if installed_release().cancels_requests:
            # The SDK cancels the handler itself, as ACP's $/cancel_request says.
            assert answer["error"]["code"] == -32800
        else:
            # The SDK ignores it: the adapter asked the agent to cancel the session's turn.
            assert answer["result"] == {"stopReason": "cancelled"}
            assert agents[0].cancelled == ["s1"]

    _, adapter = asyncio.run(run(make, scenario))
    expected = 0 if installed_release().cancels_requests else 1
    assert adapter.statistics().translated_cancels == expected


def test_a_second_request_with_the_id_of_a_running_one_is_refused() -> None:
    agents: list[WaitingAgent] = []
    make = collecting(agents)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start_waiting_prompt(client, agents[0])
        await client.send({"id": 50, "method": "session/list", "params": {}})
        refused = await client.read_until(lambda m: m.get("id") == 50)
        assert refused["error"]["message"] == "request id 50 is already in flight"
        agents[0].go.set()
        answered = await client.read_until(lambda m: m.get("id") == 50)
        assert answered["result"] == {"stopReason": "end_turn"}

    asyncio.run(run(make, scenario))


def answers(request_id: int) -> Callable[[Message], bool]:
    def done(message: Message) -> bool:
        return message.get("id") == request_id and "method" not in message

    return done


class EndingSource:
    """A message source that says when it reports the end of the input."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.ended = asyncio.Event()

    async def receive(self) -> Message | None:
        message = await self.queue.get()
        if message is None:
            self.ended.set()
        return message

    async def close(self) -> None:
        pass


def test_a_prompt_running_when_the_input_ends_is_still_answered() -> None:
    """The SDK alone stops at the end of the input and cancels the prompt, unanswered; the
    adapter hands it the end only once the prompt has been answered."""

    class EndAwareAgent(WaitingAgent):
        async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
            await source.ended.wait()  # the input has ended while this prompt runs
            for _ in range(3):  # work that takes a few turns of the loop, as any real prompt does
                await asyncio.sleep(0)
            return acp.schema.PromptResponse(stop_reason="end_turn")

    source = EndingSource()

    async def scenario() -> list[Message]:
        to_client_r, to_client_w = os.pipe()
        opened: list[asyncio.BaseTransport] = []
        reader = await pipe_reader(to_client_r, opened)
        writer = await pipe_writer(to_client_w)
        client = RawClient(reader, writer)
        async with asyncio.timeout(GUARD):
            async with open_asyncio_owner(writer, OwnerOptions(protocol_version=1)) as owner:
                adapter = SdkAdapter(owner, source, writer=writer)
                agent = EndAwareAgent(adapter)
                serving = acp.run_agent(cast("acp.Agent", agent), **adapter.connection_kwargs())
                served = asyncio.create_task(serving)
                prompt = [{"type": "text", "text": "x"}]
                for request_id, method, params in (
                    (1, "initialize", {"protocolVersion": 1}),
                    (2, "session/new", {"cwd": "/", "mcpServers": []}),
                    (3, "session/prompt", {"sessionId": "s1", "prompt": prompt}),
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
    assert [m.get("id") for m in messages if "method" not in m] == [1, 2, 3]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
