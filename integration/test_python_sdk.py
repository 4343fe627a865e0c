"""The official ACP Python SDK client (protocol v1) against the reference agent over stdio,
on both of its runtimes (trio, and the official SDK with agent_meta's adapter).

Every test asserts the raw frames in wire order (the SDK's synchronous ``observers=`` hook)
and what a client folding them holds (:class:`ClientMirror`, v1 rules: each ``_meta`` object is
the whole metadata, which is what the agent's default v1 "merged" mode sends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from integration.harness import (
    QuietClient,
    Transcript,
    info_updates,
    python_client,
    run_async,
    session_updates,
    text,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

pytestmark = pytest.mark.usefixtures("agent_runtime")

CWD = "/tmp"


def _metas(updates: Sequence[dict[str, Any]]) -> list[Any]:
    """The ``_meta`` of the frames that carry one."""
    return [u["_meta"] for u in updates if "_meta" in u]


def assert_states_in_order(observed: Sequence[Any], allowed: Sequence[Any]) -> None:
    """``observed`` walks through ``allowed`` in order (coalescing may skip states) to its end."""
    assert observed, "no session_info_update frame was sent"
    assert observed[-1] == allowed[-1], f"final state {observed[-1]!r} != {allowed[-1]!r}"
    position = 0
    for state in observed:
        while position < len(allowed) and allowed[position] != state:
            position += 1
        assert position < len(allowed), f"{observed!r} is not an in-order walk of {allowed!r}"


def _is_replay(update: dict[str, Any]) -> bool:
    return str(update.get("sessionUpdate", "")).endswith("_message_chunk")


def test_load_and_resume_resync_after_replay_before_response() -> None:
    async def scenario() -> tuple[Transcript, str, int, int, int]:
        async with python_client() as (conn, wire):
            session = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            start = wire.mark()
            await conn.prompt(
                session_id=session,
                prompt=text('/title Plan\n/meta set a {"x":1}\n/meta set b [1,2]\n/meta rm b'),
            )
            load = wire.mark()
            await conn.load_session(cwd=CWD, session_id=session, mcp_servers=[])
            resume = wire.mark()
            await conn.resume_session(session_id=session, cwd=CWD)
            return wire, session, start, load, resume

    wire, session, start, load, resume = run_async(scenario())

    live = wire.incoming(start)[: wire.response_position("session/prompt", start)]
    assert_states_in_order(
        _metas(info_updates(live)),
        # v1 merged mode: every frame, the title-only one first, carries the whole object (R10).
        [{}, {"a": {"x": 1}}, {"a": {"x": 1}, "b": [1, 2]}, {"a": {"x": 1}}],
    )

    # session/load: the replayed history, then the resync, then the response.
    loaded = wire.incoming(load)
    response = wire.response_position("session/load", load)
    updates = [m for m in loaded[:response] if m.get("method") == "session/update"]
    kinds = [u["params"]["update"]["sessionUpdate"] for u in updates]
    assert kinds, "session/load sent nothing before its response"
    replayed = [i for i, u in enumerate(updates) if _is_replay(u["params"]["update"])]
    resync = [i for i, k in enumerate(kinds) if k == "session_info_update"]
    assert replayed, f"session/load replayed no history: {kinds}"
    assert resync, f"session/load sent no resync: {kinds}"
    assert max(replayed) < min(resync), f"the resync came before the end of the replay: {kinds}"
    # v1 merged mode: the resync is one frame with the complete current state.
    last = updates[resync[-1]]["params"]["update"]
    assert last["_meta"] == {"a": {"x": 1}}
    assert last.get("title") == "Plan"

    # session/resume (v1): no replay, a resync, then the response.
    resumed = wire.incoming(resume)
    response = wire.response_position("session/resume", resume)
    before = session_updates(resumed[:response])
    assert not any(_is_replay(u) for u in before), "v1 session/resume must not replay"
    assert info_updates(resumed[:response]), "session/resume sent no resync before responding"
    assert info_updates(resumed[:response])[-1]["_meta"] == {"a": {"x": 1}}

    held = wire.mirror.info(session)
    assert held.meta == {"a": {"x": 1}}
    assert held.title == "Plan"


def test_close_then_reopen_starts_fresh() -> None:
    async def scenario() -> tuple[Transcript, str, str, int]:
        async with python_client() as (conn, wire):
            first = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            await conn.prompt(session_id=first, prompt=text("/title Old\n/meta set old 1"))
            closed = wire.mark()
            await conn.close_session(session_id=first)
            # Reopen the same session: the agent keeps its history, not its closed lifetime.
            await conn.load_session(cwd=CWD, session_id=first, mcp_servers=[])
            await conn.prompt(session_id=first, prompt=text("/meta set new 2"))
            second = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            await conn.prompt(session_id=second, prompt=text("/meta set other 3"))
            return wire, first, second, closed

    wire, first, second, closed = run_async(scenario())
    after_close = wire.incoming(closed)
    reopened = info_updates(m for m in after_close if m.get("params", {}).get("sessionId") == first)
    assert reopened, "nothing was sent for the reopened session"
    # Nothing of the closed lifetime comes back: the fresh lifetime has only what it published.
    assert all("old" not in (u.get("_meta") or {}) for u in reopened), reopened
    assert reopened[-1]["_meta"] == {"new": 2}
    assert wire.mirror.meta(first) == {"new": 2}
    assert wire.mirror.meta(second) == {"other": 3}


def test_burst_racing_resume_ends_with_the_agents_state() -> None:
    burst = 200

    async def scenario() -> tuple[Transcript, str, int, int]:
        async with python_client() as (conn, wire):
            session = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=text('/meta set keep "me"'))
            race = wire.mark()
            await conn.prompt(session_id=session, prompt=text(f"/burst {burst} n"))
            await conn.resume_session(session_id=session, cwd=CWD)
            await wire.until(lambda: (wire.mirror.meta(session) or {}).get("n") == burst)
            final = wire.mark()
            # The agent's own account of its state: the resync it sends on resume.
            await conn.resume_session(session_id=session, cwd=CWD)
            return wire, session, race, final

    wire, session, race, final = run_async(scenario())
    raced = info_updates(wire.between(race, final))
    values = [u["_meta"]["n"] for u in raced if "n" in (u.get("_meta") or {})]
    assert values == sorted(values), f"the client saw n go backwards: {values}"
    assert all(u["_meta"].get("keep") == "me" for u in raced), "a frame lost the other key"

    response = wire.response_position("session/resume", final)
    resync = info_updates(wire.incoming(final)[:response])
    assert resync, "the final resume sent no resync"
    expected = {"keep": "me", "n": burst}
    assert resync[-1]["_meta"] == expected
    assert wire.mirror.meta(session) == expected


def test_stale_failure_resolution_changes_nothing() -> None:
    async def scenario() -> tuple[Transcript, str, int, int]:
        async with python_client() as (conn, wire):
            session = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            await conn.prompt(
                session_id=session,
                prompt=text('/fail inc-1 1 Broken\n/domain set agent-meta notes.owner "alice"'),
            )
            await conn.prompt(session_id=session, prompt=text("/fail inc-1 2 Still broken"))
            stale = wire.mark()
            await conn.prompt(session_id=session, prompt=text("/resolve inc-1 1"))
            matching = wire.mark()
            await conn.prompt(session_id=session, prompt=text("/resolve inc-1 2"))
            return wire, session, stale, matching

    wire, session, stale, matching = run_async(scenario())
    stale_frames = info_updates(wire.between(stale, matching))
    assert stale_frames == [], f"a stale resolution was sent: {stale_frames}"

    cleared = info_updates(wire.incoming(matching))
    assert cleared, "the matching resolution sent nothing"
    domain = cleared[-1]["_meta"]["agent-meta"]
    assert "failure" not in domain
    assert domain["notes"] == {"owner": "alice"}
    assert wire.mirror.meta(session) == {"agent-meta": {"notes": {"owner": "alice"}}}


def test_ask_is_answered_by_the_python_sdk_client() -> None:
    """An agent-to-client request: ``/ask`` sends ``session/request_permission`` through the
    owner's FIFO; the official client's ``request_permission`` handler answers, and the answer
    reaches the waiting prompt (v1: the turn ends with the prompt response)."""
    client = QuietClient(answer="reject")

    async def scenario() -> tuple[Transcript, str]:
        async with python_client(client=client) as (conn, wire):
            session = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            response = await conn.prompt(session_id=session, prompt=text("/ask Deploy now?"))
            assert response.stop_reason == "end_turn"
            return wire, session

    wire, session = run_async(scenario())
    assert client.asked == [
        {"sessionId": session, "title": "Deploy now?", "options": client.asked[0]["options"]}
    ]
    assert [o.option_id for o in client.asked[0]["options"]] == ["allow", "reject"]
    requests = [m for m in wire.incoming() if m.get("method") == "session/request_permission"]
    assert len(requests) == 1
    replies = [
        u["content"]["text"] for u in session_updates(wire.incoming(), "agent_message_chunk")
    ]
    assert replies == ["answer: reject\n"]


def test_set_title_sent_raw_through_the_python_sdk_connection() -> None:
    """The Python SDK has no ``session/set_title`` method: the request goes raw through its
    connection (as an application would send it). The confirmation arrives before the answer;
    the agent's ``/title`` then never reaches the client; ``session/list`` and ``session/load``
    show the client's title (R13)."""

    async def scenario() -> tuple[Transcript, str, Any, Any, int, int]:
        async with python_client() as (conn, wire):
            session = (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=text("/title Generated"))
            asked = wire.mark()
            params = {"sessionId": session, "title": "Mine"}
            answer = await conn._conn.send_request("session/set_title", params)
            later = wire.mark()
            await conn.prompt(session_id=session, prompt=text("/title Again\n/meta set a 1"))
            listing = await conn.list_sessions()
            await conn.load_session(cwd=CWD, session_id=session, mcp_servers=[])
            return wire, session, answer, listing, asked, later

    wire, session, answer, listing, asked, later = run_async(scenario())
    assert answer == {"title": "Mine"}
    confirmed = wire.between(asked, later)
    assert [m.get("method", "response") for m in confirmed] == ["session/update", "response"]
    assert info_updates(confirmed) == [
        {"sessionUpdate": "session_info_update", "title": "Mine", "_meta": {}}
    ]
    assert {u.get("title") for u in info_updates(wire.incoming(later))} == {"Mine"}
    assert [s.title for s in listing.sessions] == ["Mine"]
    assert wire.mirror.info(session).title == "Mine"
    assert wire.mirror.meta(session) == {"a": 1}
