"""``agent-meta proxy``: the rule watcher (sans-IO), and the proxy as a subprocess over pipes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from agent_meta import OMITTED
from agent_meta._stderr import Reporter
from agent_meta.core._patch import fold_meta_patches
from agent_meta.sansio._lines import LineSplitter
from agent_meta.testing import ClientMirror
from agent_meta.tools._findings import WATCHED_LINE_BYTES, take_lines
from agent_meta.tools._peer import AgentPeer
from agent_meta.tools._watch import Watcher
from tests.strategies import meta_updates

ROOT = Path(__file__).resolve().parent.parent

AGENT = [sys.executable, "-m", "agent_meta", "agent"]
PROXY = [sys.executable, "-m", "agent_meta", "proxy"]
#: Every subprocess run is bounded: a hung proxy fails the test instead of the suite.
BOUND = 30.0

# --------------------------------------------------------------------------- frames


def line(**message: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode()


def update(session: str = "s", **fields: Any) -> bytes:
    body = {"sessionUpdate": "session_info_update"}
    if "meta" in fields:
        fields["_meta"] = fields.pop("meta")
    body.update(fields)
    return line(method="session/update", params={"sessionId": session, "update": body})


def chunk(session: str = "s", kind: str = "agent_message_chunk") -> bytes:
    params = {"sessionId": session, "update": {"sessionUpdate": kind, "content": {}}}
    return line(method="session/update", params=params)


def connected(version: int) -> Watcher:
    """A watcher that has seen an ``initialize`` exchange negotiating ``version``."""
    watcher = Watcher()
    watcher.observe("client", line(id=0, method="initialize", params={"protocolVersion": version}))
    watcher.observe("agent", line(id=0, result={"protocolVersion": version}))
    return watcher


# --------------------------------------------------------------------------- folding


def test_v2_folds_patches_removals_and_clears() -> None:
    watcher = connected(2)
    watcher.observe("agent", update(meta={"a": 1, "b": {"x": None}}, title="T"))
    watcher.observe("agent", update(meta={"a": None, "c": [1]}))
    assert watcher.meta("s") == {"b": {"x": None}, "c": [1]}
    watcher.observe("agent", update(meta=None))
    assert watcher.meta("s") is None
    assert watcher.state("s") == {"title": "T", "_meta": None}
    assert not watcher.failed


def test_v1_replaces_whole_and_ignores_null() -> None:
    watcher = connected(1)
    watcher.observe("agent", update(meta={"a": 1, "b": 2}))
    watcher.observe("agent", update(meta={"b": 3}))
    assert watcher.meta("s") == {"b": 3}
    assert watcher.meta_as_v2("s") == {"a": 1, "b": 3}
    watcher.observe("agent", update(meta={}))
    assert watcher.meta("s") is None
    assert not watcher.failed


def test_the_version_comes_from_the_initialize_response() -> None:
    watcher = Watcher()
    assert watcher.protocol_version == 1
    watcher.observe("client", line(id="i", method="initialize", params={"protocolVersion": 2}))
    assert watcher.protocol_version == 1  # asked for, not yet agreed
    watcher.observe("agent", line(id="i", result={"protocolVersion": 2}))
    assert watcher.protocol_version == 2


@given(st.sampled_from([1, 2]), st.lists(meta_updates, max_size=8))
def test_the_fold_is_the_clients(version: int, updates: list[Any]) -> None:
    """The watcher folds as ClientMirror does, and on v2 as agent_meta's own patch core."""
    watcher = connected(version)
    mirror = ClientMirror(protocol_version=version)
    for meta in updates:
        frame = update() if meta is OMITTED else update(meta=meta)
        watcher.observe("agent", frame)
        mirror.feed(frame)
    assert watcher.meta("s") == mirror.meta("s")
    if version == 2:
        assert watcher.meta("s") == fold_meta_patches(None, updates)


# --------------------------------------------------------------------------- per-frame rules


