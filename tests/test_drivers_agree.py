"""Both drivers write byte-identical frames for the same inputs.

Every rule is decided by the sans-IO queue, so the trio owner and the asyncio owner must put the
same bytes on the wire when they are given the same calls in the same queue states. A random
program (publications with and without notification ``_meta``, domain edits, failure reports
and resolutions, resyncs, raw notifications and responses, close and reopen, gate releases) runs
once on each driver; after every call the test waits until every task is blocked, so that both
writers have taken exactly what they could. The outputs are compared byte for byte, and so are
the lifetimes' snapshots and the statistics.

Two outputs: a ``GatedTransport`` (frames queue behind the gate, so coalescing and the writer's
order are exercised) and a real pipe (each driver's stream transport and its direct writes).
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agent_meta
from agent_meta.testing import GatedTransport, PipeRecorder
from tests import drivers

SESSIONS = ("s1", "s2")
KEYS = ("a", "b")

metas = st.one_of(
    st.just(agent_meta.OMITTED),
    st.none(),
    st.dictionaries(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 2)), max_size=2),
)
titles = st.one_of(st.just(agent_meta.OMITTED), st.none(), st.sampled_from(["T1", "T2"]))
session = st.sampled_from(SESSIONS)
operation = st.one_of(
    st.tuples(st.just("publish"), session, titles, metas, st.booleans()),
    st.tuples(st.just("publish"), session, titles, metas, st.booleans()),
    st.tuples(st.just("domain"), session, st.lists(st.sampled_from("pq"), min_size=1, max_size=2)),
    st.tuples(st.just("fail"), session, st.integers(0, 2)),
    st.tuples(st.just("resolve"), session, st.integers(0, 2)),
    st.tuples(st.just("resync"), session),
    st.tuples(st.just("raw"), session),
    st.tuples(st.just("respond"), st.integers(0, 9)),
    st.tuples(st.just("close"), session),
    st.tuples(st.just("release"), st.integers(1, 3)),
)
options = st.builds(
    agent_meta.OwnerOptions,
    protocol_version=st.sampled_from([1, 2]),
    v1_meta_mode=st.sampled_from(["merged", "passthrough"]),
    coalesce=st.booleans(),
)  # capacity stays 256: a program never waits for room (the gate is released only between calls)


async def _call(owner: drivers.Owner, op: tuple[Any, ...]) -> object:
    """Make one call; return what it returned."""
    kind = op[0]
    if kind == "respond":
        await owner.send_response(op[1], result={"n": op[1]})
        return None
    if kind == "release":
        return None  # the gate is released by the caller
    session_id = op[1]
    if not owner.has_lifetime(session_id):
        owner.open_lifetime(session_id).resync()  # what a resume handler does
    lifetime = owner.lifetime(session_id)
    if kind == "publish":
        trace = {"traceparent": "00-1"} if op[4] else None
        return await lifetime.publish(title=op[2], meta=op[3], notification_meta=trace)
    if kind == "domain":  # a path through a number is refused (MetaPathError) on both
        return await lifetime.domain("d").set(op[2], len(op[2]))
    if kind == "fail":
        return await lifetime.report_failure("i1", op[2], {"revision": op[2]})
    if kind == "resolve":
        return await lifetime.resolve_failure("i1", op[2])
    if kind == "resync":
        return lifetime.resync()
    if kind == "raw":
        params = {"sessionId": session_id, "update": {"sessionUpdate": "agent_message_chunk"}}
        await owner.send_notification("session/update", params)
        return None
    assert kind == "close"
    owner.close_lifetime(session_id)
    return None


async def run_program(
    driver: drivers.Driver,
    output: Literal["gate", "pipe"],
    options: agent_meta.OwnerOptions,
    program: list[tuple[Any, ...]],
) -> tuple[list[bytes], list[object], dict[str, agent_meta.SessionInfo], Any]:
    """Run ``program``; return the bytes written, what each call returned (or the type of
    error it raised), the final snapshots and the statistics."""
    gate = GatedTransport()
    pipe = PipeRecorder()
    driver.cleanups.append(pipe.aclose)
    outcomes: list[object] = []
    async with driver.open_owner(gate if output == "gate" else pipe, options) as owner:
        for op in program:
            try:
                outcomes.append(await _call(owner, op))
            except agent_meta.AgentMetaError as exc:
                outcomes.append(type(exc))
            if op[0] == "release":
                gate.release(op[1])
            await driver.wait_all_tasks_blocked()
        gate.open()
        snapshots = {sid: owner.lifetime(sid).snapshot() for sid in owner.lifetime_ids()}
    frames = gate.frames if output == "gate" else pipe.frames
    return frames, outcomes, snapshots, owner.statistics()


@pytest.mark.parametrize("output", ["gate", "pipe"])
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(options=options, program=st.lists(operation, max_size=30))
def test_both_drivers_write_the_same_bytes(
    output: Literal["gate", "pipe"],
    options: agent_meta.OwnerOptions,
    program: list[tuple[Any, ...]],
) -> None:
    results = {}
    for name in drivers.NAMES:
        driver = drivers.get(name)
        results[name] = driver.run(run_program, driver, output, options, program)
    trio_frames, trio_outcomes, trio_snapshots, trio_stats = results["trio"]
    frames, outcomes, snapshots, stats = results["asyncio"]
    assert frames == trio_frames
    assert outcomes == trio_outcomes
    assert snapshots == trio_snapshots
    assert stats == trio_stats  # the same work, counted the same way
