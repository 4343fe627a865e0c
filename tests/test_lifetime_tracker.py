"""The sans-IO plan an adapter follows around an agent's messages (sansio/inbound/_tracker.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_meta import OMITTED, SessionInfo
from agent_meta.sansio.inbound._marks import OPENING_SESSIONS
from agent_meta.sansio.inbound._tracker import (
    PENDING_REQUESTS,
    InfoUpdate,
    LifetimeStep,
    LifetimeTracker,
    OpeningStart,
    OutboundPlan,
    ReplayStart,
)


def request(request_id: object, method: str, **params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def result(request_id: object, value: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": "boom"}}


def info(session_id: str, **update: object) -> dict[str, Any]:
    body = {"sessionUpdate": "session_info_update", **update}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": body},
    }


def no_lifetimes(_: str) -> bool:
    return False


def nothing_known(_: str) -> SessionInfo:
    return SessionInfo()


def every_lifetime(_: str) -> bool:
    return True


def test_initialize_response_sets_the_protocol_version() -> None:
    tracker = LifetimeTracker()
    assert tracker.inbound(request(0, "initialize", protocolVersion=1), no_lifetimes) is None
    plan = tracker.outbound(result(0, {"protocolVersion": 1}), no_lifetimes)
    assert plan == OutboundPlan(protocol_version=1)


@pytest.mark.parametrize("version", [None, "1", -1, 0, 3, True, 1.0])
def test_an_initialize_response_without_a_usable_version_changes_nothing(version: object) -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(0, "initialize", protocolVersion=1), no_lifetimes)
    assert tracker.outbound(result(0, {"protocolVersion": version}), no_lifetimes) == OutboundPlan()


@pytest.mark.parametrize("method", ["session/new", "session/fork"])
def test_a_created_session_is_opened_before_its_response(method: str) -> None:
    tracker = LifetimeTracker()
    assert tracker.inbound(request(1, method, cwd="/"), no_lifetimes) == OpeningStart(1)
    plan = tracker.outbound(result(1, {"sessionId": "s1"}), no_lifetimes)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.OPEN)


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_load_and_resume_open_at_the_request_and_resync_before_the_response(method: str) -> None:
    tracker = LifetimeTracker()
    start = tracker.inbound(request("r", method, sessionId="s1", cwd="/"), no_lifetimes)
    assert start == ReplayStart("s1", 1)
    plan = tracker.outbound(result("r", {}), every_lifetime)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.RESYNC)


def start_replay(tracker: LifetimeTracker, request_id: object, held: bool) -> int:
    """A load of s1 arrives; its token. ``held``: the lifetime existed before it."""
    load = request(request_id, "session/load", sessionId="s1", cwd="/")
    start = tracker.inbound(load, every_lifetime if held else no_lifetimes)
    assert start is not None
    return start.token


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_a_replay_into_a_lifetime_that_held_its_state_passes_through(method: str) -> None:
    tracker = LifetimeTracker()
    start = tracker.inbound(request("r", method, sessionId="s1", cwd="/"), every_lifetime)
    assert start is not None
    token = start.token
    replayed = tracker.outbound(info("s1", _meta={"old": 1}), every_lifetime, handling=token)
    assert replayed == OutboundPlan(session_id="s1")  # written as it is, not folded
    assert tracker.statistics.replayed_updates == 1
    plan = tracker.outbound(result("r", {}), every_lifetime, handling=token)
    assert plan.step is LifetimeStep.RESYNC
    # A task the handler started, still sending after the response: live.
    live = tracker.outbound(info("s1", _meta={"new": 1}), every_lifetime, handling=token)
    assert live.update == InfoUpdate(meta={"new": 1})


@pytest.mark.parametrize(
    ("params", "replays"),
    [
        ({}, False),
        ({"replayFrom": None}, False),
        ({"replayFrom": "start"}, False),  # malformed: the SDK takes it as no cursor
        ({"replayFrom": {"type": "start"}}, True),
        ({"replayFrom": {"type": "_later", "from": 3}}, True),  # a cursor it may not know
    ],
)
def test_a_v2_resume_replays_only_with_a_replay_cursor(
    params: dict[str, object], replays: bool
) -> None:
    tracker = LifetimeTracker()
    resume = request("r", "session/resume", sessionId="s1", cwd="/", **params)
    start = tracker.inbound(resume, every_lifetime, protocol_version=2)
    assert start == ReplayStart("s1", 1, replays, held=True)
    sent = tracker.outbound(info("s1", _meta={"k": 1}), every_lifetime, handling=start.token)
    if replays:
        assert sent == OutboundPlan(session_id="s1")  # replay: written as it is
    else:
        assert sent.update == InfoUpdate(meta={"k": 1})  # live: it joins the state
    plan = tracker.outbound(result("r", {}), every_lifetime, handling=start.token)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.RESYNC)


def test_a_v1_resume_is_replay_whatever_it_carries() -> None:
    """Real v1 agents (fast-agent, hermes) replay history on resume, so what the handler
    sends is replay there, ``replayFrom`` or not."""
    tracker = LifetimeTracker()
    resume = request("r", "session/resume", sessionId="s1", cwd="/")
    start = tracker.inbound(resume, every_lifetime, protocol_version=1)
    assert start == ReplayStart("s1", 1, True, held=True)
    sent = tracker.outbound(info("s1", _meta={"k": 1}), every_lifetime, handling=start.token)
    assert sent == OutboundPlan(session_id="s1")


def test_a_failed_v2_resume_without_replay_discards_the_lifetime_it_opened() -> None:
    tracker = LifetimeTracker()
    resume = request("r", "session/resume", sessionId="s1", cwd="/")
    assert tracker.inbound(resume, no_lifetimes, protocol_version=2) is not None
    plan = tracker.outbound(error("r"), every_lifetime)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.DISCARD)


def test_a_live_update_racing_a_replay_is_absorbed() -> None:
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=True)
    # A background task of the agent publishes while the load handler runs.
    live = tracker.outbound(info("s1", _meta={"n": 7}), every_lifetime)
    assert live.update == InfoUpdate(meta={"n": 7})
    other = tracker.outbound(info("s1", _meta={"n": 8}), every_lifetime, handling=token + 1)
    assert other.update == InfoUpdate(meta={"n": 8})  # no such request: not s1's replay
    assert tracker.statistics.replayed_updates == 0


def test_two_loads_of_one_session_each_keep_their_replay_to_their_own_response() -> None:
    tracker = LifetimeTracker()
    first = start_replay(tracker, "a", held=True)
    second = start_replay(tracker, "b", held=True)
    assert tracker.outbound(result("a", {}), every_lifetime).step is LifetimeStep.RESYNC
    still = tracker.outbound(info("s1", _meta={"old": 1}), every_lifetime, handling=second)
    assert still.update is None  # b is still replaying
    after = tracker.outbound(info("s1", _meta={"x": 1}), every_lifetime, handling=first)
    assert after.update == InfoUpdate(meta={"x": 1})  # a's work after its response is live


def test_a_replay_into_a_lifetime_the_request_opened_builds_its_state() -> None:
    """The replay is written as it is and kept in the request's own scratch state, made known
    at its response, before the resync (the plan's seed)."""
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=False)
    replayed = tracker.outbound(info("s1", title="from history"), every_lifetime, handling=token)
    assert replayed == OutboundPlan(session_id="s1")
    assert (
        tracker.outbound(info("s1", _meta={"a": 1}), every_lifetime, handling=token).update is None
    )
    assert (tracker.statistics.replayed_updates, tracker.statistics.seeded_updates) == (0, 2)
    plan = tracker.outbound(result("r", {}), every_lifetime, known=nothing_known)
    assert plan == OutboundPlan(
        session_id="s1",
        step=LifetimeStep.RESYNC,
        seed=InfoUpdate(title="from history", meta={"a": 1}),
    )


