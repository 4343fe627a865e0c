"""The official-SDK adapter (``agent_meta.sdk``): a real SDK agent, a raw client, OS pipes.

Every test runs the SDK's own connection code (``acp.run_agent``) with the adapter as its
transport and looks at the bytes the client received. The SDK 0.12 speaks ACP v1, so the owner
renders each session-info frame as the full known state (R10).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import acp
import pytest

from agent_meta import (
    OMITTED,
    OwnerOptions,
    TransportBrokenError,
    UnknownSessionError,
)
from agent_meta.sansio.inbound._gate import GateStatistics
from agent_meta.sansio.inbound._tracker import TrackerStatistics
from agent_meta.sdk import AdapterStatistics, SdkAdapter, open_stream_adapter
from agent_meta.sdk._release import installed_release
from tests.sdk_pair import RawClient, run
from tests.sdk_release import needs_run_agent, needs_session_info
from tests.support.sdk_mini_agent import MiniAgent, info

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),  # the SDK warns on unstable routes
    needs_run_agent,
]


async def start(client: RawClient) -> str:
    """initialize, then session/new; the new session's id."""
    await client.call("initialize", {"protocolVersion": 1})
    created = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = created["result"]["sessionId"]
    return session_id


async def prompt(client: RawClient, session_id: str, text: str) -> Message:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return await client.call("session/prompt", params)


Message = dict[str, Any]


def go(scenario: Any, options: OwnerOptions | None = None) -> tuple[RawClient, SdkAdapter]:
    return asyncio.run(run(MiniAgent, scenario, options))


# -- absorption (R1, R10) ------------------------------------------------------------------------


@needs_session_info
def test_sdk_session_info_updates_join_the_lifetime_and_render_as_full_objects() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await prompt(client, sid, 'meta b {"x": null}')
        await prompt(client, sid, "title T")
        assert adapter.lifetime(sid).snapshot().meta == {"a": 1, "b": {"x": None}}

    client, adapter = go(scenario)
    assert client.info_updates("s1") == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "b": {"x": None}}},
        {"sessionUpdate": "session_info_update", "title": "T", "_meta": {"a": 1, "b": {"x": None}}},
    ]
    stats = adapter.statistics()
    assert (stats.absorbed_updates, stats.passed_through_updates) == (3, 0)
    assert adapter.owner.protocol_version == 1


def test_the_statistics_are_the_owners_the_trackers_and_the_gates_counters() -> None:
    """``AdapterStatistics`` holds every counter of its parts, by their names, and no other."""
    parts = {field.name for field in dataclasses.fields(TrackerStatistics)}
    parts |= {field.name for field in dataclasses.fields(GateStatistics)}
    assert {field.name for field in dataclasses.fields(AdapterStatistics)} == {"owner"} | parts

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start(client)

    _, adapter = go(scenario)
    stats = adapter.statistics()
    assert stats.owner == adapter.owner.statistics()
    assert stats.refused_lines == adapter.gate.statistics.refused_lines == 0


def test_a_clear_the_sdk_cannot_send_goes_through_the_handle() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await prompt(client, sid, "clear")

    client, _ = go(scenario)
    # v1 has no clear: the full object after it is empty (a v1 client replaces what it holds).
    assert client.info_updates("s1")[-1] == {"sessionUpdate": "session_info_update", "_meta": {}}


@needs_session_info
def test_concurrent_sdk_updates_are_all_kept_and_every_line_is_whole() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "many 200")

    client, adapter = go(scenario)
    last = client.info_updates("s1")[-1]
    assert last["_meta"] == {f"k{i}": i for i in range(200)}
    assert adapter.statistics().absorbed_updates == 200
    assert all(line.count(b"\n") == 1 for line in client.lines)


