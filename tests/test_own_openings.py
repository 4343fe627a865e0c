"""``agent-meta own`` and what a child sends from its ``session/new`` and ``session/fork``
handlers (issue 27's first rule in front of a child), against a scripted child
(``tests/broken_agents/opening_child.py``) over real pipes. Waits are for the frame that ends
what is awaited, never for time."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.agent_process import AgentProcess, request, running
from tests.test_own import fold, own, restore

NEW = {"cwd": "/tmp", "mcpServers": []}


def child(mode: str) -> list[str]:
    return [sys.executable, "-m", "tests.broken_agents.opening_child", mode]


async def resynced(agent: AgentProcess, session_id: str, version: int) -> Any:
    """What the client holds of ``session_id`` from a load (v1) or resume's frames alone."""
    mark, _ = await restore(agent, session_id, version)
    return fold(agent.messages[mark:], version).meta(session_id)


@pytest.mark.parametrize("version", [1, 2])
async def test_only_the_session_a_response_opens_is_seeded(version: int) -> None:
    async with running(own(child=child("two"))) as agent:
        await agent.initialize(version)
        await agent.send(request(10, "session/new", NEW), request(11, "session/new", NEW))
        await agent.response(10)
        await agent.response(11)
        assert await resynced(agent, "s1", version) == {"h": 1}
        assert await resynced(agent, "s2", version) in (None, {})
        assert await agent.finish() == 0


async def test_whole_objects_of_a_replace_child_seed_as_whole_objects() -> None:
    async with running(own("--child-meta", "replace", child=child("replace"))) as agent:
        await agent.initialize(1)
        session = await agent.new_session()
        assert fold(agent.messages, 1).meta(session) == {"b": 2}
        assert await resynced(agent, session, 1) == {"b": 2}  # not {"a": 1, "b": 2}
        assert await agent.finish() == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_a_fork_seeds_its_session(version: int) -> None:
    async with running(own(child=child("fork-seed"))) as agent:
        await agent.initialize(version)
        session = await agent.new_session()
        forked = await agent.call("session/fork", {**NEW, "sessionId": session})
        assert forked["result"]["sessionId"] == "f1"
        assert await resynced(agent, "f1", version) == {"fk": 1}
        assert await agent.finish() == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_a_fork_ends_the_replay_tail_of_the_session_it_forks(version: int) -> None:
    """A load's history overran its response; the client then forks the session, so what the
    child publishes for it next is live (not dropped as the tail's stale replay)."""
    async with running(own(child=child("fork-tail"))) as agent:
        await agent.initialize(version)
        session = await agent.new_session()
        await restore(agent, session, version)
        while not any(
            message.get("params", {}).get("update", {}).get("sessionUpdate")
            == "agent_message_chunk"
            for message in agent.messages
        ):
            assert await agent.receive() is not None
        forked = await agent.call("session/fork", {**NEW, "sessionId": session})
        assert forked["result"]["sessionId"] == "f1"
        assert fold(agent.messages, version).meta(session) == {"live": 1}
        assert await agent.finish() == 0
