"""Client-set titles (R13) in the pure send queue and the sans-IO title helpers.

The queue is driven by hand as in ``tests/test_sendqueue.py``: once a lifetime's title is the
client's (a :class:`ClientTitle` edit), every other publication's ``title`` is dropped before it
is folded or sent, the rest of it still goes out, and the resync and the store record carry the
client's title.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agent_meta import FrameTooLargeError, JsonRpcError
from agent_meta.core._errors import StoreCorruptError
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.sansio.inbound._titles import (
    MAX_TITLE_LENGTH,
    TitleRequest,
    advertise_titles,
    advertises_titles,
    listed_session_ids,
    read_title_request,
    retitle_listing,
)
from agent_meta.sansio.queue._edits import ClientTitle, Outcome
from agent_meta.sansio.queue._entries import StoreBatch
from agent_meta.sansio.queue._records import StoredLifetime, restore_state
from agent_meta.sansio.queue._state import LifetimeState
from tests.test_sendqueue import SID, drain, enc, info, make_queue, opened, parse, publish, take

if TYPE_CHECKING:
    from agent_meta.sansio.queue._queue import SendQueue


def client(title: str, *, confirm: bool = True, v1: bool = False) -> ClientTitle:
    return ClientTitle(enc(title=title, offset_timestamps=not v1), confirm)


def set_by_client(q: SendQueue, state: LifetimeState, title: str, **kwargs: Any) -> None:
    assert q.submit(state, client(title, **kwargs)) is Outcome.ACCEPTED


# -- the rule (R13) ----------------------------------------------------------------------------


def test_r13_the_client_title_is_confirmed_then_the_agent_title_is_dropped_and_the_rest_sent() -> (
    None
):
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title="agent's"))
    drain(q)
    set_by_client(q, s, "mine")
    assert drain(q) == [info({"title": "mine"})]
    assert publish(q, s, enc(title="generated", meta={"a": 1}))
    assert drain(q) == [info({"_meta": {"a": 1}})]
    assert s.snapshot().title == "mine"
    assert s.client_title
    assert q.statistics().suppressed_titles == 1


@pytest.mark.parametrize("title", ["generated", None])
def test_r13_a_publication_of_only_a_title_sends_nothing(title: str | None) -> None:
    q = make_queue()
    s = opened(q)
    set_by_client(q, s, "mine")
    drain(q)
    assert q.submit(s, enc(title=title)) is Outcome.ACCEPTED
    assert drain(q) == []
    assert s.snapshot().title == "mine"
    assert q.statistics().suppressed_titles == 1


def test_r13_notification_meta_of_a_dropped_title_still_travels_on_its_frame() -> None:
    q = make_queue()
    s = opened(q)
    set_by_client(q, s, "mine")
    drain(q)
    publish(q, s, enc(title="generated", notification_meta={"traceparent": "t"}))
    assert drain(q) == [info({}, nmeta={"traceparent": "t"})]


def test_r13_each_later_client_title_replaces_the_last_and_is_confirmed_again() -> None:
    q = make_queue()
    s = opened(q)
    set_by_client(q, s, "one")
    set_by_client(q, s, "two")
    set_by_client(q, s, "two")  # the same again is still confirmed (the RFD: every success)
    frames = drain(q)
    assert frames[-1] == info({"title": "two"})
    assert s.snapshot().title == "two"


def test_r13_the_resync_carries_the_client_title() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"a": 1}))
    set_by_client(q, s, "mine")
    publish(q, s, enc(title="generated"))
    drain(q)
    q.resync(s)
    assert drain(q) == [info({"_meta": None}), info({"title": "mine", "_meta": {"a": 1}})]


def test_r13_v1_frames_carry_the_client_title_in_the_whole_object() -> None:
    q = make_queue(protocol_version=1)
    s = opened(q)
    set_by_client(q, s, "mine", v1=True)
    assert drain(q) == [info({"title": "mine", "_meta": {}})]
    publish(q, s, enc(title="generated", meta={"a": 1}, offset_timestamps=False))
    assert drain(q) == [info({"title": "mine", "_meta": {"a": 1}})]


def test_r13_a_queued_agent_title_is_overtaken_by_the_client_title_it_merges_with() -> None:
    """Coalescing (R3): an agent title still queued when the client sets one merges with the
    confirmation; later publications merge without touching the title."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(meta={"x": 1}))
    take(q)  # the writer is busy with nothing; the next ones queue up
    q.written()
    publish(q, s, enc(title="generated", meta={"a": 1}))
    set_by_client(q, s, "mine")
    publish(q, s, enc(title="late", meta={"b": 2}))
    assert drain(q) == [info({"title": "mine", "_meta": {"a": 1, "b": 2}})]