def test_a_failed_load_ends_the_replay_too() -> None:
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=True)
    assert tracker.outbound(error("r"), every_lifetime) == OutboundPlan()
    plan = tracker.outbound(info("s1", title="x"), every_lifetime, handling=token)
    assert plan.update is not None


@pytest.mark.parametrize("answer", [error("r"), result("r", None)])
def test_a_failed_load_discards_the_lifetime_it_opened(answer: dict[str, Any]) -> None:
    tracker = LifetimeTracker()
    start_replay(tracker, "r", held=False)
    plan = tracker.outbound(answer, every_lifetime)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.DISCARD)


def test_a_failed_load_keeps_a_lifetime_another_load_still_uses() -> None:
    tracker = LifetimeTracker()
    start_replay(tracker, "a", held=False)
    start_replay(tracker, "b", held=True)  # finds the lifetime a opened: inherits "not held"
    assert tracker.outbound(error("a"), every_lifetime) == OutboundPlan()
    plan = tracker.outbound(error("b"), every_lifetime)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.DISCARD)


def test_a_failed_load_keeps_a_lifetime_another_load_has_resynced() -> None:
    tracker = LifetimeTracker()
    start_replay(tracker, "a", held=False)
    start_replay(tracker, "b", held=True)
    assert tracker.outbound(result("a", {}), every_lifetime).step is LifetimeStep.RESYNC
    assert tracker.outbound(error("b"), every_lifetime) == OutboundPlan()