def test_a_batch_line_counts_entry_by_entry() -> None:
    """JSON-RPC batches (and their answers) are one line: each entry is checked and folded."""
    watcher = connected(2)
    frame = watcher.observe("agent", b"[1," + update(meta={"a": 1}) + b"]")
    assert [f.rule for f in frame.findings] == ["json"]  # the 1, not the update
    assert watcher.meta("s") == {"a": 1}


def test_malformed_lines_are_findings_not_errors() -> None:
    watcher = connected(2)
    for bad in (
        b"{not json",
        b"\xff\xfe",
        b"[1]",  # a batch whose one entry is not a message
        b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","x":1}',
        b'{"jsonrpc":"2.0","id":1,"result":NaN}',
    ):
        frame = watcher.observe("agent", bad)
        assert [f.rule for f in frame.findings] == ["json"], bad
        assert frame.message is None or "method" not in frame.message
    frame = watcher.observe("agent", update(meta={"a": 1}), last=True)
    assert [f.rule for f in frame.findings] == ["json"]
    assert watcher.meta("s") == {"a": 1}  # an unterminated but valid last line still counts


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"meta": [1, 2]}, "shape"),
        ({"meta": "oops"}, "shape"),
        ({"title": 5}, "shape"),
        ({"updatedAt": 17}, "shape"),
        ({"updatedAt": "2026-01-01T00:00:00"}, "updated-at"),
        ({"updatedAt": "yesterday"}, "updated-at"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, Any], rule: str) -> None:
    watcher = connected(2)
    watcher.observe("agent", update(meta={"kept": True}))
    frame = watcher.observe("agent", update(**fields))
    assert [f.rule for f in frame.findings] == [rule]
    assert watcher.meta("s") == {"kept": True}  # a malformed _meta is not folded


def test_a_v1_updated_at_without_an_offset_is_not_judged() -> None:
    """v1's schema says ISO 8601, which allows a local time (fast-agent sends one): only v2
    requires RFC 3339 with an offset."""
    watcher = connected(1)
    watcher.observe("agent", update(updatedAt="2026-01-01T00:00:00.144382"))
    assert not watcher.failed
    assert watcher.exercised["updated-at"] == 0


def test_good_fields_pass() -> None:
    watcher = connected(2)
    watcher.observe("agent", update(title=None, updatedAt="2026-11-30T12:00:00.5+01:00"))
    watcher.observe("agent", update(updatedAt=None, meta={}))
    assert not watcher.failed
    assert watcher.exercised["updated-at"] == 1


def test_v1_null_meta_is_flagged_only_when_the_client_holds_metadata() -> None:
    watcher = connected(1)
    watcher.observe("agent", update(meta=None))
    assert not watcher.failed
    watcher.observe("agent", update(meta={"a": 1}))
    frame = watcher.observe("agent", update(meta=None))
    assert [f.rule for f in frame.findings] == ["v1-meaning"]
    assert watcher.meta("s") == {"a": 1}  # v1: null is 'omitted'


def test_v1_key_set_to_null_is_flagged_and_stored() -> None:
    watcher = connected(1)
    frame = watcher.observe("agent", update(meta={"a": None, "b": 1}))
    assert [f.rule for f in frame.findings] == ["v1-meaning"]
    assert watcher.meta("s") == {"a": None, "b": 1}


def test_a_v1_null_replayed_in_a_load_and_replaced_by_the_resync_passes() -> None:
    """The frames of an unchanged SDK agent under ``agent-meta run`` (recorded by ``check``):
    live, the owner sends whole objects; the load's replay is the agent's history as it sent
    it, a removal ``{"a": null}`` included, written unchanged (docs/sdk.md, "Replay is
    replay"); the resync then replaces it before the response. That is replay, not a v1 frame
    the agent relies on."""
    watcher = connected(1)
    watcher.observe("agent", update(meta={"a": 1, "b": 2}))
    watcher.observe("agent", update(meta={"b": 2}))  # the owner's v1 rendering of {"a": null}
    watcher.observe("client", resume(1))
    watcher.observe("agent", update(meta={"a": 1, "b": 2}))  # replay
    replayed = watcher.observe("agent", update(meta={"a": None}))  # replay
    assert watcher.meta("s") == {"a": None}  # what a v1 client stores, for now
    watcher.observe("agent", update(meta={"b": 2}))  # the resync: one whole object
    response = watcher.observe("agent", line(id=5, result={}))
    assert replayed.findings == response.findings == ()
    assert not watcher.failed
    assert watcher.exercised["v1-meaning"] == 5
    assert watcher.meta("s") == {"b": 2}

    live = watcher.observe("agent", update(meta={"b": None}))  # after the load: live
    assert [f.rule for f in live.findings] == ["v1-meaning"]


