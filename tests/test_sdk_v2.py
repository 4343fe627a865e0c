"""The adapter under the SDK 1.0's ACP v2 side and its protocol router (``acp.experimental``).

A small agent written on ``acp.experimental.v2`` is served by ``agent_meta.sdk.run_v2_agent``
(and, next to a v1 agent, by ``agent_meta.sdk.serve_router``) over OS pipes; a raw client
reads the wire. Skipped on SDK releases without a v2 side (before 1.0).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("acp.experimental.v2", reason="this SDK release has no ACP v2 side")

from acp.experimental import v2
from acp.experimental.v2 import schema as s

from agent_meta.sdk import run_v2_agent, serve_router
from agent_meta.sdk._release import installed_release
from tests.sdk_pair import RawClient, run_entry
from tests.support.sdk_mini_agent import MiniAgent
from tests.support.sdk_v2_mini_agent import V2Agent

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

Message = dict[str, Any]

V2_INIT = {"protocolVersion": 2, "info": {"name": "raw", "version": "1"}, "capabilities": {}}


def serving(
    agent: V2Agent,
) -> Callable[[asyncio.StreamWriter, asyncio.StreamReader], Coroutine[Any, Any, None]]:
    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await run_v2_agent(agent, writer, reader)

    return serve


async def start(client: RawClient) -> str:
    answer = await client.call("initialize", V2_INIT)
    assert answer["result"]["protocolVersion"] == 2
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    return session_id


async def say(client: RawClient, session_id: str, text: str) -> Message:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return await client.call("session/prompt", params)


def test_v2_updates_are_absorbed_as_patches_with_null_and_omitted_kept_apart() -> None:
    agent = V2Agent()

    async def scenario(client: RawClient) -> None:
        sid = await start(client)
        await say(client, sid, 'meta {"a": 1, "b": {"x": 1}}')
        await say(client, sid, 'meta {"b": null}')
        await say(client, sid, "title T")
        await say(client, sid, "meta null")
        await say(client, sid, "untitle")
        assert agent.adapter is not None
        snapshot = agent.adapter.lifetime(sid).snapshot()
        assert (snapshot.meta, snapshot.title) == (None, None)

    client = asyncio.run(run_entry(serving(agent), scenario))
    # v2 frames are the patches as published: null clears, an omitted field is left alone.
    assert client.info_updates("s1") == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "b": {"x": 1}}},
        {"sessionUpdate": "session_info_update", "_meta": {"b": None}},
        {"sessionUpdate": "session_info_update", "title": "T"},
        {"sessionUpdate": "session_info_update", "_meta": None},
        {"sessionUpdate": "session_info_update", "title": None},
    ]
    assert agent.adapter is not None
    stats = agent.adapter.statistics()
    assert (stats.absorbed_updates, stats.passed_through_updates) == (5, 0)
    assert agent.adapter.owner.protocol_version == 2


@pytest.mark.parametrize(("asked", "answered"), [(2, 2), (3, 2), (65535, 2)])
def test_a_version_at_or_above_2_is_answered_with_2(asked: int, answered: int) -> None:
    async def scenario(client: RawClient) -> None:
        answer = await client.call("initialize", {**V2_INIT, "protocolVersion": asked})
        assert answer["result"]["protocolVersion"] == answered

    asyncio.run(run_entry(serving(V2Agent()), scenario))


@pytest.mark.parametrize("asked", [0, 1])
def test_a_version_below_2_is_answered_32022_and_initialize_can_be_retried(asked: int) -> None:
    async def scenario(client: RawClient) -> None:
        refused = await client.call("initialize", {**V2_INIT, "protocolVersion": asked})
        assert refused["error"] == {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"requested": asked, "supported": [2]},
        }
        await start(client)

    asyncio.run(run_entry(serving(V2Agent()), scenario))


def frames_before(client: RawClient, request_id: int) -> list[Message]:
    """The session updates written before the response to ``request_id``, after the
    previous response."""
    found: list[Message] = []
    for message in client.messages:
        if "method" not in message:
            if message.get("id") == request_id:
                return found
            found = []
        elif message.get("method") == "session/update":
            found.append(message["params"]["update"])
    raise AssertionError(f"no response to {request_id}")


def test_a_resume_without_replay_from_is_live_and_resyncs_before_its_answer() -> None:
    agent = V2Agent()

    async def scenario(client: RawClient) -> None:
        sid = await start(client)
        await say(client, sid, 'meta {"a": 1}')
        await say(client, sid, 'meta {"a": null, "b": 2}')
        resumed = await client.call("session/resume", {"sessionId": sid, "cwd": "/"})
        assert resumed["result"] == {}
        assert agent.adapter is not None
        assert agent.adapter.lifetime(sid).snapshot().meta == {"b": 2, "resumed": 1}

    client = asyncio.run(run_entry(serving(agent), scenario))
    resume_id = client.messages[-1]["id"]
    assert frames_before(client, resume_id) == [
        {"sessionUpdate": "session_info_update", "_meta": {"resumed": 1}},  # live: a patch
        {"sessionUpdate": "state_update", "state": "idle"},
        {"sessionUpdate": "session_info_update", "_meta": None},  # the resync: clear ...
        {"sessionUpdate": "session_info_update", "_meta": {"b": 2, "resumed": 1}},  # ... state
    ]
    assert agent.adapter is not None
    assert agent.adapter.statistics().replayed_updates == 0


def test_a_resume_with_replay_from_replays_without_bringing_removed_keys_back() -> None:
    agent = V2Agent()

    async def scenario(client: RawClient) -> None:
        sid = await start(client)
        await say(client, sid, 'meta {"a": 1}')
        await say(client, sid, 'meta {"a": null, "b": 2}')
        params = {"sessionId": sid, "cwd": "/", "replayFrom": {"type": "start"}}
        resumed = await client.call("session/resume", params)
        assert resumed["result"] == {}
        assert agent.adapter is not None
        # The replayed {"a": 1} did not come back.
        assert agent.adapter.lifetime(sid).snapshot().meta == {"b": 2}

    client = asyncio.run(run_entry(serving(agent), scenario))
    resume_id = client.messages[-1]["id"]
    replay, resync = frames_before(client, resume_id)[:2], frames_before(client, resume_id)[-2:]
    assert replay == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
        {"sessionUpdate": "session_info_update", "_meta": {"a": None, "b": 2}},
    ]
    assert resync == [
        {"sessionUpdate": "session_info_update", "_meta": None},
        {"sessionUpdate": "session_info_update", "_meta": {"b": 2}},
    ]
    assert agent.adapter is not None
    assert agent.adapter.statistics().replayed_updates == 2


HISTORY = ['meta {"a": 1}', 'meta {"b": 2}', "meta null", 'meta {"c": 3}']
"""Issue 27 (c): a session's history whose state is ``{"c": 3}``."""