def test_only_the_replaying_session_passes_through() -> None:
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=True)
    plan = tracker.outbound(info("s2", title="x"), every_lifetime, handling=token)
    assert plan.update is not None


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/close"])
@pytest.mark.parametrize("answer", [None, [], "ok"])
def test_a_result_that_is_not_an_object_is_no_success(method: str, answer: object) -> None:
    """The SDK answers an unimplemented handler with ``result: null`` (a client rejects it):
    no resync is sent before it and no lifetime ends."""
    tracker = LifetimeTracker()
    tracker.inbound(request("r", method, sessionId="s1", cwd="/"), every_lifetime)
    assert tracker.outbound(result("r", answer), every_lifetime) == OutboundPlan()


def test_close_ends_the_lifetime_before_its_response() -> None:
    tracker = LifetimeTracker()
    assert tracker.inbound(request(3, "session/close", sessionId="s1"), no_lifetimes) is None
    plan = tracker.outbound(result(3, {}), every_lifetime)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.CLOSE)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("initialize", {"protocolVersion": 1}),
        ("session/new", {"cwd": "/"}),
        ("session/load", {"sessionId": "s1", "cwd": "/"}),
        ("session/resume", {"sessionId": "s1", "cwd": "/"}),
        ("session/close", {"sessionId": "s1"}),
    ],
)
def test_an_error_response_changes_no_lifetime(method: str, params: dict[str, object]) -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(9, method, **params), every_lifetime)
    assert tracker.outbound(error(9), every_lifetime) == OutboundPlan()
    # The request is answered: a second response with its id is not planned again.
    assert tracker.outbound(result(9, {"sessionId": "s1"}), every_lifetime) == OutboundPlan()


def test_ids_of_different_json_types_are_different_requests() -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(1, "session/close", sessionId="int"), no_lifetimes)
    tracker.inbound(request("1", "session/close", sessionId="str"), no_lifetimes)
    assert tracker.outbound(result("1", {}), every_lifetime).session_id == "str"
    assert tracker.outbound(result(1, {}), every_lifetime).session_id == "int"


@pytest.mark.parametrize("request_id", [True, 1.5, [1], {"a": 1}])
def test_requests_with_ids_the_agent_refuses_are_not_remembered(request_id: object) -> None:
    tracker = LifetimeTracker()
    assert (
        tracker.inbound(request(request_id, "session/load", sessionId="s1"), no_lifetimes) is None
    )
    assert tracker.outbound(result(request_id, {}), every_lifetime) == OutboundPlan()


def test_untracked_methods_and_notifications_are_not_remembered() -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(4, "session/prompt", sessionId="s1", prompt=[]), no_lifetimes)
    tracker.inbound(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}, no_lifetimes
    )
    assert tracker.outbound(result(4, {"stopReason": "end_turn"}), every_lifetime) == OutboundPlan()


def test_the_oldest_pending_request_is_forgotten_past_the_bound() -> None:
    tracker = LifetimeTracker()
    for request_id in range(PENDING_REQUESTS + 1):
        tracker.inbound(
            request(request_id, "session/close", sessionId=f"s{request_id}"), no_lifetimes
        )
    assert tracker.statistics.forgotten_requests == 1
    assert tracker.outbound(result(0, {}), every_lifetime) == OutboundPlan()
    newest = tracker.outbound(result(PENDING_REQUESTS, {}), every_lifetime)
    assert newest.session_id == f"s{PENDING_REQUESTS}"


