"""Random programs against one owner: the client's view must always catch up with the agent's.

Every program runs on both drivers (trio and asyncio, ``tests/drivers.py``), in virtual time.

Each example draws a protocol version, coalescing on or off, and a program of operations on
three session ids: publications, domain edits, failure reports and resolutions, resyncs,
close and reopen (a reopen is followed by a resync, as a resume handler does), slow writes,
injected write failures, and drains. The transport feeds only the frames it actually delivered
to an independent :class:`~agent_meta.testing.ClientMirror`.

Invariants:

- after every drain, for every open lifetime, the mirror's metadata equals the owner's known
  metadata, and so do ``title`` / ``updatedAt`` wherever the owner knows them (R1, R3, R4, R11);
- fencing begins at the close (R6): each close is followed by a response, as a connection
  answers ``session/close``, and each reopen is preceded by one. No frame of a session is
  *started* after its close response and before its reopen's: nothing queued after the close
  is written. What was queued before the close is: when the close response is written, the
  client holds the lifetime's state at the close, unless a frame of it was lost after the
  close (a loss after the close is not repaired);
- fenced handles of ended lifetimes write nothing and return ``False``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agent_meta
from agent_meta import FrameLostError, FrameNotSentError, OwnerOptions
from agent_meta.testing import ClientMirror
from tests import drivers

SESSIONS = ("s0", "s1", "s2")
KEYS = ("a", "b", "c", "agent-meta", "zed.dev/x")

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["", "x", "é"]))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from("xyz"), inner, max_size=2)
    ),
    max_leaves=4,
)
meta_update = st.one_of(
    st.just(agent_meta.OMITTED),
    st.none(),
    st.dictionaries(st.sampled_from(KEYS), st.one_of(st.none(), json_value), max_size=3),
)
text_update = st.one_of(st.just(agent_meta.OMITTED), st.none(), st.sampled_from(["T1", "T2"]))
stamp_update = st.one_of(
    st.just(agent_meta.OMITTED), st.none(), st.sampled_from(["2026-11-30T12:00:00Z"])
)
session = st.sampled_from(SESSIONS)
path = st.lists(st.sampled_from(["p", "q"]), max_size=2)

operation = st.one_of(
    st.tuples(st.just("publish"), session, text_update, stamp_update, meta_update, st.booleans()),
    st.tuples(st.just("domain_set"), session, st.sampled_from(KEYS), path, json_value),
    st.tuples(st.just("domain_rm"), session, st.sampled_from(KEYS), path),
    st.tuples(st.just("fail"), session, st.sampled_from(["i1", "i2"]), st.integers(0, 3)),
    st.tuples(st.just("resolve"), session, st.sampled_from(["i1", "i2"]), st.integers(0, 3)),
    st.tuples(st.just("resync"), session),
    st.tuples(st.just("close"), session),
    st.tuples(st.just("reopen"), session),
    st.tuples(st.just("fenced_publish"), session),
    st.tuples(st.just("yield"), st.integers(0, 3)),
    st.tuples(st.just("inject"), st.sampled_from(["not_sent", "lost"]), st.integers(1, 3)),
    st.tuples(
        st.just("drain"),
    ),
)


@dataclass
class Marker:
    """A response queued right after a close (the ``session/close`` response) or right before
    a reopen: it tells the transport, in wire order, where a lifetime of ``session_id`` ends
    or begins."""

    kind: Literal["close", "open"]
    session_id: str
    generation: int
    known: agent_meta.SessionInfo | None = None
    """For a close: the lifetime's state at the close."""


@dataclass
class ScriptedTransport:
    """Delivers frames to a mirror after a short (virtual) delay; fails on request."""

    mirror: ClientMirror
    driver: drivers.Driver
    delay: float = 0.001
    failures: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    delivered: int = 0
    markers: dict[str, Marker] = field(default_factory=dict)
    """The marker responses queued, by request id."""
    closed: set[str] = field(default_factory=lambda: set(SESSIONS))
    """Sessions whose close response (in wire order) came after their last open marker."""
    generation: dict[str, int] = field(default_factory=dict)
    """The lifetime of each session the frames being written belong to (in wire order)."""
    close_called: set[tuple[str, int]] = field(default_factory=set)
    """Lifetimes ``close_lifetime`` was called for (in program order)."""
    lost_after_close: set[tuple[str, int]] = field(default_factory=set)

    async def send_frame(self, frame: bytes) -> None:
        message = json.loads(frame)
        session_id = message.get("params", {}).get("sessionId")
        if session_id in self.closed:
            self.violations.append(f"frame for closed session {session_id}: {frame!r}")
        marker = self.markers.get(str(message.get("id")))
        if marker is not None:
            self._passed(marker)
        await self.driver.sleep(self.delay)
        if self.failures:
            mode = self.failures.pop(0)
            if mode == "not_sent":
                raise FrameNotSentError("scripted: nothing written")
            lifetime = (session_id, self.generation.get(session_id, 0))
            if session_id is not None and lifetime in self.close_called:
                self.lost_after_close.add(lifetime)  # not repaired: the lifetime is closed
            raise FrameLostError("scripted: frame lost")
        self.mirror.feed(frame)
        self.delivered += 1

    def _passed(self, marker: Marker) -> None:
        """The writer reached ``marker``: every frame queued before it has been attempted."""
        sid = marker.session_id
        if marker.kind == "open":
            self.closed.discard(sid)
            self.generation[sid] = marker.generation
            return
        self.closed.add(sid)
        known = marker.known
        assert known is not None
        if (sid, marker.generation) in self.lost_after_close:
            return
        seen = self.mirror.info(sid)
        if seen.meta != known.meta:
            self.violations.append(f"{sid} closed at {known.meta!r}, the client has {seen!r}")
        for name in ("title", "updated_at"):
            value = getattr(known, name)
            if value is not agent_meta.OMITTED and getattr(seen, name) != value:
                self.violations.append(f"{sid} closed with {name} {value!r}, client: {seen!r}")


