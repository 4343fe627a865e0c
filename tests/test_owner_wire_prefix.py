"""Issue 13, point 2: every prefix of the wire folds to a state the agent held, in order.

A client shows what it has folded so far, frame by frame; what it shows in between must never
be a state the agent did not hold, nor go back to an older one. R4 promises that an older
restoration never overwrites a newer patch; this module adds the stronger, per-prefix promise:
the snapshot of a resync must never run ahead of frames still queued behind it.

Definitions used by every check here:

- **States the agent held** (per session): the owner's ``lifetime.snapshot()`` right after the
  lifetime opens, then right after each call that can change it (``publish``, a domain edit, a
  failure report or resolution), recorded by the test in call order. Position ``k`` in that
  list is "the agent's state after its ``k``-th such call". Calls that change nothing (a
  resync, a raw notification) add no state.
- **The client's state after a prefix**: :class:`~agent_meta.testing.ClientMirror` (the
  client rule of the negotiated protocol version) fed the frames written, in order, up to and
  including the last frame of the prefix; compared as a whole :class:`~agent_meta.SessionInfo`
  (``title``, ``updatedAt`` and ``_meta``).
- **The property**: for each session, walking the wire from the start, the client's state after
  every checked prefix equals some state the agent held, at a position no earlier than the
  position matched by the previous checked prefix (monotonic). The earliest such position is
  taken (greedy matching is exact for subsequence checks).
- **One step, two frames**: on v2 a resync is ``_meta: null`` and then the snapshot, and a
  coalesced "clear then object" is ``_meta: null`` (with the merged ``title``/``updatedAt``)
  and then the object (R3). The client state right after such a ``null`` frame is a transient
  the wire cannot avoid, so a prefix is *not checked* when its last frame is a v2
  ``session_info_update`` carrying ``_meta: null`` and the very next frame on the wire is a
  ``session_info_update`` of the same session without notification ``_meta`` whose ``_meta``
  is not ``null``. The prefix ending at that next frame is checked as usual.

Skipping states is allowed (coalescing merges publications, so the client may never see some
intermediate states); showing a state the agent never held, or an older one after a newer one,
is not. Lifetimes are never closed here (the property is per lifetime; close and reopen are
point 6), nothing fails to be written (a lost frame leaves a gap by nature, repaired by R11),
and v1 runs in the default merged mode (pass-through promises nothing about the client view).

Every check runs on both drivers (trio and asyncio, ``tests/drivers.py``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agent_meta
from agent_meta.testing import ClientMirror, GatedTransport
from tests import drivers

if TYPE_CHECKING:
    from agent_meta.testing._mirror import Message

SID = "sess-prefix"
Held = dict[str, list[agent_meta.SessionInfo]]


# -- the property ---------------------------------------------------------------------------------


def _info_session(message: Message) -> str | None:
    """The session id of a ``session_info_update`` notification, else ``None``."""
    if message.get("method") != "session/update" or "id" in message:
        return None
    params = message["params"]
    if params["update"].get("sessionUpdate") != "session_info_update":
        return None
    session_id = params["sessionId"]
    assert isinstance(session_id, str)
    return session_id


def _is_first_of_two(messages: list[Message], index: int, version: int) -> bool:
    """Whether frame ``index`` is the ``_meta: null`` frame of a two-frame step (see the module
    docstring), so that the prefix ending at it is not checked."""
    if version != 2 or index + 1 >= len(messages):
        return False
    message = messages[index]
    update = message["params"]["update"]
    if "_meta" not in update or update["_meta"] is not None:
        return False
    after = messages[index + 1]
    if _info_session(after) != message["params"]["sessionId"] or "_meta" in after["params"]:
        return False
    return after["params"]["update"].get("_meta", {}) is not None


def _show(info: agent_meta.SessionInfo) -> str:
    def text(value: object) -> str:
        return "?" if value is agent_meta.OMITTED else json.dumps(value)

    return f"(title={text(info.title)}, updatedAt={text(info.updated_at)}, _meta={text(info.meta)})"


def check_every_prefix(frames: list[bytes], held: Held, version: int) -> None:
    """Assert the property of the module docstring over the frames written, in order."""
    messages = [json.loads(frame) for frame in frames]
    mirror = ClientMirror(protocol_version=version)
    position = dict.fromkeys(held, 0)
    for index, message in enumerate(messages):
        mirror.feed(message)
        session_id = _info_session(message)
        if session_id is None or _is_first_of_two(messages, index, version):
            continue
        seen = mirror.info(session_id)
        states = held[session_id]
        start = position[session_id]
        match = next((k for k in range(start, len(states)) if states[k] == seen), None)
        if match is None:
            earlier = [k for k in range(start) if states[k] == seen]
            shown = "\n".join(f"  [{k}] {_show(state)}" for k, state in enumerate(states))
            wire = "\n".join(f"  {i}: {frame.decode().strip()}" for i, frame in enumerate(frames))
            raise AssertionError(
                f"after frame {index} the client of session {session_id!r} holds "
                f"{_show(seen)}, which "
                + (
                    f"the agent held only at {earlier}, before the state already shown "
                    f"([{start}]): the client's view went backwards"
                    if earlier
                    else "the agent never held"
                )
                + f"\nstates the agent held:\n{shown}\nwire:\n{wire}"
            )
        position[session_id] = match


# -- one deterministic example ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("coalesce", "split"),
    [(False, False), (True, True)],
    ids=["no-coalesce", "coalesce-split-by-notification-meta"],
)
async def test_resync_snapshot_does_not_run_ahead_of_queued_patches(
    driver: drivers.Driver, coalesce: bool, split: bool
) -> None:
    """resync(), publish({"a": 1}), publish({"a": 2}) while the writer is busy.

    The agent holds a = 0 -> 1 -> 2, and the client's ``a`` must never go back. The wire used
    to be ``{"x": 0, "a": 0}``, ``null``, ``{"x": 0, "a": 2}`` (the snapshot, rendered at write
    time), ``{"a": 1}``, ``{"a": 2}``: the client's ``a`` went 0 -> 2 -> 1 -> 2. With coalescing
    on, the two patches would merge; a notification ``_meta`` on the first one keeps them apart
    (it is never merged, R3/R9).
    """
    gate = GatedTransport()
    held: Held = {SID: []}
    async with driver.open_owner(gate, agent_meta.OwnerOptions(coalesce=coalesce)) as owner:
        lifetime = owner.open_lifetime(SID)
        held[SID].append(lifetime.snapshot())
        assert await lifetime.publish(meta={"x": 0, "a": 0})
        held[SID].append(lifetime.snapshot())
        await gate.wait_for_waiting(1)  # the writer is busy with the first frame
        assert lifetime.resync()
        trace = {"traceparent": "00-1"} if split else None
        assert await lifetime.publish(meta={"a": 1}, notification_meta=trace)
        held[SID].append(lifetime.snapshot())
        assert await lifetime.publish(meta={"a": 2})
        held[SID].append(lifetime.snapshot())
        gate.open()
        await owner.wait_flushed()

    mirror = ClientMirror(protocol_version=2)
    shown: list[int] = []  # the client's "a" after each frame
    for frame in gate.frames:
        mirror.feed(frame)
        meta = mirror.meta(SID)
        if meta is not None:  # the resync's clear is a transient (see the module docstring)
            value = meta["a"]
            assert isinstance(value, int)
            shown.append(value)
    assert mirror.info(SID) == lifetime.snapshot()  # the end state was right before the fix too
    assert shown == sorted(shown), (
        f"the client's a went {' -> '.join(map(str, shown))} while the agent's went 0 -> 1 -> 2"
    )
    check_every_prefix(gate.frames, held, 2)


async def test_v1_full_object_frames_do_not_run_ahead_of_their_publication(
    driver: drivers.Driver,
) -> None:
    """The same class on v1 (merged mode), found by the property test: with the writer busy,
    publish(title="T1", meta={"a": 1}) then publish(title="T2", meta={"a": 2}) (no coalescing)
    must show the client only states the agent held. Every v1 frame used to carry the complete
    merged ``_meta`` rendered when the frame was written, but the ``title`` of its own
    publication, so the first of the two frames showed ``("T1", {"x": 0, "a": 2})``, a state the
    agent never held.
    """
    gate = GatedTransport()
    held: Held = {SID: []}
    async with driver.open_owner(
        gate, agent_meta.OwnerOptions(protocol_version=1, coalesce=False)
    ) as owner:
        lifetime = owner.open_lifetime(SID)
        held[SID].append(lifetime.snapshot())
        assert await lifetime.publish(meta={"x": 0})
        held[SID].append(lifetime.snapshot())
        await gate.wait_for_waiting(1)  # the writer is busy with the first frame
        assert await lifetime.publish(title="T1", meta={"a": 1})
        held[SID].append(lifetime.snapshot())
        assert await lifetime.publish(title="T2", meta={"a": 2})
        held[SID].append(lifetime.snapshot())
        gate.open()
        await owner.wait_flushed()
    check_every_prefix(gate.frames, held, 1)


# -- random programs ----------------------------------------------------------------------------

SESSIONS = ("s1", "s2")
KEYS = ("a", "b")

titles = st.one_of(st.just(agent_meta.OMITTED), st.none(), st.sampled_from(["T1", "T2"]))
stamps = st.one_of(
    st.just(agent_meta.OMITTED),
    st.none(),
    st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]),
)
metas = st.one_of(
    st.just(agent_meta.OMITTED),
    st.none(),
    st.dictionaries(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 2)), max_size=2),
)
session = st.sampled_from(SESSIONS)
publication = st.tuples(st.just("publish"), session, titles, stamps, metas, st.booleans())
meta_publication = st.tuples(
    st.just("publish"),
    session,
    st.just(agent_meta.OMITTED),
    st.just(agent_meta.OMITTED),
    metas,
    st.booleans(),
)
# Publications are drawn most often. Domain edits use the key "d" and failure incidents their
# default place ("agent-meta"): keys no plain publication touches, so no edit is ever refused.
operation = st.one_of(
    publication,
    publication,
    meta_publication,
    meta_publication,
    st.tuples(
        st.just("domain"), session, st.lists(st.sampled_from(["p", "q"]), min_size=2, max_size=2)
    ),
    st.tuples(st.just("fail"), session, st.integers(0, 2)),
    st.tuples(st.just("resolve"), session, st.integers(0, 2)),
    st.tuples(st.just("resync"), session),
    st.tuples(st.just("raw"), session),
    st.tuples(st.just("release"), st.integers(1, 3)),
)


ISSUE_EXAMPLE: list[tuple[Any, ...]] = [
    ("publish", "s1", agent_meta.OMITTED, agent_meta.OMITTED, {"a": 0}, False),
    ("resync", "s1"),
    ("publish", "s1", agent_meta.OMITTED, agent_meta.OMITTED, {"a": 1}, True),
    ("publish", "s1", agent_meta.OMITTED, agent_meta.OMITTED, {"a": 2}, False),
]
"""The issue's program (the first frame keeps the writer busy), always run besides the random
ones: resync, then two patches of the same key, the first with notification ``_meta`` so that
coalescing cannot merge them."""


async def run_program(
    driver: drivers.Driver, version: Literal[1, 2], coalesce: bool, program: list[tuple[Any, ...]]
) -> None:
    """Run ``program`` against an owner whose writer is held at a gate until released.

    The gate starts closed, so the first frame keeps the writer busy; ``release`` lets that
    many frames through and waits until every task is blocked again. At the end the gate opens,
    everything is written, and the whole wire is checked prefix by prefix.
    """
    gate = GatedTransport()
    held: Held = {}
    async with driver.open_owner(
        gate, agent_meta.OwnerOptions(protocol_version=version, coalesce=coalesce)
    ) as owner:
        lifetimes = {}
        for session_id in SESSIONS:
            lifetimes[session_id] = owner.open_lifetime(session_id)
            held[session_id] = [lifetimes[session_id].snapshot()]
        for op in program:
            kind = op[0]
            if kind == "publish":
                _, session_id, title, stamp, meta, traced = op
                lifetime = lifetimes[session_id]
                trace = {"traceparent": "00-1"} if traced else None
                assert await lifetime.publish(
                    title=title, updated_at=stamp, meta=meta, notification_meta=trace
                )
                held[session_id].append(lifetime.snapshot())
            elif kind in ("domain", "fail", "resolve"):
                _, session_id, argument = op
                lifetime = lifetimes[session_id]
                if kind == "domain":
                    await lifetime.domain("d").set(argument, len(held[session_id]))
                elif kind == "fail":
                    await lifetime.report_failure("i1", argument, {"revision": argument})
                else:
                    await lifetime.resolve_failure("i1", argument)
                held[session_id].append(lifetime.snapshot())
            elif kind == "resync":
                assert lifetimes[op[1]].resync()
            elif kind == "raw":
                await owner.send_notification(
                    "session/update",
                    {
                        "sessionId": op[1],
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": "x"},
                        },
                    },
                )
            else:
                assert kind == "release"
                gate.release(op[1])
                await driver.wait_all_tasks_blocked()
        gate.open()
        await owner.wait_flushed()
        for session_id, lifetime in lifetimes.items():
            assert lifetime.snapshot() == held[session_id][-1]
    check_every_prefix(gate.frames, held, version)
    # And the end state is the agent's (R1/R3/R4), title and updatedAt included.
    mirror = ClientMirror(protocol_version=version)
    for frame in gate.frames:
        mirror.feed(frame)
    for session_id in SESSIONS:
        assert mirror.info(session_id) == held[session_id][-1], session_id


@pytest.mark.parametrize("coalesce", [False, True], ids=["no-coalesce", "coalesce"])
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("runtime", drivers.NAMES)
@given(program=st.lists(operation, max_size=40))
@example(program=ISSUE_EXAMPLE)
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_every_wire_prefix_folds_to_a_state_the_agent_held_in_order(
    runtime: str, version: Literal[1, 2], coalesce: bool, program: list[tuple[Any, ...]]
) -> None:
    """Random programs of publish (with and without notification ``_meta``), domain edits,
    failure reports and resolutions, resync, raw ``send_notification`` and gate releases, for
    each protocol version and coalescing mode; the property of the module docstring must hold
    for the whole wire."""
    driver = drivers.get(runtime)
    driver.run(run_program, driver, version, coalesce, program)