def test_an_info_update_on_an_open_lifetime_becomes_a_publication() -> None:
    tracker = LifetimeTracker()
    message = info("s1", title="T", _meta={"k": 1, "gone": None})
    message["params"]["_meta"] = {"traceparent": "00-1"}
    plan = tracker.outbound(message, every_lifetime)
    assert plan.session_id == "s1"
    assert plan.update == InfoUpdate(
        title="T",
        updated_at=OMITTED,
        meta={"k": 1, "gone": None},
        notification_meta={"traceparent": "00-1"},
    )
    # Absorbed is counted by the driver once the owner accepts the publication.
    assert tracker.statistics.absorbed_updates == 0


def test_null_fields_stay_null_and_absent_fields_stay_omitted() -> None:
    plan = LifetimeTracker().outbound(info("s1", title=None, _meta=None), every_lifetime)
    assert plan.update == InfoUpdate(title=None, updated_at=OMITTED, meta=None)


def test_an_info_update_without_a_lifetime_passes_through_and_is_counted() -> None:
    tracker = LifetimeTracker()
    opened: list[str] = []

    def has_lifetime(session_id: str) -> bool:
        opened.append(session_id)
        return False

    plan = tracker.outbound(info("s1", _meta={"k": 1}), has_lifetime)
    assert plan == OutboundPlan(session_id="s1")
    assert opened == ["s1"]
    assert tracker.statistics.passed_through_updates == 1
    assert tracker.statistics.absorbed_updates == 0


@pytest.mark.parametrize(
    "message",
    [
        info("s1", title="T", extra=1),
        {**info("s1"), "params": {**info("s1")["params"], "other": 1}},
        {**info("s1"), "params": {**info("s1")["params"], "_meta": "not an object"}},
    ],
    ids=["update field", "params field", "params meta"],
)
def test_an_info_update_the_owner_would_not_reproduce_passes_through(
    message: dict[str, Any],
) -> None:
    tracker = LifetimeTracker()
    assert tracker.outbound(message, every_lifetime) == OutboundPlan(session_id="s1")
    assert tracker.statistics.passed_through_updates == 1


def test_other_session_updates_carry_their_session_for_fencing() -> None:
    chunk = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk"}},
    }
    assert LifetimeTracker().outbound(chunk, every_lifetime) == OutboundPlan(session_id="s1")


def test_a_request_to_the_client_is_marked_as_a_request() -> None:
    ask = request(0, "session/request_permission", sessionId="s1", options=[])
    plan = LifetimeTracker().outbound(ask, every_lifetime)
    assert plan == OutboundPlan(session_id="s1", is_request=True)


def test_a_load_with_a_null_id_is_tracked_and_resynced() -> None:
    tracker = LifetimeTracker()
    message = {
        "jsonrpc": "2.0",
        "id": None,
        "method": "session/load",
        "params": {"sessionId": "s1"},
    }
    replay = tracker.inbound(message, lambda _sid: True)
    assert replay is not None
    replayed = tracker.outbound(info("s1", _meta={"old": 1}), every_lifetime, handling=replay.token)
    assert replayed == OutboundPlan(session_id="s1")  # replay of a lifetime that held its state
    plan = tracker.outbound({"jsonrpc": "2.0", "id": None, "result": {}}, every_lifetime)
    assert plan == OutboundPlan(step=LifetimeStep.RESYNC, session_id="s1")


def test_a_notification_is_not_taken_for_a_null_id_request() -> None:
    tracker = LifetimeTracker()
    message = {"jsonrpc": "2.0", "method": "session/load", "params": {"sessionId": "s1"}}
    assert tracker.inbound(message, lambda _sid: True) is None
    plan = tracker.outbound({"jsonrpc": "2.0", "id": None, "result": {}}, every_lifetime)
    assert plan == OutboundPlan()