@pytest.mark.parametrize("last", [{"a": None}, None])
def test_a_v1_misreading_that_stands_at_the_load_response_is_reported_there(
    last: dict[str, Any] | None,
) -> None:
    """Nothing replaced the frame before the response (no later object; a null, which v1
    reads as omitted, replaces nothing): the client keeps what it made of it."""
    watcher = connected(1)
    watcher.observe("agent", update(meta={"a": 1}))
    request = watcher.observe("client", resume(1))
    first = watcher.observe("agent", update(meta={"a": None}))
    again = watcher.observe("agent", update(meta=last))
    assert not watcher.failed
    response = watcher.observe("agent", line(id=5, result={}))
    misread = [f for f in response.findings if f.rule == "v1-meaning"]
    if last is None:  # both stand: the client stores 'a' as null, then keeps it
        assert [f.frames for f in misread] == [(first.seq, response.seq), (again.seq, response.seq)]
        assert 'the client keeps {"a":null}' in misread[1].message
    else:  # the later object replaced the first
        assert [f.frames for f in misread] == [(again.seq, response.seq)]
    assert "stores 'a' as null" in misread[0].message
    assert f"in the session/load window (frame #{request.seq})" in misread[0].message
    assert all(f.session == "s" for f in misread)


def test_a_v1_misreading_of_a_failed_load_is_reported_at_its_error() -> None:
    watcher = connected(1)
    watcher.observe("client", resume(1))
    watcher.observe("agent", update(meta={"a": None}))
    error = watcher.observe("agent", line(id=5, error={"code": -32002, "message": "no"}))
    assert [f.rule for f in error.findings] == ["v1-meaning"]


def test_v2_has_no_v1_findings() -> None:
    watcher = connected(2)
    watcher.observe("agent", update(meta={"a": 1}))
    watcher.observe("agent", update(meta={"a": None}))
    watcher.observe("agent", update(meta=None))
    assert not watcher.failed
    assert watcher.exercised["v1-meaning"] == 0


# --------------------------------------------------------------------------- resync


def resume(version: int = 2, request_id: int = 5, session: str = "s") -> bytes:
    params: dict[str, Any] = {"sessionId": session, "cwd": "/"}
    if version >= 2:
        params["replayFrom"] = {"type": "start"}
        return line(id=request_id, method="session/resume", params=params)
    return line(id=request_id, method="session/load", params=params)


def held(version: int) -> Watcher:
    watcher = connected(version)
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", update(meta={"stage": "working", "a": 1}))
    return watcher


def test_replay_then_null_and_snapshot_passes() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta={"stage": "new"}))  # history, stale
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={"stage": "working", "a": 1}))
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed
    assert watcher.exercised["resync"] == 1


def test_replay_that_leaves_a_stale_state_fails() -> None:
    watcher = held(2)
    request = watcher.observe("client", resume())
    watcher.observe("agent", chunk())
    stale = watcher.observe("agent", update(meta={"stage": "new"}))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    finding = response.findings[0]
    assert finding.session == "s"
    assert {request.seq, stale.seq, response.seq} <= set(finding.frames)
    assert "no _meta: null + snapshot" in finding.message


def test_a_resync_before_the_end_of_the_replay_fails() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={"stage": "working"}))
    watcher.observe("agent", chunk())  # replay goes on after the "resync"
    watcher.observe("agent", update(meta={"stage": "new"}))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    assert "before the end of the replay" in response.findings[0].message


def test_a_replay_that_changes_nothing_passes_without_a_resync() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", chunk())
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed


def test_a_failed_resume_is_not_judged() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", line(id=5, error={"code": -32002, "message": "no"}))
    assert not watcher.failed


def test_v2_resume_without_replay_opens_no_window() -> None:
    watcher = held(2)
    params = {"sessionId": "s", "cwd": "/"}
    watcher.observe("client", line(id=5, method="session/resume", params=params))
    watcher.observe("agent", update(meta={"other": 1}))
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed
    assert watcher.exercised["resync"] == 0


def test_v1_load_needs_an_object_after_the_replay() -> None:
    watcher = held(1)
    watcher.observe("client", resume(1))
    watcher.observe("agent", update(meta={"stage": "new"}))  # history: the creation's info
    watcher.observe("agent", chunk(kind="user_message_chunk"))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]

    watcher = held(1)
    watcher.observe("client", resume(1, request_id=6))
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", update(meta={"stage": "working", "a": 1, "b": 2}))
    watcher.observe("agent", line(id=6, result={}))
    assert not watcher.failed


def test_a_v2_clear_without_the_snapshot_fails() -> None:
    """R4: after replay, _meta: null, then the state the agent had published when non-empty."""
    watcher = held(2)
    request = watcher.observe("client", resume())
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta={"stage": "new"}))  # history: replay is no publication
    clear = watcher.observe("agent", update(meta=None))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    finding = response.findings[0]
    assert {request.seq, clear.seq, response.seq} <= set(finding.frames)
    assert 'no snapshot of {"stage":"working","a":1} followed it' in finding.message
    assert watcher.meta("s") is None  # what the client was left with


def test_an_empty_snapshot_is_no_snapshot() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={}))  # changes nothing on v2
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]


def test_a_clear_alone_is_the_resync_of_an_empty_state() -> None:
    """The agent cleared its metadata live: replaying the history's stale info re-sends old
    keys, and _meta: null alone leaves the client with the nothing the agent holds."""
    watcher = held(2)
    watcher.observe("agent", update(meta=None))  # live: the agent's state is empty now
    watcher.observe("client", resume())
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed
    assert watcher.exercised["resync"] == 1


def test_a_reopened_lifetime_starts_with_nothing_known() -> None:
    """R5: after session/close a reopen is a fresh lifetime: a clear alone is its resync. A
    frame the agent sends for the closed lifetime (a fence finding) does not count either."""
    watcher = held(2)
    watcher.observe("client", close())
    watcher.observe("agent", line(id=9, result={}))
    late = watcher.observe("agent", update(meta={"late": 1}))
    assert [f.rule for f in late.findings] == ["fence"]
    watcher.observe("client", resume(request_id=10))
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", line(id=10, result={}))
    assert watcher.failed == {"fence": 1}


def test_what_a_resync_restored_is_what_the_agent_holds() -> None:
    """After a complete resync the snapshot is the agent's state: a later clear alone fails."""
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={"restored": True}))
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed
    watcher.observe("client", resume(request_id=6))
    watcher.observe("agent", update(meta=None))
    response = watcher.observe("agent", line(id=6, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    assert '{"restored":true}' in response.findings[0].message


def test_a_resume_without_replay_needs_its_snapshot_too() -> None:
    """R4 holds on every successful session/resume: no replay, the same clear + snapshot."""
    watcher = held(2)
    params = {"sessionId": "s", "cwd": "/"}
    watcher.observe("client", line(id=5, method="session/resume", params=params))
    watcher.observe("agent", update(meta={"live": 1}))  # published live: part of the state
    watcher.observe("agent", update(meta=None))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    assert '"live":1' in response.findings[0].message

    watcher = held(2)
    watcher.observe("client", line(id=6, method="session/resume", params=params))
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={"stage": "working", "a": 1}))
    watcher.observe("agent", line(id=6, result={}))
    assert not watcher.failed


