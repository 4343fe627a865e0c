"""Fuzzing the public owner API with arbitrary Python values.

Programs of publish / publish_nowait / domain set+remove / report_failure / resolve_failure /
resync / close / send_response calls get valid and invalid arguments alike: NaN, infinities,
bytes, sets, non-string keys, cycles, deep nesting, values over ``max_frame_bytes``, bad paths,
bad ids and revisions. Each call must either succeed or raise one of the documented exceptions,
and a call that raises must leave the lifetime's ``snapshot()``, its failure incident, the
frames written and the publication count unchanged. After every call the client view (a
:class:`ClientMirror` fed with the frames written) equals the known state.

Exceptions observed (and allowed): :class:`MetaValueError` (bad values, keys, ids, revisions),
its subclass :class:`MetaPathError` (bad domain paths), :class:`FrameTooLargeError`,
:class:`UnknownSessionError` (``owner.lifetime`` of an unknown or closed id) and the driver's
"would block" exception, :class:`trio.WouldBlock` or :class:`asyncio.QueueFull`
(``publish_nowait`` without queue room). The tally is printed at the end of the module. Every
program runs on both drivers (trio and asyncio, ``tests/drivers.py``).

An ``int`` with more digits than Python's int-to-str limit (4300) is a :class:`MetaValueError`
too (it once escaped as a plain ``ValueError``; pinned below).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agent_meta
from agent_meta import (
    OMITTED,
    FrameTooLargeError,
    MetaPathError,
    MetaValueError,
    OwnerOptions,
    UnknownSessionError,
)
from agent_meta.testing import ClientMirror, RecordingTransport
from tests import drivers
from tests.reporting import show_lines

if TYPE_CHECKING:
    from collections.abc import Iterator

TRIED: Counter[str] = Counter()
RAISED: Counter[str] = Counter()
MAX_FRAME = 2048
ALLOWED: tuple[type[BaseException], ...] = (
    MetaValueError,  # includes MetaPathError
    FrameTooLargeError,
    UnknownSessionError,
)
"""Besides the driver's "would block" exception (``Driver.would_block``)."""


def _examples(default: int) -> int:
    """Examples per property: ``AGENT_META_FUZZ_EXAMPLES`` when set, else ``default``."""
    return int(os.environ.get("AGENT_META_FUZZ_EXAMPLES") or default)