@pytest.mark.parametrize(
    ("offset_timestamps", "kept"),
    [(True, OMITTED), (False, "2026-12-01T14:10:03.144382")],
)
def test_an_updated_at_without_an_offset_is_dropped_only_where_the_version_needs_one(
    offset_timestamps: bool, kept: object
) -> None:
    tracker = LifetimeTracker()
    message = info("s1", title="T", updatedAt="2026-12-01T14:10:03.144382", _meta={"k": 1})
    plan = tracker.outbound(message, every_lifetime, offset_timestamps=offset_timestamps)
    assert plan.update is not None
    assert (plan.update.title, plan.update.updated_at, plan.update.meta) == ("T", kept, {"k": 1})
    assert plan.update.dropped == (("updatedAt",) if offset_timestamps else ())
    assert tracker.statistics.dropped_fields == (1 if offset_timestamps else 0)


def test_an_updated_at_with_an_offset_is_kept_under_v2() -> None:
    message = info("s1", updatedAt="2026-12-01T14:10:03Z")
    plan = LifetimeTracker().outbound(message, every_lifetime, offset_timestamps=True)
    assert plan.update == InfoUpdate(updated_at="2026-12-01T14:10:03Z")


# -- what the handlers of the requests that open lifetimes send (issue 27) ----------------------


@pytest.mark.parametrize("method", ["session/new", "session/fork"])
def test_what_a_new_handler_sends_before_its_response_is_known_as_the_lifetime_opens(
    method: str,
) -> None:
    """(a) pydantic-acp publishes in its session/new handler: the client has the update, so
    the lifetime the response opens must know it (else a v1 frame after it wipes it)."""
    tracker = LifetimeTracker()
    start = tracker.inbound(request(1, method, cwd="/"), no_lifetimes)
    assert isinstance(start, OpeningStart)
    token = start.token
    early = info("s1", updatedAt="2026-01-01T00:00:00Z", _meta={"a": 1, "b": 2})
    assert tracker.outbound(early, no_lifetimes, handling=token) == OutboundPlan(session_id="s1")
    tracker.outbound(info("s1", title="T", _meta={"b": None}), no_lifetimes, handling=token)
    other = tracker.outbound(info("s9", title="x"), no_lifetimes, handling=token)
    assert other == OutboundPlan(session_id="s9")  # kept too, but no response opens s9
    unmarked = tracker.outbound(info("s1", title="from elsewhere"), no_lifetimes)
    assert unmarked == OutboundPlan(session_id="s1")  # no request's: passed through, no more
    stats = tracker.statistics
    assert (stats.seeded_updates, stats.passed_through_updates) == (3, 1)
    plan = tracker.outbound(result(1, {"sessionId": "s1"}), no_lifetimes)
    assert plan == OutboundPlan(
        session_id="s1",
        step=LifetimeStep.OPEN,
        seed=InfoUpdate(title="T", updated_at="2026-01-01T00:00:00Z", meta={"a": 1}),
    )
    # Answered: what its tasks send now is a publication on the open lifetime.
    after = tracker.outbound(info("s1", title="later"), every_lifetime, handling=token)
    assert after.update == InfoUpdate(title="later")


def test_what_a_failed_new_handler_sent_is_forgotten() -> None:
    tracker = LifetimeTracker()
    start = tracker.inbound(request(1, "session/new", cwd="/"), no_lifetimes)
    assert isinstance(start, OpeningStart)
    tracker.outbound(info("s1", title="T"), no_lifetimes, handling=start.token)
    assert tracker.outbound(error(1), no_lifetimes) == OutboundPlan()
    plan = tracker.outbound(info("s1", title="U"), no_lifetimes, handling=start.token)
    assert plan == OutboundPlan(session_id="s1")
    assert tracker.statistics.passed_through_updates == 1


def test_an_opening_keeps_what_the_owner_would_take_and_a_bounded_number_of_sessions() -> None:
    tracker = LifetimeTracker()
    start = tracker.inbound(request(1, "session/new", cwd="/"), no_lifetimes)
    assert isinstance(start, OpeningStart)
    deep: object = 1
    for _ in range(300):
        deep = {"a": deep}
    tracker.outbound(info("s0", _meta={"deep": deep}), no_lifetimes, handling=start.token)
    for n in range(OPENING_SESSIONS + 1):
        tracker.outbound(info(f"s{n}", title="T"), no_lifetimes, handling=start.token)
    stats = tracker.statistics
    assert (stats.seeded_updates, stats.passed_through_updates) == (OPENING_SESSIONS, 2)
    plan = tracker.outbound(result(1, {"sessionId": "s0"}), no_lifetimes)
    assert plan.seed == InfoUpdate(title="T")


