"""A session's whole life on the owner, for an agent that rebuilds its per-session object on
every resume, against both owner drivers.

Shallow patches and their nulls, stored JSON copies, notification ``_meta`` never retained,
sends serialized under backpressure, a restore that cannot overwrite a newer patch, recovery
after a write failure, failure incidents (under a nested path too), active resume with and
without replay, the lifetime kept across the object's rebuild, a seed before live events,
close and reopen, nothing published after a close, and the v1 wire unchanged.

The tests are the codex-acp change's coverage list, one test per item; names follow
``reference/pr-anchor.md`` section 3.1 (rows 1-21). The agent side is simulated with the
owner's public API: replayed history goes through ``send_notification``, the
``session/resume`` response through ``send_response``, and a per-session agent object that is
rebuilt on every resume (codex-acp's ``SessionState``) looks its lifetime up by session id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import agent_meta as am
from agent_meta import OwnerOptions
from agent_meta.testing import ClientMirror, FailingTransport, GatedTransport, RecordingTransport

if TYPE_CHECKING:
    from tests.drivers import Driver, Owner, VirtualTime

SID = "thread-1"
AIR_FAILURE = ("jetbrains", "air", "sessionFailure")


def brief(message: dict[str, Any]) -> dict[str, Any]:
    if "id" in message:
        return {"id": message["id"]}
    params = message["params"]
    update = params.get("update", {})
    if update.get("sessionUpdate") == "session_info_update":
        view = {k: v for k, v in update.items() if k != "sessionUpdate"}
        if "_meta" in params:
            view["nm"] = params["_meta"]
        return view
    return {"chunk": update.get("content")}


def wire(transport: RecordingTransport) -> list[dict[str, Any]]:
    return [brief(m) for m in transport.messages]


def recording(version: int = 2) -> tuple[RecordingTransport, ClientMirror]:
    mirror = ClientMirror(version)
    return RecordingTransport(mirror=mirror), mirror


def synced(mirror: ClientMirror, lifetime: am.SessionLifetime) -> bool:
    return mirror.info(lifetime.session_id) == lifetime.snapshot()


class SessionState:
    """The agent's per-session object; a resume replaces it."""

    def __init__(self, owner: Owner, session_id: str) -> None:
        self.owner = owner
        self.session_id = session_id
        self.history: list[str] = []

    @property
    def meta(self) -> am.SessionLifetime:
        return self.owner.lifetime(self.session_id)


async def resume(owner: Owner, old: SessionState, request_id: int, *, replay: bool) -> SessionState:
    """An active ``session/resume``: reinstall, replay, drain, resync, respond."""
    state = SessionState(owner, old.session_id)
    state.history = list(old.history)
    if replay:
        for text in state.history:
            await owner.send_notification(
                "session/update",
                {
                    "sessionId": state.session_id,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": text},
                },
            )
    state.meta.resync()
    await owner.send_response(request_id, result={})
    return state


async def test_applies_top_level_patches_shallowly(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": {"x": 1, "y": 2}, "b": 1})
        await owner.wait_flushed()
        await lt.publish(meta={"a": {"z": 3}})
        assert lt.snapshot().meta == {"a": {"z": 3}, "b": 1}
    assert wire(t) == [{"_meta": {"a": {"x": 1, "y": 2}, "b": 1}}, {"_meta": {"a": {"z": 3}}}]
    assert synced(mirror, lt)


async def test_top_level_null_removes_a_key_and_meta_null_clears_all(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1, "b": 2})
        await owner.wait_flushed()
        await lt.publish(meta={"a": None})
        await owner.wait_flushed()
        assert lt.snapshot().meta == {"b": 2}
        await lt.publish(meta=None)
        assert lt.snapshot() == am.SessionInfo()
    assert wire(t) == [{"_meta": {"a": 1, "b": 2}}, {"_meta": {"a": None}}, {"_meta": None}]
    assert synced(mirror, lt)
    assert mirror.meta(SID) is None


async def test_keeps_nested_nulls_as_data(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": {"b": None, "c": [None]}})
        assert lt.snapshot().meta == {"a": {"b": None, "c": [None]}}
        lt.resync()
    assert wire(t)[-1] == {"_meta": {"a": {"b": None, "c": [None]}}}
    assert synced(mirror, lt)


async def test_forwards_a_null_for_a_key_the_agent_never_stored(driver: Driver) -> None:
    t, mirror = recording()
    mirror.feed(
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"thread-1",'
        b'"update":{"sessionUpdate":"session_info_update","_meta":{"stale":1}}}}\n'
    )
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"stale": None})
        assert lt.snapshot().meta is None
    assert wire(t) == [{"_meta": {"stale": None}}]
    assert mirror.meta(SID) is None


