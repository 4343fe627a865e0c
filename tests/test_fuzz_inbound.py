"""Fuzzing the inbound side: the NDJSON line reader, ``decode_message`` and a whole connection.

Each level gets arbitrary input and must answer only in documented ways: the reader yields lines,
:class:`LineTooLongError` or :class:`IncompleteLineError`; ``decode_message`` returns an envelope
or raises :class:`MessageParseError` / :class:`InvalidMessageError`; the connection answers every
bad line with the JSON-RPC error it deserves, never crashes or hangs, and a valid session that
shares the connection keeps its state (folded with :class:`ClientMirror`).

``AGENT_META_FUZZ_EXAMPLES=N`` runs N examples per property instead of the defaults; the number
of inputs tried is printed at the end of the module (``fuzz: ...: N inputs``).
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_meta import MetaValueError
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.testing import ClientMirror
from agent_meta.trio_connection._lines import (
    IncompleteLineError,
    LineTooLongError,
    NdjsonLineReader,
)
from agent_meta.trio_connection._serve import serve_agent
from agent_meta.wire import JsonRpcRequest, MessageDecodeError, encode_frame
from agent_meta.wire import decode as decode_line
from agent_meta.wire._decode import InvalidMessageError, MessageParseError, decode_message
from tests.reporting import show_lines

if TYPE_CHECKING:
    from collections.abc import Iterator

TRIED: Counter[str] = Counter()


def _examples(default: int) -> int:
    """Examples per property: ``AGENT_META_FUZZ_EXAMPLES`` when set, else ``default``."""
    return int(os.environ.get("AGENT_META_FUZZ_EXAMPLES") or default)


def _fuzz(default: int) -> settings:
    return settings(
        max_examples=_examples(default),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module", autouse=True)
def _report_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many inputs each fuzz target got, so the CI log shows the figures."""
    yield
    lines = [f"fuzz: {name}: {count:,} inputs" for name, count in sorted(TRIED.items())]
    show_lines(request.config, lines)


# --------------------------------------------------------------------------- line reader


class _ChunkStream(trio.abc.ReceiveStream):
    """Hands out exactly the given chunks (split further if ``max_bytes`` asks), then EOF."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = [c for c in chunks if c]

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if not self._chunks:
            return b""
        chunk = self._chunks.pop(0)
        if max_bytes is not None and len(chunk) > max_bytes:
            self._chunks.insert(0, chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        return chunk

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _expected_lines(data: bytes, limit: int) -> list[bytes | str]:
    """The reader's documented output, computed by a plain split (an independent model)."""
    *complete, tail = data.split(b"\n")
    out: list[bytes | str] = []
    for raw in complete:
        line = raw[:-1] if raw.endswith(b"\r") else raw  # the limit excludes CRLF's CR
        if len(line) > limit:
            out.append("too-long")
            continue
        if line.strip():
            out.append(line)
    if len(tail[:-1] if tail.endswith(b"\r") else tail) > limit:
        out.append("too-long")
    elif tail.strip():
        out.append("incomplete")
    return out


_line_bytes = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"", b" ", b"\r", b" \t\r", b"{}", b'{"a":1}\r', b"\x00", b"\xff\xfe"]),
    st.binary(min_size=60, max_size=300),
).map(lambda b: b.replace(b"\n", b""))


@st.composite
def _stream_input(draw: st.DrawFn) -> tuple[bytes, list[bytes], int]:
    lines = draw(st.lists(_line_bytes, max_size=12))
    data = b"\n".join(lines)
    if draw(st.booleans()):
        data += b"\n"
    cuts = sorted(draw(st.sets(st.integers(0, max(len(data), 1)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    limit = draw(st.one_of(st.integers(1, 64), st.just(1 << 16)))
    return data, chunks, limit


async def _read_all(reader: NdjsonLineReader) -> list[bytes | str]:
    out: list[bytes | str] = []
    while True:
        try:
            line = await reader.receive_line()
        except LineTooLongError:
            out.append("too-long")
            continue
        except IncompleteLineError:
            out.append("incomplete")
            continue
        finally:
            # Memory bound: the buffer holds at most one partial line (<= limit) and one chunk.
            assert reader.buffered_bytes <= reader.max_line_bytes + 65536
        if line is None:
            # A clean end stays clean: more calls return None, with no error repeated.
            assert await reader.receive_line() is None
            return out
        out.append(line)


@_fuzz(600)
@given(_stream_input())
def test_line_reader_matches_a_plain_split_however_the_bytes_are_chunked(
    case: tuple[bytes, list[bytes], int],
) -> None:
    TRIED["jsonrpc line reader"] += 1
    data, chunks, limit = case
    reader = NdjsonLineReader(_ChunkStream(chunks), max_line_bytes=limit)
    got = trio.run(_read_all, reader)
    assert got == _expected_lines(data, limit)


# --------------------------------------------------------------------------- decode_message

_KEYS = st.sampled_from(
    ["jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data", "_meta"]
)
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["2.0", "session/new", "initialize", "$/cancel_request", "_x", ""]),
)
_json_values: st.SearchStrategy[Any] = st.recursive(
    _json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(_KEYS, st.text(max_size=4)), children, max_size=5),
    ),
    max_leaves=16,
)