@needs_session_info
def test_what_a_new_session_handler_publishes_is_known_to_the_lifetime_it_opens() -> None:
    """Issue 27 (a): pydantic-acp publishes its session info in its session/new handler. The
    update reaches the client before the response, as the agent sent it, and the lifetime the
    response opens knows it: the resync of a later load carries it (it used to carry
    ``_meta: {}``, wiping what the v1 client held)."""

    class EarlyAgent(MiniAgent):
        async def new_session(self, cwd: str, **_: Any) -> Any:
            created = await super().new_session(cwd)
            # Before the response: the adapter has not opened the lifetime yet.
            update = info(title="early", field_meta={"thinking": {"effort": "high"}})
            await self.conn.session_update(created.session_id, update)
            return created

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        assert adapter.lifetime(sid).snapshot().meta == {"thinking": {"effort": "high"}}
        await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})

    client, adapter = asyncio.run(run(EarlyAgent, scenario))
    early: Message = {"sessionUpdate": "session_info_update", "title": "early"}
    early["_meta"] = {"thinking": {"effort": "high"}}
    assert client.info_updates("s1") == [early, early]  # as sent, then the load's resync
    stats = adapter.statistics()
    assert (stats.seeded_updates, stats.passed_through_updates) == (1, 0)


@needs_session_info
def test_an_update_for_a_session_no_request_is_opening_passes_through_and_is_counted() -> None:
    class StrayAgent(MiniAgent):
        async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> Any:
            await self.conn.session_update("nobody", info(title="stray"))
            return await super().prompt(prompt, session_id, **kw)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "hello")

    client, adapter = asyncio.run(run(StrayAgent, scenario))
    assert client.info_updates("nobody") == [
        {"sessionUpdate": "session_info_update", "title": "stray"}
    ]
    stats = adapter.statistics()
    assert (stats.absorbed_updates, stats.passed_through_updates) == (0, 1)


class V2MiniAgent(MiniAgent):
    """Answers ``initialize`` with protocol 2 (as fast-agent does, echoing the client), so the
    owner renders v2; ``stamp`` sends a timestamp without a UTC offset, as fast-agent does."""

    async def initialize(self, protocol_version: int, **_: Any) -> Any:
        answer = await super().initialize(protocol_version)
        answer.protocol_version = 2
        return answer

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        if prompt[0].text == "stamp":
            stamp = info(title="T", updated_at="2026-12-01T14:10:03.144382", field_meta={"k": 1})
            await self.conn.session_update(session_id, stamp)
            return acp.schema.PromptResponse(stop_reason="end_turn")
        return await super().prompt(prompt, session_id, **kwargs)