async def test_stores_and_restores_json_copies(driver: Driver) -> None:
    value: dict[str, Any] = {"list": [1]}
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"k": value})
        value["list"].append(2)
        snapshot_meta = lt.snapshot().meta
        assert snapshot_meta is not None
        snapshot_meta["k"] = "mutated"
        lt.resync()
    assert wire(t) == [
        {"_meta": {"k": {"list": [1]}}},
        {"_meta": None},
        {"_meta": {"k": {"list": [1]}}},
    ]
    assert synced(mirror, lt)


async def test_does_not_retain_notification_params_meta(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1}, notification_meta={"traceparent": "00-1"})
        lt.resync()
    assert wire(t) == [
        {"_meta": {"a": 1}, "nm": {"traceparent": "00-1"}},
        {"_meta": None},
        {"_meta": {"a": 1}},
    ]
    assert mirror.notification_meta(SID) == [{"traceparent": "00-1"}]
    assert synced(mirror, lt)


async def test_serializes_sends_under_backpressure(driver: Driver) -> None:
    mirror = ClientMirror()
    t = GatedTransport(mirror=mirror)
    async with driver.open_owner(t, OwnerOptions(coalesce=False)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"n": 0})
        await t.wait_for_waiting(1)  # the first notify is blocked
        for n in range(1, 6):
            await lt.publish(meta={"n": n})
            await owner.send_notification(
                "session/update",
                {
                    "sessionId": SID,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": n},
                },
            )
        assert len(t.frames) == 0
        t.open()
        await owner.wait_flushed()
    expected: list[dict[str, Any]] = [{"_meta": {"n": 0}}]
    for n in range(1, 6):
        expected += [{"_meta": {"n": n}}, {"chunk": n}]
    assert wire(t) == expected
    assert synced(mirror, lt)


async def test_restore_cannot_overwrite_a_newer_queued_patch(driver: Driver) -> None:
    mirror = ClientMirror()
    t = GatedTransport(mirror=mirror)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"status": "old"})
        await t.wait_for_waiting(1)
        lt.resync()
        await lt.publish(meta={"status": "new"})
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"_meta": {"status": "old"}},
        {"_meta": None},
        {"_meta": {"status": "new"}},  # the snapshot carries the queued patch, sent no more
    ]
    assert synced(mirror, lt)


async def test_disposal_during_restoration_finishes_it_and_stops_later_frames(
    driver: Driver,
) -> None:
    """Closed while its resync is in flight: the restoration finishes with the state at the
    close (the publication queued behind it included), and nothing later is written (R6)."""
    mirror = ClientMirror()
    t = GatedTransport(mirror=mirror)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        t.release(1)
        await t.wait_for_frames(1)
        lt.resync()
        await lt.publish(meta={"queued": 1})
        await t.wait_for_waiting(1)  # the clear is in flight
        owner.close_lifetime(SID)
        assert not await lt.publish(meta={"late": 1})
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [{"_meta": {"a": 1}}, {"_meta": None}, {"_meta": {"a": 1, "queued": 1}}]
    assert owner.statistics().fenced == 1


async def test_recovers_after_a_write_failure(driver: Driver, virtual_time: VirtualTime) -> None:
    mirror = ClientMirror()
    t = FailingTransport(fail_on=1, mode="lost", mirror=mirror)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        await owner.wait_flushed()
        await lt.publish(meta={"b": 2})
        await owner.wait_flushed()
        lt.resync()
    assert owner.statistics().write_failures == 1
    assert wire(t) == [
        {"_meta": None},
        {"_meta": {"a": 1}},
        {"_meta": {"b": 2}},
        {"_meta": None},
        {"_meta": {"a": 1, "b": 2}},
    ]
    assert synced(mirror, lt)


async def test_failure_clear_matches_id_and_revision(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.report_failure("f1", 1, {"r": 1})
        await lt.report_failure("f2", 1, {"r": 2})
        assert not await lt.resolve_failure("f1", 1)
        assert not await lt.resolve_failure("f2", 0)
        assert lt.snapshot().meta == {"agent-meta": {"failure": {"r": 2}}}
        assert await lt.resolve_failure("f2", 1)
        assert lt.snapshot().meta is None
    assert synced(mirror, lt)


async def test_failure_clear_preserves_sibling_metadata(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t, OwnerOptions(failure_path=AIR_FAILURE)) as owner:
        lt = owner.open_lifetime(SID)
        air = {"goal": {"text": "ship"}, "agentFileChangeReport": {"files": 2}}
        await lt.publish(meta={"jetbrains": {"air": air}})
        await lt.report_failure("f", 1, {"message": "crashed"})
        await owner.wait_flushed()
        await lt.resolve_failure("f", 1)
    assert wire(t)[-1] == {"_meta": {"jetbrains": {"air": air}}}
    assert synced(mirror, lt)


async def test_active_resume_without_replay_clears_then_restores(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await state.meta.publish(title="T", meta={"a": 1})
        await owner.wait_flushed()
        state = await resume(owner, state, 7, replay=False)
    assert wire(t) == [
        {"title": "T", "_meta": {"a": 1}},
        {"_meta": None},
        {"title": "T", "_meta": {"a": 1}},
        {"id": 7},
    ]
    assert synced(mirror, state.meta)


async def test_active_resume_with_replay_from_start_clears_then_restores_after_replay(
    driver: Driver,
) -> None:
    mirror = ClientMirror()
    t = GatedTransport(mirror=mirror)
    async with driver.open_owner(t) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        state.history = ["hello", "world"]
        await state.meta.publish(meta={"a": 1})
        await t.wait_for_waiting(1)
        await state.meta.publish(title="live")  # a live event drained before the resync
        state = await resume(owner, state, 8, replay=True)
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"_meta": {"a": 1}},
        {"title": "live"},
        {"chunk": "hello"},
        {"chunk": "world"},
        {"_meta": None},
        {"title": "live", "_meta": {"a": 1}},
        {"id": 8},
    ]
    assert synced(mirror, state.meta)