def test_r13_a_seed_title_is_dropped_too() -> None:
    q = make_queue()
    s = opened(q)
    set_by_client(q, s, "mine")
    drain(q)
    assert q.seed(s, enc(title=None)) is Outcome.ACCEPTED
    assert q.seed(s, enc(title="known", meta={"k": 1})) is Outcome.ACCEPTED
    assert s.snapshot().title == "mine"
    assert s.snapshot().meta == {"k": 1}
    assert q.statistics().suppressed_titles == 2


def test_r13_without_room_nothing_changes() -> None:
    q = make_queue(capacity=1, coalesce=False)
    s = opened(q)
    assert q.submit_raw(b'{"jsonrpc":"2.0","id":1,"result":{}}\n') is Outcome.ACCEPTED
    assert q.submit(s, client("mine")) is Outcome.FULL
    assert not s.client_title
    assert s.title is None


def test_r13_a_client_title_on_an_ended_lifetime_is_fenced() -> None:
    q = make_queue()
    s = opened(q)
    q.close_lifetime(s)
    assert q.submit(s, client("mine")) is Outcome.FENCED
    assert not s.client_title


def test_r13_a_title_the_frame_limit_cannot_carry_changes_nothing() -> None:
    q = make_queue(max_frame_bytes=256)
    s = opened(q)
    with pytest.raises(FrameTooLargeError):
        q.submit(s, client("x" * 300))
    assert not s.client_title
    assert drain(q) == []


def test_r13_an_adopted_title_the_client_was_told_sends_nothing() -> None:
    """A proxy's agent answered set_title and confirmed it: the proxy only keeps it."""
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title="mine"))  # the agent's own confirmation, folded as it passed
    drain(q)
    set_by_client(q, s, "mine", confirm=False)
    assert drain(q) == []
    assert s.client_title
    publish(q, s, enc(title="generated"))
    assert drain(q) == []


def test_r13_an_adopted_title_the_client_was_not_told_is_resynced() -> None:
    q = make_queue()
    s = opened(q)
    publish(q, s, enc(title="old", meta={"a": 1}))
    drain(q)
    set_by_client(q, s, "new", confirm=False)
    assert drain(q) == [info({"_meta": None}), info({"title": "new", "_meta": {"a": 1}})]


# -- stored (persist before write, R13 across restarts) -----------------------------------------


def test_r13_the_confirmation_is_written_only_once_the_flag_and_title_are_stored() -> None:
    q = make_queue(durable=True)
    s = opened(q)
    q.stored(q.next_action())  # type: ignore[arg-type]  # the new lifetime's first record
    set_by_client(q, s, "mine")
    q.submit_raw(b'{"jsonrpc":"2.0","id":7,"result":{"title":"mine"}}\n')
    batch = q.next_action()
    assert isinstance(batch, StoreBatch)
    assert [(r.title, r.client_title) for r in batch.saves] == [('"mine"', True)]
    q.stored(batch)
    assert parse(take_written(q)) == info({"title": "mine"})
    assert parse(take_written(q))["id"] == 7  # the response follows the confirmation (R2)


def take_written(q: SendQueue) -> Any:
    out = take(q)
    q.written()
    return out


def test_r13_a_restored_lifetime_keeps_dropping_agent_titles() -> None:
    record = StoredLifetime(SID, title='"mine"', client_title=True, epoch=2)
    q = make_queue(durable=True)
    s = q.open_lifetime(SID, seed=enc(title=None, meta={"k": 1}), record=record)
    assert s.client_title
    assert s.snapshot().title == "mine"
    assert s.snapshot().meta == {"k": 1}  # the rest of the seed stands
    publish(q, s, enc(title="generated"))
    assert s.snapshot().title == "mine"
    assert q.statistics().suppressed_titles == 2


def test_r13_a_record_marking_a_client_title_without_one_is_corrupt() -> None:
    for title in (None, "null"):
        with pytest.raises(StoreCorruptError, match="client-set title"):
            restore_state(LifetimeState(SID), StoredLifetime(SID, title, client_title=True), "db")