@needs_session_info
def test_an_updated_at_without_an_offset_under_v2_is_left_out_and_the_rest_published(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        for _ in range(2):
            answer = await prompt(client, sid, "stamp")
            assert answer["result"] == {"stopReason": "end_turn"}  # the agent's call did not fail

    client, adapter = asyncio.run(run(V2MiniAgent, scenario))
    assert (
        client.info_updates("s1")
        == [{"sessionUpdate": "session_info_update", "title": "T", "_meta": {"k": 1}}] * 2
    )
    stats = adapter.statistics()
    assert (stats.absorbed_updates, stats.dropped_fields, stats.refused_updates) == (2, 2, 0)
    warnings = [r for r in caplog.records if "updatedAt" in r.getMessage()]
    assert [r.levelname for r in warnings] == ["WARNING"]  # said once, not per update


@needs_session_info
def test_an_update_the_owner_refuses_is_counted_and_never_raised_into_the_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        answer = await prompt(client, sid, f'meta big "{"x" * 600}"')
        assert answer["result"] == {"stopReason": "end_turn"}
        await prompt(client, sid, "meta small 1")

    client, adapter = go(scenario, OwnerOptions(max_frame_bytes=512))
    assert client.info_updates("s1") == [
        {"sessionUpdate": "session_info_update", "_meta": {"small": 1}}
    ]
    stats = adapter.statistics()
    assert (stats.absorbed_updates, stats.refused_updates) == (1, 1)
    assert "refused a session_info_update" in caplog.text


@needs_session_info
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_a_load_or_resume_with_a_null_id_is_resynced_before_its_response(method: str) -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await prompt(client, sid, "clear")  # the history still has {"a": 1}: replay must not
        await prompt(client, sid, "meta c 3")  # bring it back
        params = {"sessionId": sid, "cwd": "/", "mcpServers": []}
        await client.send({"id": None, "method": method, "params": params})
        answer = await client.read_until(lambda m: "id" in m and m["id"] is None)
        assert answer["result"] == {}

    client, adapter = go(scenario)
    response = next(i for i, m in enumerate(client.messages) if "id" in m and m["id"] is None)
    resync = client.messages[response - 1]
    assert resync["params"]["update"] == {"sessionUpdate": "session_info_update", "_meta": {"c": 3}}
    assert adapter.lifetime("s1").snapshot().meta == {"c": 3}
    assert adapter.owner.statistics().resyncs == 1


# -- resync (R4), lifetimes (R5), fencing (R6) ---------------------------------------------------


@needs_session_info
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_load_and_resume_resync_after_the_replay_and_before_the_response(method: str) -> None:
    responses: list[int] = []

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await prompt(client, sid, "hello")
        before = len(client.messages)
        answer = await client.call(method, {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert "result" in answer, answer
        responses.append(before)

    client, adapter = go(scenario)
    after = client.messages[responses[0] :]
    kinds = [
        m["params"]["update"]["sessionUpdate"] if m.get("method") else "response" for m in after
    ]
    if method == "session/load":  # MiniAgent replays on load: the resync follows the replay
        assert kinds == [
            "session_info_update",
            "agent_message_chunk",
            "session_info_update",
            "response",
        ]
    else:
        assert kinds == ["session_info_update", "response"]
    assert after[-2]["params"]["update"] == {
        "sessionUpdate": "session_info_update",
        "_meta": {"a": 1},
    }
    assert adapter.owner.statistics().resyncs == 1


@needs_session_info
def test_a_replay_does_not_bring_back_what_the_lifetime_removed() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await prompt(client, sid, "clear")  # through the handle: not in the agent's history
        await prompt(client, sid, "meta c 3")
        await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert adapter.lifetime(sid).snapshot().meta == {"c": 3}

    client, adapter = go(scenario)
    infos = client.info_updates("s1")
    # The replay sends the history's patches as they were; the resync then restores the state.
    assert [u["_meta"] for u in infos[-3:]] == [{"a": 1}, {"c": 3}, {"c": 3}]
    assert adapter.statistics().replayed_updates == 2


@needs_session_info
def test_a_live_update_racing_a_replay_is_absorbed_and_resynced() -> None:
    """Only what the load handler sends (from its task, or a task it starts) is replay; a
    background task started before the load publishes live updates meanwhile."""

    class RacingAgent(MiniAgent):
        replayed = asyncio.Event()
        live_sent = asyncio.Event()

        async def load_session(self, cwd: str, session_id: str, **kw: Any) -> None:
            await super().load_session(cwd, session_id, **kw)
            helper = asyncio.create_task(self.conn.session_update(session_id, info(title="old")))
            await helper  # started by the handler: replay too
            self.replayed.set()
            await self.live_sent.wait()

        async def background(self, session_id: str) -> None:
            await self.replayed.wait()
            await self.conn.session_update(session_id, info(_meta={"live": 1}))
            self.live_sent.set()

    agents: list[RacingAgent] = []

    def make(adapter: SdkAdapter) -> RacingAgent:
        agents.append(RacingAgent(adapter))
        return agents[-1]

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        background = asyncio.create_task(agents[0].background(sid))
        answer = await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert answer["result"] == {}
        await background
        assert adapter.lifetime(sid).snapshot().meta == {"a": 1, "live": 1}
        assert adapter.lifetime(sid).snapshot().title is OMITTED

    client, adapter = asyncio.run(run(make, scenario))
    infos = client.info_updates("s1")
    assert infos[-4:] == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},  # replayed: as it was
        {"sessionUpdate": "session_info_update", "title": "old"},  # replayed by its helper
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "live": 1}},  # live, folded
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1, "live": 1}},  # the resync
    ]
    stats = adapter.statistics()
    assert (stats.replayed_updates, stats.absorbed_updates) == (2, 2)


