"""Rules R1-R12 of the design, one group of tests per rule, run against both drivers.

Each test drives a real owner -- :class:`~agent_meta.MetaOwner` (trio) and
:class:`~agent_meta.AsyncioMetaOwner` (asyncio), through the ``driver`` fixture of
``tests/drivers.py`` -- over the fake transports of :mod:`agent_meta.testing` or a real pipe,
asserts the exact frames written, in order, and folds them with the independent
:class:`~agent_meta.testing.ClientMirror` to check that what a client holds equals
``lifetime.snapshot()``. Interleavings are forced with ``GatedTransport``,
``driver.wait_all_tasks_blocked`` and a sequencer; time only passes on the ``virtual_time``
clock.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

import agent_meta as am
from agent_meta import OwnerOptions
from agent_meta.core._patch import fold_meta_patches
from agent_meta.testing import (
    ClientMirror,
    FailingTransport,
    GatedTransport,
    PipeRecorder,
    RecordingTransport,
    SlowTransport,
)

if TYPE_CHECKING:
    from agent_meta.testing._mirror import Message
    from tests.drivers import Driver, Owner, VirtualTime

SID = "sess-1"


# -- helpers ---------------------------------------------------------------------------------


def brief(message: Message) -> dict[str, Any]:
    """A compact, exact view of one frame: info updates keep every field they carry."""
    if "id" in message:
        return {"id": message["id"], **({"error": True} if "error" in message else {})}
    params = message.get("params", {})
    update = params.get("update") if isinstance(params, dict) else None
    if isinstance(update, dict) and update.get("sessionUpdate") == "session_info_update":
        view = {k: v for k, v in update.items() if k != "sessionUpdate"}
        view["s"] = params["sessionId"]
        if "_meta" in params:
            view["nm"] = params["_meta"]
        return view
    return {"method": message["method"]}


def wire(transport: RecordingTransport | PipeRecorder) -> list[dict[str, Any]]:
    return [brief(m) for m in transport.messages]


class _PipeMirror(ClientMirror):
    """A mirror fed by a :class:`PipeRecorder`: it reads the pipe before answering."""

    recorder: PipeRecorder | None = None

    def info(self, session_id: str) -> am.SessionInfo:
        if self.recorder is not None:
            self.recorder.read_available()
        return super().info(session_id)


Recorder = RecordingTransport | PipeRecorder
Make = Callable[..., tuple[Recorder, ClientMirror]]


@pytest.fixture(params=["memory", "pipe"])
def recording(request: pytest.FixtureRequest, driver: Driver) -> Make:
    """Make ``(output, mirror)`` pairs: a recording fake transport, or a real pipe.

    Over a pipe, frames go out through the driver's stream transport and its direct writes, as
    over stdio; the assertions are the same. Pipes are closed when the test body returns.
    """

    def make(version: int = 2) -> tuple[Recorder, ClientMirror]:
        if request.param == "memory":
            mirror = ClientMirror(version)
            return RecordingTransport(mirror=mirror), mirror
        piped = _PipeMirror(version)
        recorder = PipeRecorder(mirror=piped)
        piped.recorder = recorder
        driver.cleanups.append(recorder.aclose)
        return recorder, piped

    return make


def gated(version: int = 2) -> tuple[GatedTransport, ClientMirror]:
    mirror = ClientMirror(version)
    return GatedTransport(mirror=mirror), mirror


def assert_synced(mirror: ClientMirror, lifetime: am.SessionLifetime) -> None:
    assert mirror.info(lifetime.session_id) == lifetime.snapshot()


async def hold_writer(lt: am.SessionLifetime, transport: GatedTransport) -> None:
    """Publish one frame and wait until the writer is stuck sending it (a backlog starts)."""
    await lt.publish(meta={"hold": True})
    await transport.wait_for_waiting(1)


# -- R1 shallow patch state ------------------------------------------------------------------


async def test_r1_known_state_is_the_fold_of_accepted_publications(
    driver: Driver,
    recording: Make,
) -> None:
    updates: list[Any] = [
        {"a": 1, "b": {"x": 1}},
        {"b": {"y": None}},
        {"a": None, "c": [1]},
        None,
        {"d": "v", "never": None},
        {},
    ]
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        for update in updates:
            assert await lt.publish(meta=update)
        await owner.wait_flushed()
        assert lt.snapshot().meta == fold_meta_patches(None, updates)
        assert lt.snapshot().meta == {"d": "v"}
        assert_synced(mirror, lt)


async def test_r1_published_values_are_json_copies(driver: Driver) -> None:
    value: dict[str, Any] = {"items": [1, 2]}
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"k": value})
        value["items"].append(3)
        value["extra"] = 1
        assert lt.snapshot().meta == {"hold": True, "k": {"items": [1, 2]}}
        t.open()
        await owner.wait_flushed()
    assert wire(t)[-1] == {"s": SID, "_meta": {"k": {"items": [1, 2]}}}
    assert_synced(mirror, lt)


# -- R2 one FIFO boundary ----------------------------------------------------------------------


async def test_r2_patch_resync_and_response_keep_call_order(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t, OwnerOptions(coalesce=False)) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        await owner.send_notification("session/update", {"sessionId": SID, "update": {}})
        lt.resync()
        await owner.send_response(5, result={"ok": True})
        await lt.publish(meta={"b": 2})
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": {"a": 1}},
        {"method": "session/update"},
        {"s": SID, "_meta": None},
        # The snapshot is rendered when written: it carries b, queued behind it, whose own
        # frame then sends nothing (a client never goes back to a state without b).
        {"s": SID, "_meta": {"hold": True, "a": 1, "b": 2}},
        {"id": 5},
    ]
    assert_synced(mirror, lt)


async def test_r2_concurrent_writers_never_interleave_frames(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lts = [owner.open_lifetime(f"s{i}") for i in range(3)]
        await hold_writer(lts[0], t)

        async def writer(lt: am.SessionLifetime, n: int) -> None:
            for i in range(n):
                await lt.publish(meta={"i": i}, notification_meta={"seq": i})
                await owner.send_notification("x/ping", {"from": lt.session_id})

        async with driver.task_group() as nursery:
            for lt in lts:
                nursery.start_soon(writer, lt, 20)
            await driver.wait_all_tasks_blocked()
            t.open()
        await owner.wait_flushed()
    # every frame parsed as one whole message (RecordingTransport checks each line)
    assert len(t.messages) == 1 + 3 * 20 * 2
    for lt in lts:
        seqs = [(nm or {}).get("seq") for nm in mirror.notification_meta(lt.session_id)]
        assert seqs == list(range(20))
        assert_synced(mirror, lt)


async def test_r2_sequenced_interleaving_keeps_enqueue_order(driver: Driver) -> None:
    seq = driver.sequencer()
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)

        async def agent() -> None:
            async with seq(0):
                await lt.publish(meta={"a": 1})
            async with seq(2):
                lt.resync()
                await owner.send_response(1, result=None)

        async def extension() -> None:
            async with seq(1):
                await lt.domain("ext").set(["k"], "v")
            async with seq(3):
                await lt.publish(meta={"late": 1})

        async with driver.task_group() as nursery:
            nursery.start_soon(agent)
            nursery.start_soon(extension)
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": {"a": 1, "ext": {"k": "v"}}},
        {"s": SID, "_meta": None},
        {"s": SID, "_meta": {"hold": True, "a": 1, "ext": {"k": "v"}, "late": 1}},
        {"id": 1},
    ]
    assert_synced(mirror, lt)


# -- R3 coalescing keeps meaning -----------------------------------------------------------------


async def test_r3_backlogged_patches_coalesce_and_converge(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        for i in range(200):
            assert lt.publish_nowait(meta={f"k{i % 7}": i, f"k{(i + 3) % 7}": None})
        stats = owner.statistics()
        assert stats.coalesced == 199
        assert stats.queued_frames <= 2
        t.open()
        await owner.wait_flushed()
    assert len(t.frames) == 2
    assert_synced(mirror, lt)


async def test_r3_clear_then_object_stays_two_frames(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        await lt.publish(meta=None)
        await lt.publish(meta={"b": 2, "gone": None})
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [{"s": SID, "_meta": None}, {"s": SID, "_meta": {"b": 2, "gone": None}}]
    assert_synced(mirror, lt)


async def test_r3_notification_meta_frames_are_never_merged(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        await lt.publish(meta={"a": 2}, notification_meta={"trace": "t1"})
        await lt.publish(meta={"a": 3})
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": {"a": 2}, "nm": {"trace": "t1"}},
        {"s": SID, "_meta": {"a": 3}},
    ]
    assert_synced(mirror, lt)


async def test_r3_publish_never_waits_for_a_slow_reader_with_coalescing(driver: Driver) -> None:
    t, _ = gated()
    async with driver.open_owner(t, OwnerOptions(capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await owner.send_response(1, result=None)  # the queue is now full
        for i in range(10):
            lt.publish_nowait(meta={"n": i})  # would raise driver.would_block if it had to wait
            lt.resync()
        bound = owner.statistics().queued
        for i in range(1000):
            lt.publish_nowait(meta={"n": i})
            lt.resync()
        assert owner.statistics().queued == bound <= 5  # held frame, response, and 3 entries
        t.open()


async def test_r3_coalesce_off_sends_every_update_as_its_own_frame(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t, OwnerOptions(coalesce=False)) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        for i in range(5):
            await lt.publish(meta={"n": i})
        assert owner.statistics().coalesced == 0
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [{"s": SID, "_meta": {"n": i}} for i in range(5)]
    assert_synced(mirror, lt)


async def test_r3_publish_nowait_raises_wouldblock_when_full(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        lt.publish_nowait(meta={"a": 1})
        with pytest.raises(driver.would_block):
            lt.publish_nowait(meta={"b": 2})
        assert lt.snapshot().meta == {"hold": True, "a": 1}
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [{"s": SID, "_meta": {"a": 1}}]
    assert_synced(mirror, lt)


async def test_r3_cancelled_while_waiting_for_room_publishes_nothing(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        async with driver.task_group() as nursery:
            nursery.start_soon(functools.partial(lt.publish, meta={"b": 2}))
            await driver.wait_all_tasks_blocked()
            assert owner.statistics().waiting_producers == 1
            nursery.cancel()
        assert owner.statistics().waiting_producers == 0  # it left nothing behind
        assert lt.snapshot().meta == {"hold": True, "a": 1}
        assert owner.statistics().publications == 2
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [{"s": SID, "_meta": {"a": 1}}]
    assert_synced(mirror, lt)


@pytest.mark.parametrize("yields", range(4))
async def test_r3_a_cancellation_never_follows_the_effect(driver: Driver, yields: int) -> None:
    """A producer waits for room; room comes; the producer is cancelled after ``yields``
    scheduling steps. Whenever the cancellation lands, the call either raised it and published
    nothing, or published and returned normally: never both, never neither."""
    t, mirror = gated()
    outcome: list[object] = []

    async def producer(lt: am.SessionLifetime) -> None:
        try:
            outcome.append(await lt.publish(meta={"b": 2}))
        except BaseException:
            outcome.append("cancelled")
            raise

    async with driver.open_owner(t, OwnerOptions(coalesce=False, capacity=1)) as owner:
        lt = owner.open_lifetime(SID)
        filler = owner.open_lifetime("filler")
        await hold_writer(lt, t)
        await filler.publish(meta={"f": 1})  # the queue is full
        async with driver.task_group() as tasks:
            tasks.start_soon(producer, lt)
            await driver.wait_all_tasks_blocked()
            assert owner.statistics().waiting_producers == 1
            owner.close_lifetime("filler")  # room: the producer is woken
            for _ in range(yields):
                await driver.checkpoint()
            tasks.cancel()
        published = "b" in (lt.snapshot().meta or {})
        assert outcome in ([True], ["cancelled"])
        assert published == (outcome == [True])
        t.open()
        await owner.wait_flushed()
    assert_synced(mirror, lt)


async def test_r3_producer_waiting_for_room_resumes_when_the_writer_frees_it(
    driver: Driver,
    recording: Make,
    virtual_time: VirtualTime,
) -> None:
    t, mirror = recording()
    options = OwnerOptions(coalesce=False, capacity=1)
    async with driver.fail_after(60), driver.open_owner(t, options) as owner:
        lt = owner.open_lifetime(SID)
        for i in range(5):
            await lt.publish(meta={"n": i})
        for i in range(3):
            await owner.send_response(i, result=None)
    assert len(t.frames) == 8
    assert_synced(mirror, lt)


# -- R4 resync -----------------------------------------------------------------------------------


async def test_r4_resync_is_clear_then_snapshot_before_the_response(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(title="T", updated_at="2025-01-02T03:04:05Z", meta={"a": 1})
        await owner.wait_flushed()
        mirror.reset(SID)  # a client that reconnects knows nothing
        lt.resync()
        await owner.send_response("resume-1", result={})
    assert wire(t)[1:] == [
        {"s": SID, "_meta": None},
        {"s": SID, "title": "T", "updatedAt": "2025-01-02T03:04:05Z", "_meta": {"a": 1}},
        {"id": "resume-1"},
    ]
    assert owner.statistics().resyncs == 1
    assert_synced(mirror, lt)


async def test_r4_snapshot_is_taken_when_written_not_when_requested(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        lt.resync()
        await lt.publish(meta={"newer": 1})
        t.release(1)  # the held frame
        await t.wait_for_waiting(1)  # the clear is being written; the snapshot is not rendered
        await lt.publish(meta={"newest": 1})
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": None},
        {"s": SID, "_meta": {"hold": True, "newer": 1, "newest": 1}},  # carries both
    ]
    assert_synced(mirror, lt)


async def test_r4_unknown_title_is_omitted_from_the_snapshot(
    driver: Driver, recording: Make
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        lt.resync()
    assert wire(t)[-1] == {"s": SID, "_meta": {"a": 1}}
    assert_synced(mirror, lt)


async def test_r4_nothing_known_sends_only_the_clear(driver: Driver, recording: Make) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        lt.resync()
    assert wire(t) == [{"s": SID, "_meta": None}]


async def test_r4_pending_resyncs_are_deduplicated(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        for _ in range(5):
            lt.resync()
        t.open()
        await owner.wait_flushed()
    assert wire(t)[1:] == [{"s": SID, "_meta": None}, {"s": SID, "_meta": {"hold": True}}]
    assert_synced(mirror, lt)


# -- R5 lifetime -----------------------------------------------------------------------------------


class _AgentSession:
    """An agent's per-session object, rebuilt on every resume (like codex-acp's SessionState)."""

    def __init__(self, owner: Owner, session_id: str) -> None:
        self.meta = (
            owner.lifetime(session_id)
            if owner.has_lifetime(session_id)
            else owner.open_lifetime(session_id)
        )


async def test_r5_state_survives_reinstalled_agent_objects(driver: Driver, recording: Make) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        first = _AgentSession(owner, SID)
        await first.meta.publish(title="t", meta={"a": 1})
        second = _AgentSession(owner, SID)  # active resume
        assert second.meta.snapshot() == first.meta.snapshot()
        await second.meta.publish(meta={"b": 2})
        second.meta.resync()
    assert wire(t)[-1] == {"s": SID, "title": "t", "_meta": {"a": 1, "b": 2}}
    assert_synced(mirror, second.meta)


async def test_r5_close_then_reopen_starts_a_fresh_lifetime(
    driver: Driver, recording: Make
) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        old = owner.open_lifetime(SID)
        await old.publish(title="old", meta={"old": 1})
        owner.close_lifetime(SID)
        assert not owner.has_lifetime(SID)
        new = owner.open_lifetime(SID, seed=am.SessionInfoPatch(meta={"seeded": True}))
        assert new.snapshot() == am.SessionInfo(meta={"seeded": True})
        new.resync()
    assert wire(t)[-2:] == [{"s": SID, "_meta": None}, {"s": SID, "_meta": {"seeded": True}}]


# -- R6 fencing ------------------------------------------------------------------------------------


async def test_r6_close_writes_what_was_queued_and_rejects_later_calls(driver: Driver) -> None:
    """Fencing begins at the close (issue 33): the frames queued before it go out in order,
    the resync with the state at the close, then the response queued after it; every later
    call is refused and counted."""
    t, _ = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        other = owner.open_lifetime("other")
        await hold_writer(lt, t)
        await lt.publish(meta={"queued": 1})
        await other.publish(meta={"o": 1})
        lt.resync()
        owner.close_lifetime(SID)
        assert owner.statistics().fenced == 0  # nothing queued is dropped
        await owner.send_response(9, result={})
        assert lt.closed
        assert not await lt.publish(meta={"late": 1})
        assert not lt.resync()
        assert not await lt.domain("d").set(["k"], 1)
        assert not await lt.report_failure("f", 1, {})
        chunk = {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk"}}
        assert not await owner.send_notification("session/update", chunk)
        assert owner.statistics().fenced == 5
        t.open()
        await owner.wait_flushed()
        assert owner.statistics().fenced == 5
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": {"queued": 1}},
        {"s": "other", "_meta": {"o": 1}},
        {"s": SID, "_meta": None},
        {"s": SID, "_meta": {"hold": True, "queued": 1}},
        {"id": 9},
    ]


async def test_r6_close_lets_a_resync_in_flight_finish(driver: Driver) -> None:
    """A resync in flight at the close (its clear being written) sends its snapshot: the
    state at the close; a publication after the close is not in it, nor on the wire."""
    t, _ = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        t.release(1)
        await t.wait_for_frames(1)
        lt.resync()
        await t.wait_for_waiting(1)  # the clear is being written
        owner.close_lifetime(SID)
        assert not await lt.publish(meta={"late": 1})
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": None},
        {"s": SID, "_meta": {"a": 1}},
    ]


async def test_r6_old_handles_stay_fenced_after_reopen(driver: Driver, recording: Make) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        old = owner.open_lifetime(SID)
        owner.close_lifetime(SID)
        new = owner.open_lifetime(SID)
        assert not await old.publish(meta={"stale": 1})
        await new.publish(meta={"fresh": 1})
        assert owner.lifetime(SID).snapshot() == new.snapshot()
    assert wire(t) == [{"s": SID, "_meta": {"fresh": 1}}]
    assert_synced(mirror, new)


# -- R7 failure incidents --------------------------------------------------------------------------

AIR_PATH = ("jetbrains", "air", "sessionFailure")


async def test_r7_nested_failure_record_keeps_siblings(driver: Driver, recording: Make) -> None:
    t, mirror = recording()
    async with driver.open_owner(t, OwnerOptions(failure_path=AIR_PATH)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"jetbrains": {"air": {"goal": "g"}, "other": 1}})
        await owner.wait_flushed()
        assert await lt.report_failure("inc-1", 1, {"title": "boom"})
        await owner.wait_flushed()
        reported = lt.current_failure
        assert reported == am.FailureIncident("inc-1", 1)
        assert await lt.resolve_failure("inc-1", 1)
        assert lt.current_failure is None
    assert wire(t)[1:] == [
        {
            "s": SID,
            "_meta": {
                "jetbrains": {
                    "air": {"goal": "g", "sessionFailure": {"title": "boom"}},
                    "other": 1,
                }
            },
        },
        {"s": SID, "_meta": {"jetbrains": {"air": {"goal": "g"}, "other": 1}}},
    ]
    assert_synced(mirror, lt)


async def test_r7_stale_resolution_changes_nothing(driver: Driver, recording: Make) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.report_failure("inc-1", 1, {"r": 1})
        await lt.report_failure("inc-1", 2, {"r": 2})
        await owner.wait_flushed()
        sent = len(t.frames)
        assert not await lt.resolve_failure("inc-1", 1)  # older revision
        assert not await lt.resolve_failure("inc-0", 2)  # other id
        assert not await lt.report_failure("inc-1", 1, {"r": "late"})  # stale report
        await owner.wait_flushed()
        assert len(t.frames) == sent
        assert lt.snapshot().meta == {"agent-meta": {"failure": {"r": 2}}}
        assert lt.current_failure == am.FailureIncident("inc-1", 2)
        assert await lt.resolve_failure("inc-1", 2)
    assert wire(t)[-1] == {"s": SID, "_meta": {"agent-meta": None}}
    assert_synced(mirror, lt)


async def test_r7_newer_incident_replaces_and_survives_late_resolution(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t, OwnerOptions(failure_path=("failure",))) as owner:
        lt = owner.open_lifetime(SID)
        await lt.report_failure("a", 1, "first")
        await owner.wait_flushed()
        await lt.report_failure("b", 1, "second")
        assert not await lt.resolve_failure("a", 1)
        assert lt.snapshot().meta == {"failure": "second"}
    assert wire(t) == [
        {"s": SID, "_meta": {"failure": "first"}},
        {"s": SID, "_meta": {"failure": "second"}},
    ]
    assert_synced(mirror, lt)


async def test_r7_incident_survives_agent_object_reinstallation(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        await _AgentSession(owner, SID).meta.report_failure("inc", 3, {"x": 1})
        again = _AgentSession(owner, SID)
        assert again.meta.current_failure == am.FailureIncident("inc", 3)
        assert await again.meta.resolve_failure("inc", 3)
    assert_synced(mirror, again.meta)
    assert mirror.meta(SID) is None


# -- R8 domain patches -----------------------------------------------------------------------------


async def test_r8_domain_edits_send_whole_top_level_values(driver: Driver, recording: Make) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        ext = lt.domain("ext")
        steps = [
            lt.publish(meta={"other": 1}),
            ext.set(["a", "b"], 1),
            ext.set(["a", "c"], [None]),
            ext.remove(["a", "b"]),
            ext.remove(["missing"]),  # nothing there: nothing sent
            ext.remove([]),
        ]
        for step in steps:
            await step
            await owner.wait_flushed()
        assert ext.get() is am.OMITTED
    assert wire(t) == [
        {"s": SID, "_meta": {"other": 1}},
        {"s": SID, "_meta": {"ext": {"a": {"b": 1}}}},
        {"s": SID, "_meta": {"ext": {"a": {"b": 1, "c": [None]}}}},
        {"s": SID, "_meta": {"ext": {"a": {"c": [None]}}}},
        {"s": SID, "_meta": {"ext": None}},
    ]
    assert_synced(mirror, lt)


async def test_r8_domain_handle_cannot_write_outside_its_key(
    driver: Driver, recording: Make
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"other": {"x": 1}})
        ext = lt.domain("ext")
        await ext.set(["other"], 2)
        await ext.set([".."], 3)
        with pytest.raises(am.MetaPathError):
            await ext.set("other", 1)  # a bare str is not a path
        with pytest.raises(am.MetaPathError):
            await ext.set([1], 1)  # type: ignore[list-item]
        with pytest.raises(am.MetaValueError):
            lt.domain(1)  # type: ignore[arg-type]
        await ext.set(["leaf"], 1)
        with pytest.raises(am.MetaPathError):
            await ext.set(["leaf", "below"], 1)
        assert lt.snapshot().meta == {"other": {"x": 1}, "ext": {"other": 2, "..": 3, "leaf": 1}}
    for frame in wire(t)[1:]:
        assert set(frame["_meta"]) == {"ext"}
    assert_synced(mirror, lt)


async def test_r8_writers_sharing_a_key_never_lose_edits(driver: Driver) -> None:
    t, mirror = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)

        async def writer(name: str) -> None:
            handle = owner.lifetime(SID).domain("shared")
            for i in range(10):
                await handle.set([name, str(i)], i)

        async with driver.task_group() as nursery:
            for name in "abc":
                nursery.start_soon(writer, name)
        t.open()
        await owner.wait_flushed()
    expected = {name: {str(i): i for i in range(10)} for name in "abc"}
    assert lt.snapshot().meta == {"hold": True, "shared": expected}
    assert_synced(mirror, lt)


async def test_r8_domain_writers_waiting_for_room_never_lose_edits(
    driver: Driver,
    virtual_time: VirtualTime,
) -> None:
    t, mirror = gated()
    async with driver.fail_after(60):  # virtual time: a producer never woken fails, not hangs
        lt = await _two_domain_writers_waiting_for_room(driver, t)
    assert lt.snapshot().meta == {"hold": True, "d": {"a": 1, "b": 2}}
    assert_synced(mirror, lt)


async def _two_domain_writers_waiting_for_room(
    driver: Driver, t: GatedTransport
) -> am.SessionLifetime:
    async with driver.open_owner(t, OwnerOptions(coalesce=False, capacity=2)) as owner:
        lt = owner.open_lifetime(SID)
        filler = owner.open_lifetime("filler")
        await hold_writer(lt, t)
        await filler.publish(meta={"f": 1})
        await filler.publish(meta={"f": 2})  # the queue is full
        async with driver.task_group() as nursery:
            nursery.start_soon(lt.domain("d").set, ["a"], 1)
            nursery.start_soon(lt.domain("d").set, ["b"], 2)
            await driver.wait_all_tasks_blocked()
            t.open()  # the writer frees the room (and wakes the producers)
        await owner.wait_flushed()
    return lt


# -- R9 notification metadata ----------------------------------------------------------------------


async def test_r9_notification_meta_is_forwarded_never_stored(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1}, notification_meta={"traceparent": "00-abc-01"})
        await lt.publish(title="t", notification_meta={"n": [None]})
        assert lt.snapshot() == am.SessionInfo(title="t", meta={"a": 1})
        lt.resync()
    assert wire(t) == [
        {"s": SID, "_meta": {"a": 1}, "nm": {"traceparent": "00-abc-01"}},
        {"s": SID, "title": "t", "nm": {"n": [None]}},
        {"s": SID, "_meta": None},
        {"s": SID, "title": "t", "_meta": {"a": 1}},
    ]
    assert_synced(mirror, lt)


# -- R10 protocol versions -------------------------------------------------------------------------


async def test_r10_v1_merged_sends_complete_objects_and_one_frame_resync(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording(1)
    async with driver.open_owner(t, OwnerOptions(protocol_version=1)) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        await owner.wait_flushed()
        await lt.publish(meta={"b": 2})
        await owner.wait_flushed()
        await lt.publish(meta={"a": None})
        await owner.wait_flushed()
        await lt.publish(meta=None)
        await owner.wait_flushed()
        await lt.publish(meta={"c": 3})
        lt.resync()
        await owner.send_response(1, result={})
    assert wire(t) == [
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": {"a": 1, "b": 2}},
        {"s": SID, "_meta": {"b": 2}},
        {"s": SID, "_meta": {}},
        {"s": SID, "_meta": {"c": 3}},
        {"s": SID, "_meta": {"c": 3}},
        {"id": 1},
    ]
    assert_synced(mirror, lt)


async def test_r10_v1_passthrough_keeps_legacy_frames(driver: Driver) -> None:
    t, _ = gated(1)
    async with driver.open_owner(
        t, OwnerOptions(protocol_version=1, v1_meta_mode="passthrough")
    ) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        await lt.publish(meta={"b": None})
        lt.resync()
        t.open()
        await owner.wait_flushed()
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": {"b": None}},
    ]


async def test_r10_protocol_version_is_set_before_the_first_lifetime(
    driver: Driver,
    recording: Make,
) -> None:
    t, mirror = recording(1)
    async with driver.open_owner(t) as owner:
        owner.set_protocol_version(1)
        lt = owner.open_lifetime(SID)
        with pytest.raises(RuntimeError):
            owner.set_protocol_version(2)
        with pytest.raises(ValueError):
            owner.set_protocol_version(3)
        await lt.publish(updated_at="2025-01-01T00:00:00", meta={"a": 1})  # v1: no offset needed
    assert wire(t) == [{"s": SID, "updatedAt": "2025-01-01T00:00:00", "_meta": {"a": 1}}]
    assert_synced(mirror, lt)


# -- R11 write failures never wedge ----------------------------------------------------------------


async def test_r11_frame_not_sent_is_retried_and_delivered(
    driver: Driver,
    virtual_time: VirtualTime,
) -> None:
    mirror = ClientMirror()
    t = FailingTransport(fail_on={2, 3}, mode="not_sent", mirror=mirror)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"a": 1})
        await owner.wait_flushed()
        await lt.publish(meta={"b": 2})
        await owner.send_response(1, result=None)
    stats = owner.statistics()
    assert stats.retried_writes == 2
    assert stats.write_failures == 0
    assert wire(t) == [{"s": SID, "_meta": {"a": 1}}, {"s": SID, "_meta": {"b": 2}}, {"id": 1}]
    assert_synced(mirror, lt)


async def test_r11_retries_exhausted_then_the_session_is_repaired(
    driver: Driver, virtual_time: VirtualTime, caplog: pytest.LogCaptureFixture
) -> None:
    mirror = ClientMirror()
    t = FailingTransport(fail_on=lambda call, _frame: call <= 5, mode="not_sent", mirror=mirror)
    with caplog.at_level(logging.WARNING, logger="agent_meta"):
        async with driver.open_owner(t) as owner:
            lt = owner.open_lifetime(SID)
            await lt.publish(meta={"a": 1})
            await owner.wait_flushed()
            await lt.publish(meta={"b": 2})
    stats = owner.statistics()
    assert stats.write_failures == 1
    assert stats.repairs == 1
    assert stats.retried_writes == 4
    assert wire(t) == [
        {"s": SID, "_meta": None},  # the repair of the undelivered {"a": 1}
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": {"b": 2}},
    ]
    assert any("not delivered" in r.getMessage() for r in caplog.records)
    assert_synced(mirror, lt)


async def test_r11_lost_frame_marks_the_session_for_repair(driver: Driver) -> None:
    mirror = ClientMirror()
    t = FailingTransport(fail_on=2, mode="lost", mirror=mirror)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        other = owner.open_lifetime("other")
        await lt.publish(meta={"a": 1})
        await owner.wait_flushed()
        await lt.publish(meta={"a": 2, "b": 2})  # lost
        await owner.wait_flushed()
        await other.publish(meta={"o": 1})
        await lt.publish(meta={"c": 3})
    assert len(t.lost) == 1
    assert wire(t) == [
        {"s": SID, "_meta": {"a": 1}},
        {"s": SID, "_meta": None},
        {"s": SID, "_meta": {"a": 2, "b": 2}},
        {"s": "other", "_meta": {"o": 1}},
        {"s": SID, "_meta": {"c": 3}},
    ]
    stats = owner.statistics()
    assert (stats.write_failures, stats.repairs) == (1, 1)
    assert_synced(mirror, lt)


async def test_r11_partial_write_stops_the_owner_and_nothing_follows(driver: Driver) -> None:
    t = FailingTransport(fail_on=2, mode="partial")
    lifetimes: list[am.SessionLifetime] = []

    async def run() -> None:
        async with driver.open_owner(t) as owner:
            lifetimes.append(owner.open_lifetime(SID))
            await lifetimes[0].publish(meta={"a": 1})
            await owner.send_response(1, result=None)
            await owner.send_response(2, result=None)
            await driver.sleep_forever()

    with pytest.raises(am.TransportBrokenError):
        await run()
    lt = lifetimes[0]
    assert wire(t) == [{"s": SID, "_meta": {"a": 1}}]
    assert t.calls == 2  # nothing was attempted after the half line
    assert t.partial
    with pytest.raises(am.OwnerClosedError):
        await lt.publish(meta={"b": 2})


async def test_r11_broken_transport_while_flushing_raises_transport_broken(driver: Driver) -> None:
    t = FailingTransport(fail_on=1, mode="partial")

    async def run() -> None:
        async with driver.open_owner(t) as owner:
            lt = owner.open_lifetime(SID)
            await lt.publish(meta={"a": 1})
            await owner.wait_flushed()

    with pytest.raises(am.TransportBrokenError):
        await run()


async def test_r11_stream_transport_failure_is_transport_broken(driver: Driver) -> None:
    broken = await driver.broken_stream()

    async def run() -> None:
        async with driver.open_owner(broken) as owner:
            lt = owner.open_lifetime(SID)
            await lt.publish(meta={"a": 1})
            await driver.sleep_forever()

    with pytest.raises(am.TransportBrokenError):
        await run()


# -- R12 bad input ---------------------------------------------------------------------------------


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    "fields",
    [
        {"meta": {"a": math.nan}},
        {"meta": {"a": -math.inf}},
        {"meta": {"a": b"x"}},
        {"meta": {"a": frozenset()}},
        {"meta": {1: "x"}},
        {"meta": {"a": _cycle()}},
        {"meta": ["a"]},
        {"meta": "a"},
        {"updated_at": "2025-01-01T00:00:00"},
        {"title": 1},
        {"notification_meta": {"x": math.nan}},
    ],
    ids=repr,
)
async def test_r12_bad_input_raises_and_changes_nothing(
    driver: Driver, recording: Make, fields: dict[str, Any]
) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"ok": 1})
        before = lt.snapshot()
        with pytest.raises(am.MetaValueError):
            await lt.publish(**fields)
        with pytest.raises(am.MetaValueError):
            lt.publish_nowait(**fields)
        assert lt.snapshot() == before
        assert owner.statistics().publications == 1
    assert wire(t) == [{"s": SID, "_meta": {"ok": 1}}]


async def test_r12_check_raises_what_publish_would_and_changes_nothing(
    driver: Driver, recording: Make
) -> None:
    """``SessionLifetime.check`` (for an agent that publishes through another serializer,
    the official SDK's): the same errors as ``publish``, nothing stored, nothing sent."""
    t, _ = recording()
    deep: object = 1
    for _ in range(245):
        deep = {"a": deep}
    async with driver.open_owner(t, OwnerOptions(max_frame_bytes=1000)) as owner:
        lt = owner.open_lifetime(SID)
        lt.check(meta={"ok": 1}, title="T", notification_meta={"traceparent": "00"})
        with pytest.raises(am.MetaValueError, match="nested deeper than 240 levels"):
            lt.check(meta={"deep": deep})
        with pytest.raises(am.MetaValueError):
            lt.check(meta={"nan": math.nan})
        with pytest.raises(am.FrameTooLargeError):
            lt.check(meta={"big": "x" * 2000})
        assert lt.snapshot() == am.SessionInfo()
        assert owner.statistics().publications == 0
    assert t.frames == []


async def test_r12_bad_domain_and_failure_values_raise(driver: Driver, recording: Make) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        with pytest.raises(am.MetaValueError):
            await lt.domain("d").set(["k"], math.nan)
        with pytest.raises(am.MetaValueError):
            await lt.report_failure("id", 1, {"x": {1, 2}})  # type: ignore[dict-item]
        with pytest.raises(am.MetaValueError):
            await lt.report_failure("id", "1", {})  # type: ignore[arg-type]
        with pytest.raises(am.MetaValueError):
            await owner.send_response(1, result=math.inf)
        with pytest.raises(am.MetaValueError):
            await owner.send_response(1, error={"message": "no code"})
        with pytest.raises(am.MetaValueError):
            await owner.send_notification("x", {"a": b"bytes"})
        assert lt.snapshot() == am.SessionInfo()
        assert lt.current_failure is None
    assert t.frames == []


async def test_r12_oversized_frames_raise_frame_too_large(driver: Driver, recording: Make) -> None:
    t, _ = recording()
    async with driver.open_owner(t, OwnerOptions(max_frame_bytes=1000)) as owner:
        lt = owner.open_lifetime(SID)
        with pytest.raises(am.FrameTooLargeError):
            await lt.publish(meta={"big": "x" * 2000})
        with pytest.raises(am.FrameTooLargeError):
            await owner.send_response(1, result="x" * 2000)
        with pytest.raises(am.FrameTooLargeError):
            owner.open_lifetime("seeded", seed=am.SessionInfoPatch(meta={"big": "x" * 2000}))
        assert not owner.has_lifetime("seeded")
        assert lt.snapshot() == am.SessionInfo()
    assert t.frames == []


async def test_r12_unknown_and_existing_sessions_raise(driver: Driver, recording: Make) -> None:
    t, _ = recording()
    async with driver.open_owner(t) as owner:
        with pytest.raises(am.UnknownSessionError):
            owner.lifetime("nope")
        with pytest.raises(am.UnknownSessionError):
            owner.close_lifetime("nope")
        owner.open_lifetime(SID)
        with pytest.raises(am.SessionExistsError):
            owner.open_lifetime(SID)
        owner.close_lifetime(SID)
        with pytest.raises(am.UnknownSessionError):
            owner.close_lifetime(SID)
        with pytest.raises(am.UnknownSessionError):
            owner.lifetime(SID)
    assert t.frames == []


# -- statistics and flushing -----------------------------------------------------------------------


async def test_statistics_count_what_happened(driver: Driver) -> None:
    t, _ = gated()
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await hold_writer(lt, t)
        await lt.publish(meta={"a": 1})
        await lt.publish(meta={"a": 2})
        lt.resync()
        lt.resync()
        doomed = owner.open_lifetime("doomed")
        await doomed.publish(meta={"d": 1})
        owner.close_lifetime("doomed")  # its queued frame is still written
        await doomed.publish(meta={"d": 2})  # refused: the one fenced call
        stats = owner.statistics()
        assert stats.open_lifetimes == 1
        assert stats.publications == 4
        assert stats.coalesced == 2
        assert stats.fenced == 1
        assert stats.waiting_producers == 0
        t.open()
        await owner.wait_flushed()
    stats = owner.statistics()
    assert stats.fenced == 1
    assert stats.frames_written == len(t.frames) == 5
    assert stats.bytes_written == len(t.data)
    assert stats.resyncs == 1
    assert stats.repairs == 0
    assert stats.write_failures == 0
    assert stats.queued == 0


async def test_owner_exit_writes_every_enqueued_frame(
    driver: Driver,
    virtual_time: VirtualTime,
) -> None:
    t = SlowTransport(1.0)
    async with driver.open_owner(t) as owner:
        lt = owner.open_lifetime(SID)
        await lt.publish(meta={"hold": True})
        await driver.wait_all_tasks_blocked()  # the writer is inside the slow send
        await lt.publish(meta={"a": 1})
        await owner.send_response(1, result={})
        await lt.publish(meta={"a": 2})  # merged into the entry queued before the response
    assert wire(t) == [
        {"s": SID, "_meta": {"hold": True}},
        {"s": SID, "_meta": {"a": 2}},
        {"id": 1},
    ]
