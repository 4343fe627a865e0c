"""agent_meta's own connection keeps the lifetimes as ACP says, for an agent that never opens,
resyncs or closes one (the same policy as the official-SDK adapter's): open on ``session/new``
(as its response is queued) and on ``session/load`` / ``session/resume`` (before the handler);
a resync after the replay and before a successful load or resume response; the end before a
``session/close`` response; and a failed load of an unknown session leaves nothing open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_meta import BaseAgent, JsonRpcError, RequestContext, UnknownSessionError
from agent_meta.core._jsonrpc import ErrorCode
from tests.peer import serve

if TYPE_CHECKING:
    from agent_meta.core._json import JsonObject

INIT = {"protocolVersion": 2, "info": {"name": "test", "version": "0"}}


class PlainAgent(BaseAgent):
    """Touches lifetimes only to publish: ``set K V`` / ``rm K`` prompts, a chunk replayed
    per prompt on load and resume (``replay`` in the params)."""

    def __init__(self, *, resyncs_itself: bool = False) -> None:
        self.history: dict[str, list[str]] = {}
        self.resyncs_itself = resyncs_itself
        self.owners: list[Any] = []

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        self.owners.append(ctx.owner)
        return {}

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        name = str(params["name"])
        self.history[name] = []
        assert not ctx.owner.has_lifetime(name)  # it opens as the response is queued
        return {"sessionId": name}

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session_id = str(params["sessionId"])
        verb, key, *value = str(params["text"]).split(" ")
        lifetime = ctx.owner.lifetime(session_id)
        await lifetime.publish(meta={key: None if verb == "rm" else value[0]})
        self.history[session_id].append(str(params["text"]))
        return {"stopReason": "end_turn"}

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return await self._restore(ctx, params)

    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return await self._restore(ctx, params)

    async def _restore(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session_id = str(params["sessionId"])
        if session_id not in self.history:
            raise UnknownSessionError(session_id)
        assert ctx.owner.has_lifetime(session_id)  # opened before this handler ran
        for text in self.history[session_id]:
            update = {"sessionUpdate": "agent_message_chunk", "text": text}
            await ctx.connection.session_update(session_id, update)
        if self.resyncs_itself:
            ctx.owner.lifetime(session_id).resync()  # as agents written before the policy do
        return {}


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    out = []
    for frame in frames:
        if frame.get("method") != "session/update":
            out.append(frame.get("method", "response"))
            continue
        update = frame["params"]["update"]
        kind = update["sessionUpdate"]
        if kind == "session_info_update":
            kind = "null" if update.get("_meta", {}) is None else "info"
        out.append(kind)
    return out


@pytest.mark.parametrize("method", ["session/resume", "session/load"])
async def test_a_load_or_resume_is_resynced_after_its_replay_and_before_its_response(
    method: str,
) -> None:
    version = 2 if method == "session/resume" else 1
    async with serve(PlainAgent(), protocol_versions=(version,), mirror_version=version) as peer:
        await peer.request("initialize", {**INIT, "protocolVersion": version})
        created = await peer.request("session/new", {"name": "s"})
        assert created["result"] == {"sessionId": "s"}
        for text in ("set a 1", "set b 2", "rm a"):
            answer = await peer.request("session/prompt", {"sessionId": "s", "text": text})
            assert answer["result"] == {"stopReason": "end_turn"}
        before, answer = await peer.call(method, {"sessionId": "s", "cwd": "/"})
    assert answer["result"] == {}
    replay = ["agent_message_chunk"] * 3
    resync = ["null", "info"] if version == 2 else ["info"]
    assert kinds(before) == replay + resync
    assert before[-1]["params"]["update"]["_meta"] == {"b": "2"}
    assert peer.mirror.meta("s") == {"b": "2"}


async def test_an_agent_that_still_resyncs_itself_sends_one_resync() -> None:
    async with serve(PlainAgent(resyncs_itself=True)) as peer:
        await peer.request("initialize", INIT)
        await peer.request("session/new", {"name": "s"})
        await peer.request("session/prompt", {"sessionId": "s", "text": "set a 1"})
        before, answer = await peer.call("session/resume", {"sessionId": "s", "cwd": "/"})
    assert answer["result"] == {}
    assert kinds(before) == ["agent_message_chunk", "null", "info"]


async def test_close_ends_the_lifetime_before_its_response() -> None:
    agent = PlainAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT)
        await peer.request("session/new", {"name": "s"})
        await peer.request("session/prompt", {"sessionId": "s", "text": "set a 1"})
        closed = await peer.request("session/close", {"sessionId": "s"})
        assert closed["result"] == {}
        assert not agent.owners[0].has_lifetime("s")
        late = await peer.request("session/prompt", {"sessionId": "s", "text": "set b 2"})
        assert (
            late["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        )  # no lifetime: the agent's error
        reopened, answer = await peer.call("session/resume", {"sessionId": "s", "cwd": "/"})
    assert answer["result"] == {}
    # A fresh lifetime with nothing known: the resync clears what the client kept.
    assert kinds(reopened)[-1:] == ["null"]
    assert peer.mirror.meta("s") is None


class ClosingAgent(PlainAgent):
    """Its ``session/close`` handler publishes a last update and resyncs, as it returns: both
    are still queued when the connection ends the lifetime before the response."""

    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        lifetime = ctx.owner.lifetime(str(params["sessionId"]))
        assert lifetime.publish_nowait(meta={"closing": True})
        assert lifetime.resync()
        return {}


async def test_what_was_queued_before_the_close_leaves_before_its_response() -> None:
    """Fencing begins at the close (R6, issue 33): what the session queued before its lifetime
    ended goes out before the ``session/close`` response, in order (R2, R4); nothing of the
    session follows the response."""
    agent = ClosingAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT)
        await peer.request("session/new", {"name": "s"})
        await peer.request("session/prompt", {"sessionId": "s", "text": "set a 1"})
        before, closed = await peer.call("session/close", {"sessionId": "s"})
        assert closed["result"] == {}
        late = await peer.request("session/prompt", {"sessionId": "s", "text": "set b 2"})
        assert late["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
    assert kinds(before) == ["info", "null", "info"]
    assert before[-1]["params"]["update"]["_meta"] == {"a": "1", "closing": True}
    after = peer.frames[peer.frames.index(closed) + 1 :]
    assert [f for f in after if (f.get("params") or {}).get("sessionId") == "s"] == []
    assert agent.owners[0].statistics().fenced == 0


async def test_a_failed_load_of_an_unknown_session_leaves_no_lifetime() -> None:
    agent = PlainAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT)
        failed = await peer.request("session/resume", {"sessionId": "ghost", "cwd": "/"})
        assert failed["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        assert not agent.owners[0].has_lifetime("ghost")


async def test_requests_before_initialize_open_nothing() -> None:
    agent = PlainAgent()
    async with serve(agent) as peer:
        early = await peer.request("session/resume", {"sessionId": "s", "cwd": "/"})
        assert early["error"]["code"] == JsonRpcError(-32600, "").code
        answer = await peer.request("initialize", {**INIT, "protocolVersion": 1})
        assert answer["result"]["protocolVersion"] == 1  # no lifetime pinned the version


class OverlappingAgent(PlainAgent):
    """Two loads or resumes of a session at once: the first replays, then waits until the
    second has started; the second replays once the client has read the first's response."""

    def __init__(self) -> None:
        super().__init__()
        self.restores = 0
        self.second_started = trio.Event()
        self.first_answered = trio.Event()  # set by the client, once it has read it

    async def _restore(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        self.restores += 1
        if self.restores == 1:
            result = await super()._restore(ctx, params)
            await self.second_started.wait()
            return result
        self.second_started.set()
        await self.first_answered.wait()
        return await super()._restore(ctx, params)


@pytest.mark.parametrize("method", ["session/resume", "session/load"])
async def test_overlapping_loads_of_one_session_are_each_resynced_to_the_true_state(
    method: str,
) -> None:
    """Issue 27 (c), agent_meta's own connection: each response is preceded by a resync to
    the state the lifetime holds, whichever answers first (a trio agent replays through its
    connection, which never takes a replayed frame for a publication)."""
    version = 2 if method == "session/resume" else 1
    agent = OverlappingAgent()
    async with serve(agent, protocol_versions=(version,), mirror_version=version) as peer:
        await peer.request("initialize", {**INIT, "protocolVersion": version})
        await peer.request("session/new", {"name": "s"})
        for text in ("set a 1", "set b 2", "rm a"):
            await peer.request("session/prompt", {"sessionId": "s", "text": text})
        params = {"sessionId": "s", "cwd": "/", "replayFrom": {"type": "start"}}
        await peer.send({"id": 1, "method": method, "params": params})
        await peer.send({"id": 2, "method": method, "params": params})
        first = await peer.until_response(1)
        agent.first_answered.set()
        second = await peer.until_response(2)
    resync = ["null", "info"] if version == 2 else ["info"]
    for frames in (first, second):
        assert frames[-1]["result"] == {}
        assert kinds(frames[-1 - len(resync) : -1]) == resync
        assert frames[-2]["params"]["update"]["_meta"] == {"b": "2"}
    assert peer.mirror.meta("s") == {"b": "2"}
    assert agent.owners[0].lifetime("s").snapshot().meta == {"b": "2"}