class StampingAgent(MiniAgent):
    """As pydantic-acp: each prompt publishes the session's info with a fresh ``updatedAt``;
    a load replays the history (those updates included), then sends the current info, stamped
    with the time of the load."""

    def __init__(self, adapter: SdkAdapter | None) -> None:
        super().__init__(adapter)
        self.stamps = iter(f"2026-05-0{day}T12:00:00Z" for day in range(1, 10))

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> Any:
        update = info(title=prompt[0].text, updated_at=next(self.stamps), field_meta={"n": 1})
        self.history.setdefault(session_id, []).append(update)
        await self.conn.session_update(session_id, update)
        return await super().prompt(prompt, session_id, **kw)

    async def load_session(self, cwd: str, session_id: str, **kw: Any) -> None:
        await super().load_session(cwd, session_id, **kw)
        update = info(title="current", updated_at=next(self.stamps), field_meta={"n": 2})
        await self.conn.session_update(session_id, update)


@needs_session_info
def test_the_agents_current_info_in_a_load_is_state_and_the_resync_carries_it() -> None:
    """Issue 27 (b), replay is replay: what a load handler sends is history, but the agent's
    current info, an ``updatedAt`` newer than everything known or replayed, is state. The
    client ends at it (it used to end at the older ``updatedAt`` the resync put back, older
    than what the agent's session/list said)."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "first")
        await prompt(client, sid, "second")
        await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        known = adapter.lifetime(sid).snapshot()
        assert (known.title, known.updated_at, known.meta) == (
            "current",
            "2026-05-03T12:00:00Z",
            {"n": 2},
        )

    client, adapter = asyncio.run(run(StampingAgent, scenario))
    resync = client.info_updates("s1")[-1]
    assert resync == {
        "sessionUpdate": "session_info_update",
        "title": "current",
        "updatedAt": "2026-05-03T12:00:00Z",
        "_meta": {"n": 2},
    }
    stats = adapter.statistics()
    assert (stats.replayed_updates, stats.absorbed_updates) == (2, 3)


@needs_session_info
def test_two_loads_of_one_session_each_replay_until_their_own_response() -> None:
    """Load 1 answers while load 2 still replays: 2's replayed patch is still replay (not
    folded back into a lifetime that removed its key)."""

    class GatedAgent(MiniAgent):
        gate = asyncio.Event()
        loads = 0

        async def load_session(self, cwd: str, session_id: str, **kw: Any) -> None:
            type(self).loads += 1
            if type(self).loads == 2:  # the second load replays after the first answered
                await self.gate.wait()
            await super().load_session(cwd, session_id, **kw)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")  # in the agent's history
        await prompt(client, sid, "clear")  # through the handle: a is gone
        await prompt(client, sid, "meta c 3")
        params = {"sessionId": sid, "cwd": "/", "mcpServers": []}
        await client.send({"id": 1, "method": "session/load", "params": params})
        await client.send({"id": 2, "method": "session/load", "params": params})
        await client.read_until(lambda m: m.get("id") == 1 and "method" not in m)
        GatedAgent.gate.set()
        await client.read_until(lambda m: m.get("id") == 2 and "method" not in m)
        assert adapter.lifetime(sid).snapshot().meta == {"c": 3}

    _, adapter = asyncio.run(run(GatedAgent, scenario))
    assert adapter.statistics().replayed_updates == 4  # a and c, twice


class InterleavingLoads(MiniAgent):
    """Knows session ``s1`` (as a restarted agent does; the adapter knows nothing of it), whose
    history sets ``k`` to 1 then 2. Two loads replay it in this order: the first replays both,
    the second replays ``k: 1``, the first is answered, then the second replays the rest."""

    def __init__(self, adapter: SdkAdapter | None) -> None:
        super().__init__(adapter)
        self.history["s1"] = [info(field_meta={"k": 1}), info(field_meta={"k": 2})]
        self.loads = 0
        self.first_replayed = asyncio.Event()
        self.second_started = asyncio.Event()
        self.first_answered = asyncio.Event()  # set by the client, once it has read it

    async def load_session(self, cwd: str, session_id: str, **kw: Any) -> None:
        self.loads += 1
        first = self.loads == 1
        if not first:
            await self.first_replayed.wait()
        for step, update in enumerate(self.history[session_id]):
            if not first and step == 1:
                self.second_started.set()
                await self.first_answered.wait()
            await self.conn.session_update(session_id, update)
        if first:
            self.first_replayed.set()
            await self.second_started.wait()


@needs_session_info
def test_two_loads_replaying_at_once_are_each_resynced_to_the_true_state() -> None:
    """Issue 27 (c) on ACP v1: neither replay is folded into the state while they run, so each
    response is preceded by the resync to ``{"k": 2}`` (the second's replayed ``k: 1`` used to
    be folded in after the first had built the state, and both resyncs carried it)."""
    agents: list[InterleavingLoads] = []

    def make(adapter: SdkAdapter) -> InterleavingLoads:
        agents.append(InterleavingLoads(adapter))
        return agents[-1]

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        params = {"sessionId": "s1", "cwd": "/", "mcpServers": []}
        await client.send({"id": 1, "method": "session/load", "params": params})
        await client.send({"id": 2, "method": "session/load", "params": params})
        await client.read_until(lambda m: m.get("id") == 1 and "method" not in m)
        agents[0].first_answered.set()
        await client.read_until(lambda m: m.get("id") == 2 and "method" not in m)
        assert adapter.lifetime("s1").snapshot().meta == {"k": 2}

    client, _ = asyncio.run(run(make, scenario))
    for request_id in (1, 2):
        response = next(
            i
            for i, m in enumerate(client.messages)
            if m.get("id") == request_id and "method" not in m
        )
        resync = client.messages[response - 1]["params"]["update"]
        assert resync == {"sessionUpdate": "session_info_update", "_meta": {"k": 2}}, request_id


@needs_session_info
def test_a_worker_an_earlier_load_started_is_live_during_a_later_load() -> None:
    """A task the first load's handler started keeps that request's mark in its context; once
    that request is answered, what the task sends is live, even while another load runs."""

    class WorkerAgent(MiniAgent):
        second_load = asyncio.Event()
        live_sent = asyncio.Event()
        loads = 0
        worker: asyncio.Task[None] | None = None

        async def load_session(self, cwd: str, session_id: str, **kw: Any) -> None:
            type(self).loads += 1
            await super().load_session(cwd, session_id, **kw)
            if type(self).loads == 1:
                type(self).worker = asyncio.create_task(self.work(session_id))
            else:
                self.second_load.set()
                await self.live_sent.wait()

        async def work(self, session_id: str) -> None:
            await self.second_load.wait()
            await self.conn.session_update(session_id, info(field_meta={"live": 1}))
            self.live_sent.set()

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        params = {"sessionId": sid, "cwd": "/", "mcpServers": []}
        await client.call("session/load", params)
        await client.call("session/load", params)
        assert WorkerAgent.worker is not None
        await WorkerAgent.worker
        assert adapter.lifetime(sid).snapshot().meta == {"a": 1, "live": 1}

    client, _ = asyncio.run(run(WorkerAgent, scenario))
    assert client.info_updates("s1")[-1]["_meta"] == {"a": 1, "live": 1}  # the resync


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_a_failed_load_of_an_unknown_session_leaves_no_lifetime(method: str) -> None:
    class RefusingAgent(MiniAgent):
        async def load_session(self, cwd: str, session_id: str, **_: Any) -> None:
            raise acp.RequestError.resource_not_found(session_id)

        async def resume_session(self, cwd: str, session_id: str, **_: Any) -> Any:
            raise acp.RequestError.resource_not_found(session_id)

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await start(client)
        for n in range(5):
            params = {"sessionId": f"nope-{n}", "cwd": "/", "mcpServers": []}
            answer = await client.call(method, params)
            assert "error" in answer
        assert adapter.owner.lifetime_ids() == ["s1"]

    asyncio.run(run(RefusingAgent, scenario))


ROUTES_CLOSE = installed_release().routes_close


@pytest.mark.skipif(not ROUTES_CLOSE, reason="this SDK release does not route session/close")
def test_close_ends_the_lifetime_before_its_response_and_fences_what_follows() -> None:
    class LateAgent(MiniAgent):
        async def close_session(self, session_id: str, **_: Any) -> None:
            self.closed = session_id

    agents: list[LateAgent] = []

    def make(adapter: SdkAdapter) -> LateAgent:
        agents.append(LateAgent(adapter))
        return agents[-1]

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        answer = await client.call("session/close", {"sessionId": sid})
        assert answer["result"] == {}
        assert not adapter.owner.has_lifetime(sid)
        await prompt(client, sid, "meta late 1")  # the agent still publishes: fenced
        await prompt(client, sid, "ask")  # a request would never be answered: refused

    client, adapter = asyncio.run(run(make, scenario))
    assert client.info_updates("s1") == [
        {"sessionUpdate": "session_info_update", "_meta": {"a": 1}}
    ]
    assert [m.get("method") for m in client.messages].count("session/request_permission") == 0
    assert [type(e) for e in agents[0].failures] == [UnknownSessionError]
    assert adapter.owner.statistics().fenced == 2


@needs_session_info
@pytest.mark.skipif(not ROUTES_CLOSE, reason="this SDK release does not route session/close")
def test_what_was_queued_before_the_close_leaves_before_its_response() -> None:
    """Fencing begins at the close (R6, issue 33): the close handler's last publication and
    resync, queued while the pipe is still taking the frames before them, go out before the
    ``session/close`` response, in order; nothing of the session after it."""

    class ClosingAgent(MiniAgent):
        async def close_session(self, session_id: str, **_: Any) -> None:
            assert self._adapter is not None
            lifetime = self._adapter.lifetime(session_id)
            assert lifetime.publish_nowait(meta={"big": "x" * 50_000})  # most of a pipe's room
            assert lifetime.publish_nowait(meta={"closing": True})  # queued behind it
            assert lifetime.resync()

    answers: list[Message] = []

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        answers.append(await client.call("session/close", {"sessionId": sid}))
        assert answers[0]["result"] == {}
        await prompt(client, sid, "meta late 1")  # fenced

    client, adapter = asyncio.run(run(ClosingAgent, scenario))
    big = "x" * 50_000
    closed = client.messages.index(answers[0])
    of_session = [
        i
        for i, m in enumerate(client.messages)
        if (m.get("params") or {}).get("sessionId") == "s1"
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]
    assert all(i < closed for i in of_session)  # nothing of the session after the response
    whole = {"a": 1, "big": big, "closing": True}
    assert [m["_meta"] for m in client.info_updates("s1")] == [
        {"a": 1},
        {"a": 1, "big": big},
        whole,  # v1: the whole object (R10)
        whole,  # the resync, the state at the close
    ]
    assert adapter.owner.statistics().fenced == 1


@pytest.mark.skipif(ROUTES_CLOSE, reason="this SDK release routes session/close")
def test_where_the_sdk_does_not_route_close_the_lifetime_stays_open() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        answer = await client.call("session/close", {"sessionId": sid})
        assert answer["error"]["code"] == -32601  # the SDK's own answer: method not found
        assert adapter.owner.has_lifetime(sid)  # nothing was closed, so nothing is fenced
        await prompt(client, sid, "meta b 2")

    client, adapter = go(scenario)
    assert client.info_updates("s1")[-1]["_meta"] == {"a": 1, "b": 2}
    assert adapter.owner.statistics().fenced == 0


# -- requests to the client ---------------------------------------------------------------------


def test_a_request_to_the_client_goes_through_the_fifo_and_its_answer_reaches_the_sdk() -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await client.send(
            {"id": 7, "method": "session/prompt", "params": {
                "sessionId": sid, "prompt": [{"type": "text", "text": "ask"}]}}
        )  # fmt: skip
        asked = await client.read_until(lambda m: m.get("method") == "session/request_permission")
        outcome = {"outcome": {"outcome": "selected", "optionId": "ok"}}
        await client.send({"id": asked["id"], "result": outcome})
        await client.read_until(lambda m: m.get("id") == 7 and "result" in m)

    client, _ = go(scenario)
    chunks = [
        m["params"]["update"]["content"]["text"]
        for m in client.messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert chunks == ["selected ok"]


# -- inbound lines the SDK must not see (R12) ----------------------------------------------------


@pytest.mark.parametrize(
    ("line", "code", "answered_id"),
    [
        (b"not json", -32700, None),
        (b"[]", -32600, None),
        (b'"a string"', -32600, None),
        (b'{"jsonrpc": "2.0", "id": 5, "method": 3}', -32600, 5),
        (b'{"jsonrpc": "2.0", "id": 6, "method": "x", "result": 1}', -32600, 6),
        (b"x" * 200, -32700, None),  # over the 100-byte line limit of this test
    ],
)
def test_a_bad_line_is_answered_and_the_connection_goes_on(
    line: bytes, code: int, answered_id: object
) -> None:
    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.send_line(line)
        error = await client.read_until(lambda m: "error" in m)
        assert (error["id"], error["error"]["code"]) == (answered_id, code)
        answer = await client.call("initialize", {"protocolVersion": 1})
        assert answer["result"]["protocolVersion"] == 1
        assert adapter.statistics().refused_lines == 1

    asyncio.run(run(MiniAgent, scenario, max_line_bytes=100))


def test_a_notification_that_is_no_message_is_answered_as_json_rpc_says() -> None:
    """JSON-RPC 2.0 answers ``{"jsonrpc": "2.0", "method": 1}`` with ``-32600`` and ``id:
    null`` (its examples): without a valid method it is no notification (the trio connection
    answers it alike, ``tests/test_gate_runtimes.py``)."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        await client.send_line(b'{"jsonrpc": "2.0", "method": 3}')
        answer = await client.call("initialize", {"protocolVersion": 1})
        assert "result" in answer
        assert adapter.statistics().refused_lines == 1

    client, _ = go(scenario)
    refused = [m for m in client.messages if "error" in m]
    assert [(m["id"], m["error"]["code"]) for m in refused] == [(None, -32600)]