def assert_in_sync(owner: drivers.Owner, mirror: ClientMirror) -> None:
    for session_id in owner.lifetime_ids():
        known = owner.lifetime(session_id).snapshot()
        seen = mirror.info(session_id)
        assert seen.meta == known.meta, session_id
        if known.title is not agent_meta.OMITTED:
            assert seen.title == known.title, session_id
        if known.updated_at is not agent_meta.OMITTED:
            assert seen.updated_at == known.updated_at, session_id


async def run_program(
    driver: drivers.Driver, version: Literal[1, 2], coalesce: bool, program: list[tuple[Any, ...]]
) -> None:
    mirror = ClientMirror(protocol_version=version)
    transport = ScriptedTransport(mirror, driver)
    fenced_handles: list[agent_meta.SessionLifetime] = []
    generations = dict.fromkeys(SESSIONS, 0)
    async with driver.open_owner(
        transport, OwnerOptions(protocol_version=version, coalesce=coalesce, capacity=4)
    ) as owner:

        def handle(session_id: str) -> agent_meta.SessionLifetime | None:
            return owner.lifetime(session_id) if owner.has_lifetime(session_id) else None

        async def marker(kind: Literal["close", "open"], sid: str, **known: Any) -> None:
            request_id = f"{kind}-{sid}-{generations[sid]}"
            transport.markers[request_id] = Marker(kind, sid, generations[sid], **known)
            await owner.send_response(request_id, result={})

        async def reopen(session_id: str) -> None:
            # What a resume handler does for a session with no open lifetime.
            if not owner.has_lifetime(session_id):
                generations[session_id] += 1
                await marker("open", session_id)
                lifetime = owner.open_lifetime(session_id)
                lifetime.resync()

        for op in program:
            kind = op[0]
            if kind == "publish":
                _, sid, title, stamp, meta, with_trace = op
                lifetime = handle(sid)
                if lifetime is not None:
                    trace = {"traceparent": "00-1"} if with_trace else None
                    accepted = await lifetime.publish(
                        title=title, updated_at=stamp, meta=meta, notification_meta=trace
                    )
                    assert accepted
            elif kind == "domain_set":
                _, sid, key, steps, value = op
                lifetime = handle(sid)
                if lifetime is not None:
                    # A step holding a non-object is refused, and nothing changes.
                    with contextlib.suppress(agent_meta.MetaPathError):
                        await lifetime.domain(key).set(steps, value)
            elif kind == "domain_rm":
                _, sid, key, steps = op
                lifetime = handle(sid)
                if lifetime is not None:
                    await lifetime.domain(key).remove(steps)
            elif kind == "fail":
                _, sid, incident, revision = op
                lifetime = handle(sid)
                if lifetime is not None:
                    with contextlib.suppress(agent_meta.MetaPathError):
                        await lifetime.report_failure(incident, revision, {"id": incident})
            elif kind == "resolve":
                _, sid, incident, revision = op
                lifetime = handle(sid)
                if lifetime is not None:
                    before = lifetime.current_failure
                    resolved = await lifetime.resolve_failure(incident, revision)
                    matches = before == agent_meta.FailureIncident(incident, revision)
                    assert resolved == matches
            elif kind == "resync":
                lifetime = handle(op[1])
                if lifetime is not None:
                    assert lifetime.resync()
            elif kind == "close":
                lifetime = handle(op[1])
                if lifetime is not None:
                    known = lifetime.snapshot()
                    transport.close_called.add((op[1], generations[op[1]]))
                    owner.close_lifetime(op[1])
                    await marker("close", op[1], known=known)  # the session/close response
                    assert lifetime.snapshot() == known  # nothing changes it after the close
                    fenced_handles.append(lifetime)
            elif kind == "reopen":
                await reopen(op[1])
            elif kind == "fenced_publish":
                for old in fenced_handles:
                    if old.session_id == op[1]:
                        assert not await old.publish(meta={"late": 1})
                        assert not await old.domain("late").set([], 1)
                        assert not old.resync()
            elif kind == "yield":
                await driver.sleep(op[1] * 0.001)
            elif kind == "inject":
                transport.failures.extend([op[1]] * op[2])
            else:
                assert kind == "drain"
                await owner.wait_flushed()
                assert_in_sync(owner, mirror)
            if not owner.lifetime_ids():
                await reopen("s0")
        transport.failures.clear()
        await owner.wait_flushed()
        assert_in_sync(owner, mirror)
        stats = owner.statistics()
        assert stats.queued == 0
    assert transport.violations == []


@pytest.mark.parametrize("runtime", drivers.NAMES)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    version=st.sampled_from([1, 2]),
    coalesce=st.booleans(),
    program=st.lists(operation, max_size=40).map(lambda ops: [("reopen", "s0"), *ops]),
)
def test_client_view_converges_and_fenced_lifetimes_stay_silent(
    runtime: str, version: Literal[1, 2], coalesce: bool, program: list[tuple[Any, ...]]
) -> None:
    driver = drivers.get(runtime)
    driver.run(run_program, driver, version, coalesce, program, autojump=True)