class Interleaving(V2Agent):
    """Knows session ``s1`` (its history, as a restarted agent has it; the adapter knows
    nothing of it) and replays it on a resume. Two resumes replay in the issue's order: the
    first replays ``a``, ``b`` and the clear, the second then replays ``a``, the first ends
    (``c``) and is answered, and only then does the second replay the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts["s1"] = list(HISTORY)
        self.first_cleared = asyncio.Event()
        self.second_started = asyncio.Event()
        self.first_answered = asyncio.Event()  # set by the client, once it has read it

    async def resume_session(
        self, session_id: str, cwd: str, replay_from: Any = None, **kw: Any
    ) -> Any:
        self.resumes += 1
        first = self.resumes == 1
        if not first:
            await self.first_cleared.wait()
        for step, text in enumerate(self.prompts[session_id]):
            if first and step == 3:
                self.first_cleared.set()
                await self.second_started.wait()
            if not first and step == 1:
                self.second_started.set()
                await self.first_answered.wait()
            patch = json.loads(text.removeprefix("meta "))
            await self.conn.session_update(session_id, s.SessionInfoUpdate(field_meta=patch))
        await self.conn.session_update(session_id, s.IdleSessionStateUpdate())
        return s.ResumeSessionResponse()


def test_two_resumes_replaying_at_once_are_each_resynced_to_the_true_state() -> None:
    """Issue 27 (c): two resumes of one session, opened with nothing known, replay its
    history at once. Neither replay is folded into the state while they run: each response is
    preceded by the resync to ``{"c": 3}``, and the owner holds ``{"c": 3}``. Both resyncs used
    to carry ``{"a": 1, "c": 3}`` (both replays folded into one state, interleaved; then the
    second's last patches were taken as replay of a state that held them)."""
    agent = Interleaving()

    async def scenario(client: RawClient) -> None:
        await client.call("initialize", V2_INIT)
        params = {"sessionId": "s1", "cwd": "/", "replayFrom": {"type": "start"}}
        await client.send({"id": 1, "method": "session/resume", "params": params})
        await client.send({"id": 2, "method": "session/resume", "params": params})
        await client.read_until(lambda m: m.get("id") == 1 and "method" not in m)
        agent.first_answered.set()
        await client.read_until(lambda m: m.get("id") == 2 and "method" not in m)
        assert agent.adapter is not None
        assert agent.adapter.lifetime("s1").snapshot().meta == {"c": 3}

    client = asyncio.run(run_entry(serving(agent), scenario))
    for request_id in (1, 2):
        assert frames_before(client, request_id)[-2:] == [
            {"sessionUpdate": "session_info_update", "_meta": None},
            {"sessionUpdate": "session_info_update", "_meta": {"c": 3}},
        ], request_id


def test_close_fences_what_the_agent_sends_after_it() -> None:
    agent = V2Agent()

    async def scenario(client: RawClient) -> None:
        sid = await start(client)
        other = (await client.call("session/new", {"cwd": "/", "mcpServers": []}))["result"]
        await say(client, sid, "late")
        closed = await client.call("session/close", {"sessionId": sid})
        assert closed["result"] == {}
        await say(client, other["sessionId"], "go")
        assert agent.late is not None
        await agent.late  # published into a closed session: fenced, not written

    client = asyncio.run(run_entry(serving(agent), scenario))
    assert {"sessionUpdate": "session_info_update", "title": "too late"} not in client.info_updates(
        "s1"
    )
    assert agent.adapter is not None
    assert agent.adapter.owner.statistics().fenced >= 1


@pytest.mark.skipif(
    not installed_release().cancels_requests,
    reason="this SDK release names $/cancel_request but its connection ignores it (1.0.0rc2)",
)
def test_the_sdk_cancels_a_request_for_a_cancel_request() -> None:
    class Slow(V2Agent):
        async def list_sessions(self, **_: Any) -> Any:
            await asyncio.Event().wait()  # until cancelled

    async def scenario(client: RawClient) -> None:
        await start(client)
        await client.send({"id": 9, "method": "session/list", "params": {}})
        await client.send({"method": "$/cancel_request", "params": {"requestId": 9}})
        answer = await client.read_until(lambda m: m.get("id") == 9)
        assert answer["error"]["code"] == -32800

    asyncio.run(run_entry(serving(Slow()), scenario))


@pytest.mark.parametrize(("asked", "runtime"), [(1, 1), (2, 2)])
def test_the_router_serves_each_version_and_the_owner_renders_it(asked: int, runtime: int) -> None:
    """One v1 agent (the SDK mini agent) and one v2 agent behind the SDK's router: the adapter
    renders v1 frames as full objects and v2 frames as patches, whichever is picked."""
    v2_agent = V2Agent()

    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await serve_router(None, writer, reader, v1=MiniAgent, v2=lambda _conn: v2_agent)

    async def scenario(client: RawClient) -> None:
        init = V2_INIT if asked == 2 else {"protocolVersion": 1}
        answer = await client.call("initialize", init)
        assert answer["result"]["protocolVersion"] == runtime
        created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
        sid = created["result"]["sessionId"]
        text = 'meta {"a": 1}' if runtime == 2 else "meta a 1"
        await say(client, sid, text)
        text = 'meta {"b": 2}' if runtime == 2 else "meta b 2"
        await say(client, sid, text)

    client = asyncio.run(run_entry(serve, scenario))
    patches = [{"a": 1}, {"b": 2}]
    full_objects = [{"a": 1}, {"a": 1, "b": 2}]  # v1: the full object every time
    expected = patches if runtime == 2 else full_objects
    assert [update["_meta"] for update in client.info_updates("s1")] == expected


def test_the_router_answers_32022_below_both_versions() -> None:
    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await serve_router(None, writer, reader, v1=MiniAgent, v2=lambda _conn: V2Agent())

    async def scenario(client: RawClient) -> None:
        refused = await client.call("initialize", {"protocolVersion": 0})
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"requested": 0, "supported": [1, 2]}

    asyncio.run(run_entry(serve, scenario))


def test_an_sdk_router_object_is_served_with_its_own_factories() -> None:
    from acp.experimental.negotiation import AgentProtocolRouter

    router = AgentProtocolRouter(v2=lambda _conn: V2Agent())

    async def serve(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        await serve_router(router, writer, reader)

    async def scenario(client: RawClient) -> None:
        await start(client)
        refused = await client.call("initialize", {"protocolVersion": 1})
        assert refused["error"]["code"] == -32600  # initialized already: the SDK says so

    asyncio.run(run_entry(serve, scenario))


def test_v2_has_the_entry_points_the_adapter_wraps() -> None:
    """What :func:`agent_meta.sdk.run_v2_agent` and ``agent-meta run`` rely on in this release."""
    from acp.experimental.negotiation import AgentProtocolRouter

    router = AgentProtocolRouter(v1=MiniAgent)
    assert callable(v2.run_agent)
    assert (router._v1, router._v2) == (MiniAgent, None)