# -- a transport that fails -------------------------------------------------------------------


def test_a_client_that_goes_away_stops_the_owner_with_a_clear_error() -> None:
    async def scenario() -> None:
        import os

        from tests.sdk_pair import pipe_reader, pipe_writer

        opened: list[asyncio.BaseTransport] = []
        to_agent_r, to_agent_w = os.pipe()
        to_client_r, to_client_w = os.pipe()
        os.close(to_client_r)  # nobody will ever read what the agent writes
        reader = await pipe_reader(to_agent_r, opened)
        writer = await pipe_writer(to_client_w)
        try:
            async with open_stream_adapter(reader, writer) as adapter:
                lifetime = adapter.owner.open_lifetime("s1")
                await lifetime.publish(meta={"a": 1})
                await adapter.owner.wait_flushed()
        finally:
            os.close(to_agent_w)
            writer.close()
            opened[0].close()

    with pytest.raises(TransportBrokenError):
        asyncio.run(scenario())


@pytest.mark.filterwarnings("ignore:the SDK never read")
def test_frames_still_in_the_stdout_buffer_at_the_end_are_written_or_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 27 (d): what the owner has handed to stdout's asyncio transport may still sit in
    its buffer (up to its high-water mark) when the block ends. The block waits for the flush
    (within ``drain_timeout``); a client that reads nothing by then makes it raise, as frames
    left in the owner's queue do, instead of ending the loop with them silently lost."""
    import fcntl
    import os

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the rest stays in the transport
    frames = [f"frame {n:03d} ".encode() + b"x" * 500 for n in range(60)]  # about 30 KiB
    raised: list[BaseException] = []

    async def scenario() -> None:
        from agent_meta.sdk import open_stdio_adapter

        try:
            async with open_stdio_adapter(
                OwnerOptions(drain_timeout=0.5), stdout=write_end
            ) as meta:
                for frame in frames:
                    await meta.owner.send_encoded(frame + b"\n", None)
                await meta.owner.wait_flushed()  # all handed to the transport: "written"
        except TransportBrokenError as exc:
            raised.append(exc)

    try:
        asyncio.run(scenario())
    finally:
        os.close(write_end)
    received = b""
    while chunk := os.read(read_end, 1 << 16):
        received += chunk
    os.close(read_end)
    delivered = received == b"".join(frame + b"\n" for frame in frames)
    assert raised or delivered, f"no error, and only {len(received)} bytes arrived"
    assert raised  # nobody read within the drain timeout
    assert not delivered