# -- session/set_title params ------------------------------------------------------------------


def test_a_valid_request_reads_as_is() -> None:
    assert read_title_request({"sessionId": "s", "title": "  Plan  "}) == TitleRequest(
        "s", "  Plan  "
    )
    longest = "é" * MAX_TITLE_LENGTH  # code points, not bytes
    assert read_title_request({"sessionId": "s", "title": longest}).title == longest


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"sessionId": "s"}, "'title' is missing"),
        ({"sessionId": "s", "title": None}, "'title' must be a string, not null"),
        ({"sessionId": "s", "title": 3}, "not a number"),
        ({"sessionId": "s", "title": ["a"]}, "not an array"),
        ({"sessionId": "s", "title": ""}, "empty"),
        ({"sessionId": "s", "title": " \t\n"}, "empty"),
        ({"sessionId": "s", "title": "x" * (MAX_TITLE_LENGTH + 1)}, "must not exceed 8192"),
        ({"title": "t"}, "'sessionId' is missing"),
        ({"sessionId": 1, "title": "t"}, "'sessionId' must be a string"),
        ([], "takes an object"),
    ],
)
def test_a_bad_request_is_32602(params: object, why: str) -> None:
    with pytest.raises(JsonRpcError, match=why) as caught:
        read_title_request(params)
    assert caught.value.code == ErrorCode.INVALID_PARAMS


# -- initialize: advertising both shapes -------------------------------------------------------

BOTH: dict[str, Any] = {"setTitle": {}, "title": {}}


def test_v1_advertises_both_capabilities_creating_what_is_missing() -> None:
    assert advertise_titles({"protocolVersion": 1}) == {
        "protocolVersion": 1,
        "agentCapabilities": {"sessionCapabilities": BOTH},
    }
    given: dict[str, Any] = {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"list": {}}},
    }
    assert advertise_titles(given) == {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"list": {}, **BOTH}},
    }
    assert given["agentCapabilities"]["sessionCapabilities"] == {"list": {}}  # not changed


def test_v2_advertises_under_capabilities_session_only_when_the_agent_serves_sessions() -> None:
    result = {"protocolVersion": 2, "capabilities": {"session": {"mcp": {}}}}
    assert advertise_titles(result) == {
        "protocolVersion": 2,
        "capabilities": {"session": {"mcp": {}, **BOTH}},
    }
    assert advertise_titles({"protocolVersion": 2, "capabilities": {}}) is None
    assert advertise_titles({"protocolVersion": 2}) is None


def test_an_agent_advertising_one_shape_gets_the_other_and_one_advertising_both_none() -> None:
    codex = {"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"title": {}}}}
    assert advertises_titles(codex)
    assert advertise_titles(codex) == {
        "protocolVersion": 1,
        "agentCapabilities": {"sessionCapabilities": BOTH},
    }
    full = {
        "protocolVersion": 2,
        "capabilities": {"session": {"setTitle": {"_meta": {}}, "title": {}}},
    }
    assert advertise_titles(full) is None
    assert not advertises_titles({"protocolVersion": 1})
    off = {"protocolVersion": 2, "capabilities": {"session": {"setTitle": None}}}
    assert not advertises_titles(off)


# -- session/list: the client's titles ---------------------------------------------------------


def test_a_listing_carries_the_client_titles_and_nothing_else_changes() -> None:
    result = {
        "sessions": [
            {"sessionId": "a", "cwd": "/", "title": "agent's"},
            {"sessionId": "b", "cwd": "/"},
            {"sessionId": "c", "cwd": "/", "title": "kept"},
            "not an entry",
            {"sessionId": ["odd"]},
        ],
        "nextCursor": "n",
    }
    assert listed_session_ids(result) == ["a", "b", "c"]
    retitled = retitle_listing(result, {"a": "mine", "b": "also mine"})
    assert retitled == {
        "sessions": [
            {"sessionId": "a", "cwd": "/", "title": "mine"},
            {"sessionId": "b", "cwd": "/", "title": "also mine"},
            {"sessionId": "c", "cwd": "/", "title": "kept"},
            "not an entry",
            {"sessionId": ["odd"]},
        ],
        "nextCursor": "n",
    }
    assert retitle_listing(result, {"c": "kept"}) is None
    assert retitle_listing({"sessions": None}, {"a": "x"}) is None