def known_at(stamp: str) -> Any:
    def known(_: str) -> SessionInfo:
        return SessionInfo(updated_at=stamp)

    return known


@pytest.mark.parametrize(
    ("stamps", "current"),
    [
        (["2026-01-02T00:00:00Z"], [True]),  # newer than known: the agent's current info
        (["2026-01-01T00:00:00Z"], [False]),  # as known: history
        (["2025-12-31T23:59:59+00:00"], [False]),  # older
        (["2026-01-03T00:00:00Z", "2026-01-02T00:00:00Z"], [True, False]),  # older than replayed
        (["2026-01-01T01:00:00+02:00"], [False]),  # reads later, is an earlier instant
        (["2026-01-02T00:00:00"], [False]),  # no offset: not comparable
        ([None], [False]),  # no updatedAt
    ],
)
def test_in_a_window_of_a_held_lifetime_only_a_newer_updated_at_is_current_info(
    stamps: list[str | None], current: list[bool]
) -> None:
    """(b) Replay is replay: pydantic-acp replays, then sends its current info with a fresh
    updatedAt; that is state (absorbed), the rest of the window is history."""
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=True)
    known = known_at("2026-01-01T00:00:00Z")
    seen = []
    for stamp in stamps:
        fields: dict[str, object] = {"title": "T"}
        if stamp is not None:
            fields["updatedAt"] = stamp
        plan = tracker.outbound(info("s1", **fields), every_lifetime, handling=token, known=known)
        seen.append(plan.update is not None)
    assert seen == current


def test_nothing_known_to_compare_with_keeps_every_update_replay() -> None:
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=True)
    plan = tracker.outbound(
        info("s1", updatedAt="2099-01-01T00:00:00Z"), every_lifetime, handling=token
    )
    assert plan.update is None
    assert tracker.statistics.replayed_updates == 1


HISTORY = [{"a": 1}, {"b": 2}, None, {"c": 3}]
"""(c) the history of the issue: a=1, b=2, clear, c=3 (the state is {"c": 3})."""


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_loads_replaying_at_once_each_end_at_the_true_state(first: str) -> None:
    """(c) Two loads of one session opened with nothing known replay the history at once,
    interleaved: none of it joins the state while they run, and the first to succeed makes its
    own replay known (the other then finds a lifetime that holds it)."""
    tracker = LifetimeTracker()
    tokens = {
        "a": start_replay(tracker, "a", held=False),
        "b": start_replay(tracker, "b", held=True),
    }
    for patch in HISTORY:
        for name in ("a", "b"):
            plan = tracker.outbound(info("s1", _meta=patch), every_lifetime, handling=tokens[name])
            assert plan == OutboundPlan(session_id="s1")
    second = "b" if first == "a" else "a"
    plan = tracker.outbound(result(first, {}), every_lifetime, known=nothing_known)
    assert plan == OutboundPlan(
        session_id="s1", step=LifetimeStep.RESYNC, seed=InfoUpdate(meta={"c": 3})
    )
    plan = tracker.outbound(result(second, {}), every_lifetime, known=nothing_known)
    assert plan == OutboundPlan(session_id="s1", step=LifetimeStep.RESYNC)


def test_a_load_that_fails_leaves_the_other_building_the_state() -> None:
    tracker = LifetimeTracker()
    a = start_replay(tracker, "a", held=False)
    b = start_replay(tracker, "b", held=True)  # finds the lifetime a opened: builds it too
    tracker.outbound(info("s1", _meta={"a": 1}), every_lifetime, handling=a)
    for patch in HISTORY:
        tracker.outbound(info("s1", _meta=patch), every_lifetime, handling=b)
    assert tracker.outbound(error("a"), every_lifetime) == OutboundPlan()
    plan = tracker.outbound(result("b", {}), every_lifetime, known=nothing_known)
    assert plan.seed == InfoUpdate(meta={"c": 3})