@pytest.fixture(scope="module", autouse=True)
def _report_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many inputs were tried and which exceptions they raised."""
    yield
    lines = [f"fuzz: {name}: {count:,} inputs" for name, count in sorted(TRIED.items())]
    seen = ", ".join(f"{name} x{count:,}" for name, count in RAISED.most_common())
    lines.append(f"fuzz: owner api: exceptions seen: {seen or 'none'}")
    show_lines(request.config, lines)


# --------------------------------------------------------------------------- values


def _cycle(kind: str) -> Any:
    if kind == "list":
        loop: list[Any] = [1]
        loop.append(loop)
        return loop
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = {"inner": cyclic}
    return cyclic


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_bad_scalars = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, b"bytes", bytearray(b"x"), {1, 2}]),
    st.sampled_from([frozenset(), object(), 1j, Ellipsis, range(2)]),
    st.builds(_cycle, st.sampled_from(["list", "dict"])),
    st.builds(_deep, st.sampled_from([200, 300, 2000])),
    st.builds(lambda n: "x" * n, st.integers(MAX_FRAME - 100, 3 * MAX_FRAME)),
)
_keys = st.one_of(st.sampled_from(["a", "b", "agent-meta", "failure", ""]), st.text(max_size=3))
_bad_keys = st.sampled_from([1, None, ("t",), b"k", 2.5, True])


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(_keys, _bad_keys), children, max_size=3),
    )


_any_values = st.recursive(
    st.one_of(_json_scalars, _json_scalars, _bad_scalars), _containers, max_leaves=8
)
_three_state_text = st.one_of(
    st.just(OMITTED),
    st.none(),
    st.text(max_size=6),
    st.sampled_from(["2026-01-02T03:04:05Z", "2026-01-02T03:04:05+01:00", "yesterday"]),
    st.sampled_from([3, b"t", ["t"]]),
)
_metas = st.one_of(
    st.just(OMITTED),
    st.none(),
    st.dictionaries(_keys, st.one_of(st.none(), _any_values), max_size=4),
    st.dictionaries(st.one_of(_keys, _bad_keys), _any_values, max_size=3),
    _any_values,
)
_notification_metas = st.one_of(st.none(), st.none(), _any_values)
_paths = st.one_of(
    st.lists(st.sampled_from(["x", "y", "failure", ""]), max_size=3),
    st.lists(st.sampled_from(["x", "y"]), max_size=3).map(tuple),
    st.sampled_from(["x", "x.y", None, [1], ["x", None], [b"x"], 5]),
    st.just(["a"] * 300),
)
_incident_ids = st.one_of(st.sampled_from(["inc-1", "inc-2"]), st.sampled_from([1, None, b"i"]))
_revisions = st.one_of(st.integers(0, 3), st.sampled_from([True, 1.0, "1", None, -1, 10**40]))
_request_ids = st.one_of(st.integers(), st.text(max_size=3), st.sampled_from([None, True, 1.5]))

_op = st.one_of(
    st.tuples(
        st.sampled_from(["publish", "publish_nowait"]),
        st.fixed_dictionaries(
            {
                "title": _three_state_text,
                "updated_at": _three_state_text,
                "meta": _metas,
                "notification_meta": _notification_metas,
            }
        ),
    ),
    st.tuples(
        st.just("domain_set"),
        st.tuples(st.one_of(_keys, _bad_keys), _paths, _any_values),
    ),
    st.tuples(st.just("domain_remove"), st.tuples(st.one_of(_keys, _bad_keys), _paths)),
    st.tuples(st.just("report"), st.tuples(_incident_ids, _revisions, _any_values)),
    st.tuples(st.just("resolve"), st.tuples(_incident_ids, _revisions)),
    st.tuples(st.sampled_from(["resync", "close", "reopen", "lookup"]), st.none()),
    st.tuples(st.just("respond"), st.tuples(_request_ids, _any_values, st.booleans())),
)


# --------------------------------------------------------------------------- the program


async def _call(owner: drivers.Owner, lt: agent_meta.SessionLifetime, op: Any) -> Any:
    name, args = op
    if name == "publish":
        return await lt.publish(**args)
    if name == "publish_nowait":
        return lt.publish_nowait(**args)
    if name == "domain_set":
        key, path, value = args
        return await lt.domain(key).set(path, value)
    if name == "domain_remove":
        key, path = args
        return await lt.domain(key).remove(path)
    if name == "report":
        return await lt.report_failure(*args)
    if name == "resolve":
        return await lt.resolve_failure(*args)
    if name == "resync":
        return lt.resync()
    if name == "lookup":
        return owner.lifetime("never-opened")
    if name == "respond":
        request_id, value, as_error = args
        if as_error:
            return await owner.send_response(request_id, error=value)
        return await owner.send_response(request_id, result=value)
    raise AssertionError(name)


def _assert_in_sync(lt: agent_meta.SessionLifetime, mirror: ClientMirror) -> None:
    snapshot = lt.snapshot()
    seen = mirror.info(lt.session_id)
    assert seen.meta == snapshot.meta
    if snapshot.title is not OMITTED:
        assert seen.title == snapshot.title
    if snapshot.updated_at is not OMITTED:
        assert seen.updated_at == snapshot.updated_at


async def _run(
    driver: drivers.Driver, program: list[Any], version: Literal[1, 2], coalesce: bool
) -> None:
    mirror = ClientMirror(protocol_version=version)
    transport = RecordingTransport(mirror=mirror)
    async with driver.open_owner(
        transport,
        OwnerOptions(protocol_version=version, max_frame_bytes=MAX_FRAME, coalesce=coalesce),
    ) as owner:
        lt = owner.open_lifetime("s")
        for op in program:
            name = op[0]
            if name in ("close", "reopen"):
                if name == "close" and owner.has_lifetime("s"):
                    owner.close_lifetime("s")
                    with pytest.raises(UnknownSessionError):
                        owner.lifetime("s")
                elif name == "reopen" and not owner.has_lifetime("s"):
                    lt = owner.open_lifetime("s")
                    mirror.reset("s")
                continue
            await owner.wait_flushed()
            before = (lt.snapshot(), lt.current_failure, len(transport.frames))
            published = owner.statistics().publications
            try:
                result = await _call(owner, lt, op)
            except (*ALLOWED, driver.would_block) as exc:
                RAISED[type(exc).__name__] += 1
                failed = op
            else:
                failed = None
            if failed is not None:
                await owner.wait_flushed()
                after = (lt.snapshot(), lt.current_failure, len(transport.frames))
                assert after == before, failed
                assert owner.statistics().publications == published
                continue
            await owner.wait_flushed()
            if lt.closed:
                # A fenced handle: refused quietly, nothing written (R6).
                assert result in (False, None)
                assert len(transport.frames) == before[2] or name == "respond"
            elif result is not False:
                _assert_in_sync(lt, mirror)
            else:
                assert (lt.snapshot(), lt.current_failure) == before[:2]
    assert all(m.get("jsonrpc") == "2.0" for m in transport.messages)
    assert all(len(frame) <= MAX_FRAME for frame in transport.frames)


@pytest.mark.parametrize("runtime", drivers.NAMES)
@settings(
    max_examples=_examples(600),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    program=st.lists(_op, min_size=1, max_size=12),
    version=st.sampled_from([1, 2]),
    coalesce=st.booleans(),
)
def test_owner_api_raises_only_documented_errors_and_changes_nothing_on_error(
    runtime: str, program: list[Any], version: Literal[1, 2], coalesce: bool
) -> None:
    TRIED[f"owner api ({runtime}): programs"] += 1
    TRIED[f"owner api ({runtime}): calls"] += len(program)
    driver = drivers.get(runtime)
    driver.run(_run, driver, program, version, coalesce, autojump=True)


@pytest.mark.parametrize("runtime", drivers.NAMES)
def test_a_bad_domain_path_is_a_meta_path_error(runtime: str) -> None:
    """The path errors the fuzz run counts as MetaValueError are the MetaPathError subclass."""
    driver = drivers.get(runtime)

    async def main() -> None:
        async with driver.open_owner(RecordingTransport()) as owner:
            lt = owner.open_lifetime("s")
            for path in ("x", [1], ["x", None]):
                with pytest.raises(MetaPathError):
                    await lt.domain("d").set(path, 1)  # type: ignore[arg-type]
            with pytest.raises(MetaPathError):
                await lt.domain("d").set(None, 1)  # type: ignore[arg-type]
            assert lt.snapshot().meta is None

    TRIED["owner api: edge cases"] += 1
    driver.run(main)


@pytest.mark.parametrize("runtime", drivers.NAMES)
@pytest.mark.parametrize(
    "call",
    ["publish", "nested", "domain", "failure-record"],
)
def test_a_huge_int_is_a_meta_value_error(runtime: str, call: str) -> None:
    huge = 10**5000
    driver = drivers.get(runtime)

    async def main() -> None:
        raised: ValueError | None = None
        transport = RecordingTransport()
        async with driver.open_owner(transport) as owner:
            lt = owner.open_lifetime("s")
            try:
                if call == "publish":
                    await lt.publish(meta={"a": huge})
                elif call == "nested":
                    await lt.publish(meta={"a": {"b": [huge]}})
                elif call == "domain":
                    await lt.domain("d").set(["x"], huge)
                else:
                    await lt.report_failure("inc", 1, {"n": huge})
            except ValueError as exc:
                raised = exc
            await owner.wait_flushed()
            assert lt.snapshot().meta is None
            assert lt.current_failure is None
            assert transport.frames == []
        assert raised is not None, "a huge int was accepted"
        if not isinstance(raised, MetaValueError):
            raise raised  # bare, outside the owner's nursery

    TRIED["owner api: edge cases"] += 1
    driver.run(main)