def test_an_adapter_the_sdk_never_reads_through_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A forgotten ``**adapter.connection_kwargs()``: the SDK runs on its own streams, the
    adapter idles."""
    opened: list[bool] = []

    async def never_opened() -> asyncio.StreamReader:
        opened.append(True)
        raise AssertionError("the adapter must not open its input before the SDK reads")

    async def scenario() -> None:
        import os

        from tests.sdk_pair import pipe_writer

        read_end, write_end = os.pipe()
        writer = await pipe_writer(write_end)
        try:
            async with open_stream_adapter(never_opened, writer):
                pass
        finally:
            writer.close()
            os.close(read_end)

    asyncio.run(scenario())
    assert opened == []
    assert "never read through the agent_meta adapter" in caplog.text


def test_the_seam_of_every_release_is_used_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With ``connection_kwargs()`` the adapter says nothing about its seam, on any release
    (where handlers start from a dispatcher, they are marked there, never also on reading)."""

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        await prompt(client, sid, "meta a 1")
        await client.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})

    go(scenario)
    assert [r.getMessage() for r in caplog.records if r.name == "agent_meta.sdk"] == []


def test_finding_the_release_does_not_import_the_v2_side() -> None:
    """``installed_release()`` tells whether the SDK has its v2 side without importing it: the
    SDK 1.0's ``acp.experimental`` imports the whole v2 schema (about half a second of every
    start-up under ``agent-meta run``). Run in a fresh interpreter, whose ``sys.modules`` this
    suite has not filled."""
    import subprocess
    import sys

    probe = (
        "import importlib.util, sys\n"
        "from agent_meta.sdk._release import installed_release\n"
        "found = installed_release().v2\n"
        "imported = 'acp.experimental' in sys.modules\n"
        "real = importlib.util.find_spec('acp.experimental') is not None\n"
        "real = real and importlib.util.find_spec('acp.experimental.negotiation') is not None\n"
        "print(found, imported, real)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    found, imported, real = result.stdout.split()
    assert imported == "False", "finding the release imported acp.experimental"
    assert found == real  # and it still tells the v2 side apart