def test_what_was_published_while_a_replay_built_the_state_wins_over_the_history() -> None:
    """The history is older than anything published meanwhile: a key a live publication set
    or removed, a title it set, keep their value; the rest of the history goes beneath."""
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=False)
    for patch in ({"a": 1, "b": 1, "c": 1, "d": 1}, {"title": "old"}):
        fields = patch if "title" in patch else {"_meta": patch}
        tracker.outbound(info("s1", **fields), every_lifetime, handling=token)
    live = tracker.outbound(info("s1", _meta={"a": 2, "b": None}), every_lifetime)
    assert live.update is not None  # a publication: joins the state now

    def known(_: str) -> SessionInfo:
        return SessionInfo(title="new", meta={"a": 2, "x": 9})

    plan = tracker.outbound(result("r", {}), every_lifetime, known=known)
    assert plan.seed == InfoUpdate(meta={"c": 1, "d": 1})


def test_a_clear_published_while_a_replay_built_the_state_keeps_the_history_out() -> None:
    tracker = LifetimeTracker()
    token = start_replay(tracker, "r", held=False)
    tracker.outbound(
        info("s1", _meta={"a": 1}, updatedAt="2026-01-01T00:00:00Z"), every_lifetime, handling=token
    )
    tracker.outbound(info("s1", _meta=None), every_lifetime)
    plan = tracker.outbound(result("r", {}), every_lifetime, known=nothing_known)
    assert plan.seed == InfoUpdate(updated_at="2026-01-01T00:00:00Z")


# -- client-set titles (R13) -------------------------------------------------------------------


def test_set_title_is_not_tracked_where_the_connection_answers_it() -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(5, "session/set_title", sessionId="s", title="T"), every_lifetime)
    assert tracker.answering(result(5, {"title": "T"})) is None
    assert tracker.outbound(result(5, {"title": "T"}), every_lifetime) == OutboundPlan()


@pytest.mark.parametrize(
    ("answer", "title"),
    [({"title": "T (stored)"}, "T (stored)"), ({}, "T"), ({"title": 3}, "T")],
)
def test_a_forwarded_set_title_answered_by_the_agent_adopts_the_stored_title(
    answer: object, title: str
) -> None:
    """The TypeScript SDK shape answers the title it stored; the RFD's empty result means the
    title was stored as given."""
    tracker = LifetimeTracker()
    tracker.forwards_titles = True
    tracker.inbound(request(5, "session/set_title", sessionId="s", title="T"), every_lifetime)
    plan = tracker.outbound(result(5, answer), every_lifetime)
    assert plan == OutboundPlan(step=LifetimeStep.ADOPT_TITLE, session_id="s", title=title)


def test_a_forwarded_set_title_the_agent_refused_adopts_nothing() -> None:
    tracker = LifetimeTracker()
    tracker.forwards_titles = True
    tracker.inbound(request(5, "session/set_title", sessionId="s", title="T"), every_lifetime)
    assert tracker.outbound(error(5), every_lifetime) == OutboundPlan()
    tracker.inbound(request(6, "session/set_title", sessionId="s", title=7), every_lifetime)
    assert tracker.outbound(result(6, {}), every_lifetime) == OutboundPlan()  # no title known
    tracker.inbound(request(7, "session/set_title", title="T"), every_lifetime)
    assert tracker.outbound(result(7, {"title": "T"}), every_lifetime) == OutboundPlan()


def test_answering_names_the_request_a_result_answers_without_planning_it() -> None:
    tracker = LifetimeTracker()
    tracker.inbound(request(1, "session/list"), no_lifetimes)
    tracker.inbound(request(2, "initialize", protocolVersion=2), no_lifetimes)
    tracker.inbound(request(3, "session/prompt", sessionId="s"), no_lifetimes)
    assert tracker.answering(result(1, {"sessions": []})) == "session/list"
    assert tracker.answering(result(1, {"sessions": []})) == "session/list"  # still remembered
    assert tracker.answering(result(2, {"protocolVersion": 2})) == "initialize"
    assert tracker.answering(error(2)) is None
    assert tracker.answering(result(3, {})) is None  # not a tracked method
    assert tracker.answering(request(1, "session/list")) is None
    assert tracker.outbound(result(1, {"sessions": []}), no_lifetimes) == OutboundPlan()
    assert tracker.answering(result(1, {"sessions": []})) is None  # planned: forgotten