def test_v1_resync_is_one_frame_with_the_whole_object() -> None:
    """v1 has no clear + snapshot: the one object is the snapshot, and {} clears."""
    watcher = held(1)
    watcher.observe("client", resume(1))
    watcher.observe("agent", update(meta={"stage": "new"}))
    watcher.observe("agent", chunk(kind="user_message_chunk"))
    snapshot = watcher.observe("agent", update(meta={"stage": "working", "a": 1}))
    watcher.observe("agent", line(id=5, result={}))
    assert snapshot.findings == ()
    assert not watcher.failed

    watcher.observe("client", resume(1, request_id=6))
    watcher.observe("agent", chunk(kind="user_message_chunk"))
    watcher.observe("agent", update(meta={}))
    response = watcher.observe("agent", line(id=6, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    message = response.findings[0].message
    assert 'no snapshot of {"stage":"working","a":1}' in message
    assert "on v1 the resync is one frame with the complete object" in message


def stamped(version: int) -> Watcher:
    """A session whose agent published its info with ``updatedAt`` T1 (as pydantic-acp does
    after a prompt)."""
    watcher = connected(version)
    watcher.observe("agent", update(title="t", updatedAt=T1, meta={"n": 1}))
    return watcher


T0, T1, T2 = "2026-05-01T12:00:00Z", "2026-05-02T12:00:00Z", "2026-05-03T12:00:00Z"


@pytest.mark.parametrize("version", [1, 2])
def test_the_agents_current_info_in_a_window_is_state_without_a_resync(version: int) -> None:
    """Issue 27 (b), replay is replay: pydantic-acp alone replays, then sends its current info
    (a newer updatedAt than anything known or replayed) and no resync. The client ends at that
    info, which is the agent's state: nothing to report."""
    watcher = stamped(version)
    watcher.observe("client", resume(version))
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(title="t", updatedAt=T1, meta={"n": 1}))  # history
    watcher.observe("agent", update(title="t", updatedAt=T2, meta={"n": 2}))  # current
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed
    assert watcher.state("s")["updatedAt"] == T2
    # What the agent holds moved with it: a later resync must restore it.
    watcher.observe("client", resume(version, request_id=6))
    watcher.observe("agent", update(meta=None) if version >= 2 else update(meta={}))
    response = watcher.observe("agent", line(id=6, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    assert '"n":2' in response.findings[0].message


@pytest.mark.parametrize("version", [1, 2])
def test_a_resync_that_puts_back_an_older_updated_at_than_the_current_info_fails(
    version: int,
) -> None:
    """Issue 27 (b) under an owner that took the current info for replay: its resync put the
    older info back, and the client ended older than the agent's session/list."""
    watcher = stamped(version)
    request = watcher.observe("client", resume(version))
    watcher.observe("agent", chunk())
    current = watcher.observe("agent", update(title="t", updatedAt=T2, meta={"n": 1}))
    if version >= 2:
        watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(title="t", updatedAt=T1, meta={"n": 1}))
    response = watcher.observe("agent", line(id=5, result={}))
    assert [f.rule for f in response.findings] == ["resync"]
    finding = response.findings[0]
    assert {request.seq, current.seq} <= set(finding.frames)
    assert "current info" in finding.message


def test_an_updated_at_no_newer_than_what_is_known_or_replayed_is_history() -> None:
    watcher = stamped(2)
    watcher.observe("client", resume())
    watcher.observe("agent", update(updatedAt=T0, meta={"n": 0}))  # older: history
    watcher.observe("agent", chunk())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(title="t", updatedAt=T1, meta={"n": 1}))  # the resync
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed


def test_status_updates_are_not_replay() -> None:
    watcher = held(2)
    watcher.observe("client", resume())
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", update(meta={"stage": "working", "a": 1}))
    watcher.observe("agent", chunk(kind="state_update"))
    watcher.observe("agent", line(id=5, result={}))
    assert not watcher.failed


# --------------------------------------------------------------------------- fence


def close(request_id: int = 9, session: str = "s") -> bytes:
    return line(id=request_id, method="session/close", params={"sessionId": session})


def test_nothing_may_follow_the_close_response() -> None:
    watcher = held(2)
    watcher.observe("client", close())
    watcher.observe("agent", update(meta={"racing": 1}))  # before the response: allowed
    response = watcher.observe("agent", line(id=9, result={}))
    late = watcher.observe("agent", update(meta={"late": 1}))
    assert [f.rule for f in late.findings] == ["fence"]
    assert late.findings[0].frames == (response.seq, late.seq)
    other = watcher.observe("agent", update("other", meta={"x": 1}))
    assert other.findings == ()


def test_answers_to_later_requests_are_not_fenced_and_a_reopen_lifts_the_fence() -> None:
    watcher = held(2)
    watcher.observe("client", close())
    watcher.observe("agent", line(id=9, result={}))
    prompt = {"sessionId": "s", "prompt": []}
    watcher.observe("client", line(id=10, method="session/prompt", params=prompt))
    watcher.observe("agent", line(id=10, error={"code": -32002, "message": "closed"}))
    watcher.observe("client", resume(request_id=11))
    watcher.observe("agent", update(meta=None))
    watcher.observe("agent", line(id=11, result={}))
    watcher.observe("agent", update(meta={"after": 1}))
    assert not watcher.failed


def test_a_failed_close_fences_nothing() -> None:
    watcher = held(2)
    watcher.observe("client", close())
    watcher.observe("agent", line(id=9, error={"code": -32002, "message": "unknown"}))
    watcher.observe("agent", update(meta={"still": 1}))
    assert not watcher.failed
    assert watcher.exercised["fence"] == 0


# --------------------------------------------------------------------------- line splitting


def lines_of(splitter: LineSplitter, chunk: bytes) -> tuple[list[bytes], int]:
    splitter.feed(chunk)
    return take_lines(splitter)


def test_the_watched_lines_hold_partial_lines_and_skip_blank_ones() -> None:
    splitter = LineSplitter(max_line_bytes=WATCHED_LINE_BYTES)
    assert lines_of(splitter, b'{"a"') == ([], 0)
    assert lines_of(splitter, b":1}\n{") == ([b'{"a":1}'], 0)
    assert lines_of(splitter, b"}\r\n\n  \nx\ny") == ([b"{}", b"x"], 0)
    assert lines_of(splitter, b"") == ([b"y"], 0)  # the end: an unterminated last line
    assert lines_of(splitter, b"") == ([], 0)


def test_a_line_too_long_to_watch_is_skipped_and_counted() -> None:
    splitter = LineSplitter(max_line_bytes=8)
    assert lines_of(splitter, b"12345") == ([], 0)
    assert lines_of(splitter, b"67890") == ([], 1)  # over the limit: dropped from watching
    assert lines_of(splitter, b"abc\nok\n") == ([b"ok"], 0)
    assert lines_of(splitter, b"tail") == ([], 0)
    assert lines_of(splitter, b"") == ([b"tail"], 0)


# --------------------------------------------------------------------------- the real proxy


def test_the_command_line_of_the_tools_loads_no_pydantic_rich_or_asyncio() -> None:
    """A proxy must start fast: pydantic (agent_meta.wire) alone took half a second to import,
    and rich and asyncio are not needed either (the timeline's terminal table loads rich when
    it draws one). Building the command line imports every tool."""
    code = (
        "import sys; from agent_meta.cli._main import build_parser; build_parser(); "
        "print(sorted(m for m in ('pydantic', 'rich', 'asyncio') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]", done.stdout


SCRIPTED_AGENT = textwrap.dedent(
    """
    import os, sys
    received = sys.stdin.buffer.read()
    with open(sys.argv[1], "wb") as file:
        file.write(received)
    sys.stdout.buffer.write(open(sys.argv[2], "rb").read())
    sys.stdout.flush()
    sys.exit(int(sys.argv[3]))
    """
)


def scripted(tmp_path: Path, output: bytes, status: int = 0) -> tuple[list[str], Path]:
    """An agent that records its stdin, then writes ``output`` and exits with ``status``."""
    received = tmp_path / "received.bin"
    out = tmp_path / "output.bin"
    out.write_bytes(output)
    return [sys.executable, "-c", SCRIPTED_AGENT, str(received), str(out), str(status)], received


def run_proxy(argv: list[str], data: bytes, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*PROXY, *argv], input=data, capture_output=True, timeout=BOUND, check=False, **kwargs
    )


def test_every_byte_passes_unchanged_both_ways(tmp_path: Path) -> None:
    client_bytes = (
        line(id=0, method="initialize", params={"protocolVersion": 2})
        + b"\n\r\n{broken json\n\xff\xfe invalid utf-8\n  \n"
        + line(id=1, method="session/new", params={"cwd": "/"})
        + b"\r\n"
        + b'{"jsonrpc":"2.0","id":2,"method":"unterminated"'
    )
    agent_bytes = (
        line(id=0, result={"protocolVersion": 2})
        + b"\n"
        + update(meta={"a": 1})
        + b"\nnot json at all\n"
        + update(meta=[1])
        + b"\n\n"
        + b'{"jsonrpc":"2.0","method":"session/update"'  # the stream ends inside a line
    )
    command, received = scripted(tmp_path, agent_bytes, status=3)
    log = tmp_path / "log.ndjson"
    done = run_proxy(["--log", str(log), "--", *command], client_bytes)
    assert done.stdout == agent_bytes
    assert received.read_bytes() == client_bytes
    assert done.returncode == 3
    stderr = done.stderr.decode()
    # Client: 2 bad lines, 1 unterminated and not JSON (2 findings); agent: 1 + 2 the same way.
    assert stderr.count("[json]") == 7, stderr
    assert stderr.count("[shape]") == 1, stderr
    records = [json.loads(text) for text in log.read_text().splitlines()]
    client = [r["line"] for r in records if r["from"] == "client"]
    assert client[-1] == '{"jsonrpc":"2.0","id":2,"method":"unterminated"'
    info = [r for r in records if r["session"] == "s"]
    assert [r["state"]["_meta"] for r in info] == [{"a": 1}, {"a": 1}]  # [1] is not folded


async def test_a_stderr_nobody_reads_never_stalls_the_forwarding() -> None:
    """A client may pipe the agent's stderr and never read it (the Python SDK's default does):
    findings beyond what the pipe holds are dropped, never waited for."""
    count = 5_000  # each a finding of ~100 bytes: far more than a 64 KiB pipe holds
    script = f"import sys; sys.stdout.write('not json\\n' * {count}); sys.exit(0)"
    read_end, write_end = os.pipe()
    try:
        process = await trio.lowlevel.open_process(
            [*PROXY, "--", sys.executable, "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=write_end,
        )
        os.close(write_end)
        assert process.stdout is not None
        received = b""
        with trio.fail_after(BOUND):
            while data := await process.stdout.receive_some():
                received += data
            assert await process.wait() == 0
        assert received == b"not json\n" * count
        with os.fdopen(read_end, "rb") as stderr:
            report = stderr.read().decode()
        read_end = -1
        assert 0 < report.count("[json]") < count  # what fitted in the pipe
    finally:
        if read_end >= 0:
            os.close(read_end)


def test_findings_that_did_not_fit_are_counted_once_stderr_moves() -> None:
    release = threading.Event()

    class Stuck(io.StringIO):
        def write(self, text: str) -> int:
            release.wait(BOUND)
            return super().write(text)

    stream = Stuck()
    reporter = Reporter(stream, "agent-meta proxy", limit=3, noun="findings")
    for number in range(10):
        reporter.line(f"finding {number}")
    release.set()
    reporter.close(within=BOUND)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "agent-meta proxy: finding 0"
    assert len(lines) < 10
    assert lines[-1].startswith(f"agent-meta proxy: {11 - len(lines)} findings not shown")


async def test_the_proxy_exits_with_the_agent_while_the_client_stays() -> None:
    command = [sys.executable, "-c", "import sys; sys.stdout.write('bye\\n'); sys.exit(5)"]
    process = await trio.lowlevel.open_process(
        [*PROXY, "--", *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    received = b""
    with trio.fail_after(BOUND):  # our end of its stdin stays open the whole time
        while data := await process.stdout.receive_some():
            received += data
        assert await process.wait() == 5
    assert received == b"bye\n"
    assert process.stdin is not None
    await process.stdin.aclose()


def test_a_signal_ending_the_agent_is_the_proxys_status(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    assert run_proxy(["--", *command], b"").returncode == 128 + 9


def test_usage_errors(tmp_path: Path) -> None:
    for argv in ([], ["--"], ["--log", str(tmp_path / "x")]):
        done = run_proxy(argv, b"")
        assert done.returncode == 2
        assert b"usage: agent-meta proxy" in done.stderr
        assert b"an agent command is required" in done.stderr
    missing = run_proxy(["--", str(tmp_path / "no-such-agent")], b"")
    assert missing.returncode == 127
    assert b"cannot start the agent" in missing.stderr
    unwritable = run_proxy(["--log", str(tmp_path / "no" / "dir" / "log"), "--", "true"], b"")
    assert unwritable.returncode == 2
    assert b"cannot write the log" in unwritable.stderr


def proxied(log: Path, agent: list[str]) -> list[str]:
    return [*PROXY, "--log", str(log), "--", *agent]


async def test_a_real_session_through_the_proxy(tmp_path: Path) -> None:
    """The client sees the agent's bytes, and the log's folded state is the agent's own."""
    log = tmp_path / "log.ndjson"
    with trio.fail_after(BOUND):
        async with AgentPeer.spawn(proxied(log, AGENT), answer_within=BOUND) as peer:
            await peer.request("initialize", {"protocolVersion": 2, "capabilities": {}})
            new = await peer.request("session/new", {"cwd": str(tmp_path)})
            session = new.result["sessionId"]
            text = '/title Through\n/meta set a {"x":null}\n/meta set b 1\n/meta rm b\n/fail i 1'
            prompt = [{"type": "text", "text": text}]
            answer = await peer.request("session/prompt", {"sessionId": session, "prompt": prompt})
            # v2 answers the prompt before its lines run: the turn ends with an idle state_update.
            assert await peer.wait_for_turn_end(answer.frame.seq, session) is not None
            replay = {"sessionId": session, "cwd": str(tmp_path), "replayFrom": {"type": "start"}}
            await peer.request("session/resume", replay)
            listed = await peer.request("session/list", {}, capture=True)
            await peer.request("session/close", {"sessionId": session})
    records = [json.loads(text) for text in log.read_text().splitlines()]
    for side in ("client", "agent"):  # between the two sides, the order seen may differ
        logged = [r["line"].encode() for r in records if r["from"] == side]
        assert logged == [f.line for f in peer.frames if f.source == side]
    assert all(r["findings"] == [] for r in records)
    assert not peer.watcher.failed
    (entry,) = listed.result["sessions"]
    last = [r["state"] for r in records if r["session"] == session][-1]
    assert last["_meta"] == entry["_meta"] == listed.meta[session]
    assert last["title"] == entry["title"] == "Through"
    assert "null" in json.dumps(last["_meta"])  # a nested null is data, kept


@pytest.mark.parametrize(
    ("agent", "found"),
    [
        # The resume with replay; the reopen replays the same stale info over it, changing
        # nothing.
        ("no_resync", ["resync"]),
        # The resume with replay and the one without: each clears, and no snapshot follows.
        ("null_without_snapshot", ["resync", "resync"]),
    ],
)
def test_the_proxy_reports_a_broken_agent(tmp_path: Path, agent: str, found: list[str]) -> None:
    """check through the proxy: both see the same frames and name the same rule."""
    log = tmp_path / "log.ndjson"
    done = subprocess.run(
        [
            sys.executable, "-m", "agent_meta", "check", "--protocol", "2",
            "--prompt", '/meta set stage "working"',
            "--", *proxied(log, [sys.executable, "-m", f"tests.broken_agents.{agent}"]),
        ],
        capture_output=True, text=True, timeout=BOUND, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "result: FAIL: resync (v2)" in done.stdout
    assert "[resync]" in done.stderr  # the proxy's own report
    findings = [f for text in log.read_text().splitlines() for f in json.loads(text)["findings"]]
    assert [f["rule"] for f in findings] == found