@st.composite
def _envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """Objects shaped like JSON-RPC messages, with each member present or not, typed at random."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = draw(st.one_of(st.just("2.0"), _json_scalars))
    for key in ("id", "method", "params", "result", "error"):
        if draw(st.booleans()):
            message[key] = draw(_json_values)
    if "error" in message and draw(st.booleans()):
        message["error"] = {
            "code": draw(st.one_of(st.integers(), _json_scalars)),
            "message": draw(st.one_of(st.text(max_size=5), _json_scalars)),
        }
    return message


def _check_decode(line: bytes | str) -> None:
    try:
        message = decode_message(line)
    except MessageDecodeError as exc:  # only the two documented kinds, with their codes
        kind, code = type(exc), exc.code
        request_id = getattr(exc, "request_id", None)
        assert (kind, code) in ((MessageParseError, -32700), (InvalidMessageError, -32600))
        assert request_id is None or type(request_id) in (int, str)
        return
    # A decoded message re-encodes to one NDJSON line that decodes to the same message.
    try:
        frame = encode_frame(message)
    except MetaValueError:
        return  # documented: a lone surrogate cannot be UTF-8 (the owner's encoder escapes it)
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    assert decode_message(frame) == message


@_fuzz(1000)
@given(st.binary(max_size=200))
def test_decode_arbitrary_bytes_raises_only_decode_errors(line: bytes) -> None:
    TRIED["decode_message: bytes"] += 1
    _check_decode(line)


@_fuzz(500)
@given(st.one_of(_json_values, _envelopes()), st.booleans())
def test_decode_arbitrary_json_raises_only_decode_errors(value: Any, as_text: bool) -> None:
    TRIED["decode_message: json values"] += 1
    text = json.dumps(value)
    _check_decode(text if as_text else text.encode())


@_fuzz(300)
@given(st.text(max_size=60))
def test_decode_arbitrary_text_with_surrogates_raises_only_decode_errors(text: str) -> None:
    TRIED["decode_message: text"] += 1
    _check_decode(text)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1' + b"9" * 5000 + b',"method":"x"}',  # int over the digit limit
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1e999]}',  # float overflow
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":[NaN]}',
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":"\\ud800"}',  # a lone surrogate escape
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}',  # duplicate keys
        b"[" * 500 + b"]" * 500,  # nested, but within the interpreter's recursion limit
    ],
    ids=["huge-int", "float-overflow", "nan", "surrogate", "duplicate-keys", "nested-500"],
)
def test_decode_edge_cases_raise_only_decode_errors(line: bytes) -> None:
    TRIED["decode_message: edge cases"] += 1
    _check_decode(line)


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"a":' * 100_000], ids=["array", "object"])
def test_decode_deeply_nested_input_is_a_parse_error(line: bytes) -> None:
    TRIED["decode_message: edge cases"] += 1
    with pytest.raises(MessageDecodeError):
        decode_message(line)


# --------------------------------------------------------------------------- the connection

_LIMIT = 4096
_SESSION_KEYS = st.sampled_from(["a", "b", "ext", "agent-meta"])
_SIMPLE_JSON = st.one_of(
    st.integers(-5, 5), st.text("xyz", max_size=3), st.lists(st.integers(0, 3), max_size=2)
)


@st.composite
def _session_commands(draw: st.DrawFn) -> str:
    """A prompt line for the reference agent whose effect a plain dict model can follow."""
    key = draw(_SESSION_KEYS)
    kind = draw(st.sampled_from(["set", "rm", "clear", "title", "domain"]))
    if kind == "set":
        return f"/meta set {key} {json.dumps(draw(_SIMPLE_JSON))}"
    if kind == "rm":
        return f"/meta rm {key}"
    if kind == "clear":
        return "/meta clear"
    if kind == "title":
        return "/title " + draw(st.sampled_from(["", "one", "two words"]))
    return f"/domain set d {draw(st.sampled_from(['x', 'y', 'x.z']))} {draw(st.integers(0, 9))}"


def _fold_model(model: dict[str, Any], line: str) -> None:
    """Apply one command to the model (``model["meta"]``: dict, ``model["title"]``)."""
    meta: dict[str, Any] = model["meta"]
    words = line.split(" ", 3)
    if line.startswith("/meta set"):
        value = json.loads(words[3])
        meta[words[2]] = value
    elif line.startswith("/meta rm"):
        meta.pop(words[2], None)
    elif line == "/meta clear":
        meta.clear()
    elif line.startswith("/title"):
        model["title"] = line[len("/title ") :] or None
    elif line.startswith("/domain set d"):
        # "d" is only ever written by these commands, so it is absent or an object.
        _, _, _, dotted, number = line.split(" ")
        path, value = dotted.split("."), int(number)
        root = dict(meta.get("d", {}))
        node = root
        for step in path[:-1]:
            child = node.get(step, {})
            if not isinstance(child, dict):
                return  # the agent refuses (a step holds a non-object): error reply, no frame
            node[step] = child = dict(child)
            node = child
        node[path[-1]] = value
        meta["d"] = root


@st.composite
def _garbage(draw: st.DrawFn) -> bytes:
    """One line that is not a valid request of our session (no newline inside)."""
    kind = draw(st.sampled_from(["bytes", "json", "envelope", "overlong", "blank"]))
    if kind == "bytes":
        line = draw(st.binary(max_size=80))
    elif kind == "json":
        line = json.dumps(draw(_json_values)).encode()
    elif kind == "envelope":
        envelope = draw(_envelopes())
        if "method" in envelope and draw(st.booleans()):
            envelope["method"] = draw(
                st.sampled_from(
                    ["session/new", "session/prompt", "session/resume", "session/close", "_ext"]
                )
            )
            envelope.setdefault("id", draw(st.integers(0, 3)))
        line = json.dumps(envelope).encode()
    elif kind == "overlong":
        line = b"x" * draw(st.integers(_LIMIT + 1, 3 * _LIMIT))
    else:
        line = draw(st.sampled_from([b"", b"  ", b"\t\r"]))
    return line.replace(b"\n", b"")


def _expected_reply(line: bytes) -> tuple[str, Any]:
    """What the agent must answer: ("none", _), ("error", (code, id)) or ("response", id)."""
    if len(line) > _LIMIT:
        return ("error", (-32700, None))
    text = line[:-1] if line.endswith(b"\r") else line
    if not text.strip():
        return ("none", None)
    try:
        decoded = decode_line(text)
    except MessageDecodeError as exc:
        if isinstance(exc, InvalidMessageError) and exc.is_response:
            return ("none", None)  # a response is never answered, a malformed one neither
        return ("error", (exc.code, exc.request_id))
    if isinstance(decoded, list):  # a batch: one answer per request or invalid entry
        ids = [e.id for e in decoded if isinstance(e, JsonRpcRequest)]
        ids += [None for e in decoded if isinstance(e, InvalidMessageError) and not e.is_response]
        return ("batch", ids) if ids else ("none", None)
    if isinstance(decoded, JsonRpcRequest):
        return ("response", decoded.id)
    return ("none", None)  # notifications and stray responses get no answer


class _Client:
    """A raw NDJSON client over memory streams that folds every frame with a ClientMirror."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send = send
        self.receive = receive
        self.mirror = ClientMirror(protocol_version=2)
        self.buffer = b""
        self.ids = 0
        self.pending: list[dict[str, Any]] = []

    async def frame(self) -> dict[str, Any] | None:
        if self.pending:
            return self.pending.pop(0)
        while b"\n" not in self.buffer:
            chunk = await self.receive.receive_some()
            if not chunk:
                assert not self.buffer, f"a partial frame at the end: {self.buffer!r}"
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        first, *self.pending = self.mirror.feed_line(line)  # a batch answer: one by one
        return first

    async def request(self, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a request with a fresh id; return the frames up to and including its response."""
        self.ids += 1
        request_id = f"client-{self.ids}"
        line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send.send_all(json.dumps(line).encode() + b"\n")
        return await self.until(lambda m: "method" not in m and m.get("id") == request_id)

    async def until(self, done: Any) -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = []
        while True:
            frame = await self.frame()
            assert frame is not None, "the agent's output ended early"
            frames.append(frame)
            if done(frame):
                return frames


def _responses(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if "method" not in f]


def _check_error(frame: dict[str, Any]) -> None:
    error = frame["error"]
    assert type(error["code"]) is int
    assert isinstance(error["message"], str)


async def _run_connection(program: list[tuple[str, Any]], tail: bytes) -> None:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    client = _Client(to_agent, from_agent)
    model: dict[str, Any] = {"meta": {}, "title": None}

    async def agent() -> None:
        async with agent_out:
            await serve_agent(ReferenceAgent(), agent_in, agent_out, max_line_bytes=_LIMIT)

    with trio.fail_after(600):  # virtual time (MockClock autojump): a hang fails at once
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent)
            init = await client.request("initialize", {"protocolVersion": 2})
            assert init[-1]["result"]["protocolVersion"] == 2
            new = await client.request("session/new", {"cwd": "/fuzz"})
            sid = new[-1]["result"]["sessionId"]
            for kind, item in program:
                if kind == "command":
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": item}]}
                    frames = await client.request("session/prompt", prompt)
                    assert "result" in frames[-1], frames[-1]
                    await client.until(  # v2 answers at once; the turn ends with idle
                        lambda m: (
                            m.get("params", {}).get("update", {}).get("stopReason") is not None
                        )
                    )
                    _fold_model(model, item)
                    assert (client.mirror.meta(sid) or {}) == model["meta"], item
                    continue
                line: bytes = item
                await to_agent.send_all(line + b"\n")
                expected, detail = _expected_reply(line)
                # A ping behind the garbage proves the connection lives and shows the state.
                frames = await client.request("session/list", {})
                *others, ping = _responses(frames)
                if expected == "batch" and len(others) < len(detail):
                    later = await client.until(lambda m: "method" not in m)
                    others += _responses(later)
                if expected == "response" and not any(f["id"] == detail for f in others):
                    later = await client.until(lambda m, d=detail: m.get("id") == d)
                    others += _responses(later)
                garbage_replies = others
                if expected == "none":
                    assert garbage_replies == [], (line, garbage_replies)
                elif expected == "error":
                    code, request_id = detail
                    assert len(garbage_replies) == 1, (line, garbage_replies)
                    _check_error(garbage_replies[0])
                    assert garbage_replies[0]["error"]["code"] == code
                    assert garbage_replies[0]["id"] == request_id
                elif expected == "batch":
                    got = sorted(repr(f["id"]) for f in garbage_replies)
                    assert got == sorted(repr(i) for i in detail), (line, garbage_replies)
                else:
                    assert [f["id"] for f in garbage_replies] == [detail], (line, garbage_replies)
                    if "error" in garbage_replies[0]:
                        _check_error(garbage_replies[0])
                entry = next(s for s in ping["result"]["sessions"] if s["sessionId"] == sid)
                assert entry.get("_meta", {}) == model["meta"] == (client.mirror.meta(sid) or {})
            # A resume resyncs: the client's fold equals the known state afterwards.
            before = client.mirror.meta(sid)
            await client.request("session/resume", {"sessionId": sid, "cwd": "/fuzz"})
            assert client.mirror.meta(sid) == before
            assert (before or {}) == model["meta"]
            assert client.mirror.info(sid).title == model["title"] or model["title"] is None
            # The input ends (maybe inside a line): the agent answers and stops cleanly.
            if tail:
                await to_agent.send_all(tail)
            await to_agent.aclose()
            rest: list[dict[str, Any]] = []
            while (frame := await client.frame()) is not None:
                rest.append(frame)
            if tail.strip() and len(tail) <= _LIMIT:
                assert [f["error"]["code"] for f in _responses(rest)] == [-32700]
                assert "ended inside" in rest[-1]["error"]["message"]


_programs = st.lists(
    st.one_of(
        st.tuples(st.just("command"), _session_commands()),
        st.tuples(st.just("garbage"), _garbage()),
    ),
    max_size=8,
)


@_fuzz(120)
@given(_programs, st.sampled_from([b"", b'{"jsonrpc":"2.0","id":9,', b"  ", b"x" * 10]))
def test_connection_answers_garbage_and_keeps_the_session_state(
    program: list[tuple[str, Any]], tail: bytes
) -> None:
    TRIED["connection (serve_agent + reference agent): programs"] += 1
    TRIED["connection (serve_agent + reference agent): lines"] += len(program)
    trio.run(_run_connection, program, tail, clock=trio.testing.MockClock(autojump_threshold=0))


def test_connection_survives_a_deeply_nested_line() -> None:
    trio.run(_nested_line_scenario)


async def _nested_line_scenario() -> None:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    client = _Client(to_agent, from_agent)
    crashed: list[BaseException] = []

    async def agent() -> None:
        async with agent_out:
            try:
                await serve_agent(ReferenceAgent(), agent_in, agent_out)
            except* RecursionError as group:  # re-raised below, bare, so a crash fails the test
                leaves: list[BaseException] = [group]
                while isinstance(leaves[-1], BaseExceptionGroup):
                    leaves.append(leaves[-1].exceptions[0])
                crashed.append(leaves[-1])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent)
            await to_agent.send_all(b"[" * 100_000 + b"\n")
            await to_agent.aclose()
            frames: list[dict[str, Any]] = []
            while (frame := await client.frame()) is not None:
                frames.append(frame)
    if crashed:
        raise crashed[0]
    assert [f["error"]["code"] for f in frames] == [-32700]