async def test_restore_omitted_when_nothing_is_known(driver: Driver) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await resume(owner, state, 1, replay=False)
    assert wire(t) == [{"_meta": None}, {"id": 1}]


async def test_seeds_native_thread_status_before_live_events(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID, seed=am.SessionInfoPatch(meta={"thread": {"status": "idle"}}))
        assert t.frames == []
        lt.resync()
        await owner.wait_flushed()
        await lt.publish(meta={"thread": {"status": "running"}})
    assert wire(t) == [
        {"_meta": None},
        {"_meta": {"thread": {"status": "idle"}}},
        {"_meta": {"thread": {"status": "running"}}},
    ]
    assert synced(mirror, lt)


async def test_metadata_survives_session_state_reinstallation(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        first = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await first.meta.publish(meta={"goal": "g"})
        second = await resume(owner, first, 2, replay=True)
        assert second is not first
        assert second.meta.snapshot().meta == {"goal": "g"}
        await second.meta.publish(meta={"more": 1})
    assert second.meta.snapshot().meta == {"goal": "g", "more": 1}
    assert synced(mirror, second.meta)


async def test_close_reopen_starts_a_fresh_lifetime(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await state.meta.publish(title="old", meta={"old": 1})
        await owner.wait_flushed()
        owner.close_lifetime(SID)
        owner.open_lifetime(SID, seed=am.SessionInfoPatch(meta={"seed": 1}))
        state = await resume(owner, state, 3, replay=False)
        await owner.wait_flushed()
        await state.meta.publish(meta={"new": 1})
    assert wire(t)[1:] == [
        {"_meta": None},
        {"_meta": {"seed": 1}},
        {"id": 3},
        {"_meta": {"new": 1}},
    ]
    assert mirror.info(SID).title == "old"  # an unknown title is not restored (nor cleared)
    assert mirror.meta(SID) == state.meta.snapshot().meta == {"seed": 1, "new": 1}


async def test_current_failure_continues_across_active_resume(driver: Driver) -> None:
    t, mirror = recording()
    async with driver.open_owner(t, OwnerOptions(failure_path=AIR_FAILURE)) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await state.meta.publish(meta={"jetbrains": {"air": {"goal": "g"}}})
        await state.meta.report_failure("inc", 4, {"message": "m"})
        state = await resume(owner, state, 4, replay=True)
        assert state.meta.current_failure == am.FailureIncident("inc", 4)
        assert await state.meta.resolve_failure("inc", 4)
    assert state.meta.snapshot().meta == {"jetbrains": {"air": {"goal": "g"}}}
    assert synced(mirror, state.meta)


async def test_no_session_info_publication_after_close(driver: Driver) -> None:
    t, _ = recording()
    async with driver.open_owner(t, OwnerOptions(failure_path=AIR_FAILURE)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        await owner.wait_flushed()
        owner.close_lifetime(SID)
        sent = len(t.frames)
        assert not await lt.domain("jetbrains").set(["air", "goal"], "late goal")
        assert not await lt.publish(title="late title")
        assert not await lt.domain("jetbrains").set(["air", "agentFileChangeReport"], {})
        assert not await lt.publish(meta={"live": 1})
        assert not await lt.report_failure("f", 1, {})
        assert not await lt.resolve_failure("f", 1)
        assert not lt.resync()
        await owner.wait_flushed()
        assert len(t.frames) == sent
    assert owner.statistics().fenced == 7


async def test_v1_wire_unchanged(driver: Driver) -> None:
    t, mirror = recording(1)
    async with driver.open_owner(
        t, OwnerOptions(protocol_version=1, v1_meta_mode="passthrough")
    ) as owner:
        state = SessionState(owner, SID)
        owner.open_lifetime(SID)
        await state.meta.publish(meta={"a": 1})
        await owner.wait_flushed()
        await state.meta.publish(meta={"b": 2})
        state = await resume(owner, state, 5, replay=False)
    assert wire(t) == [{"_meta": {"a": 1}}, {"_meta": {"b": 2}}, {"id": 5}]
    assert mirror.meta(SID) == {"b": 2}  # what a v1 client did before the change
