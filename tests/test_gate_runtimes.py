"""The inbound gate's decisions, played through both connections: agent_meta's trio connection
(the trio reference agent under :func:`~agent_meta.serve_agent`) and the official-SDK adapter
(the SDK reference agent under ``acp.run_agent``, over OS pipes).

Each case sends a few lines after ``initialize`` and closes the input; both runtimes must
answer them alike, to the error message. The decisions themselves are tested one by one in
``tests/test_inbound_gate.py``; where the runtimes still differ on purpose, docs/agent.md says
so, and why (the table in "The same agent on the official SDK").
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from agent_meta import BaseAgent, OwnerOptions, RequestContext, serve_agent
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.testing import RecordingTransport

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_meta import JsonObject
    from agent_meta.sdk import SdkAdapter

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes

acp = pytest.importorskip("acp", reason="the official SDK is not installed")

from tests.sdk_pair import RawClient, run  # noqa: E402 (needs the SDK)
from tests.support.sdk_mini_agent import MiniAgent  # noqa: E402 (needs the SDK)

RUNTIMES = ("trio", "sdk")
LIMIT = 1 << 16
"""The line limit both runtimes read with here (64 KiB)."""
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def line(message: object) -> bytes:
    return json.dumps(message).encode()


def request(request_id: object, method: str, params: object) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def exchange(
    runtime: str,
    lines: list[bytes],
    *,
    initialize: bool = True,
    bad_results: bool = False,
    options: OwnerOptions | None = None,
) -> list[Any]:
    """Serve the reference agent of ``runtime`` (or, with ``bad_results``, an agent whose
    extension methods answer results that cannot be sent), send ``lines`` (once
    ``initialize`` is answered), close the input, and return every answer written (responses
    and batch arrays) but ``initialize``'s."""
    if runtime == "trio":
        agent = BadResults() if bad_results else ReferenceAgent()
        frames = trio.run(_trio, agent, lines, initialize, options)
    else:
        from agent_meta.agents.sdk_agent._agent import SdkReferenceAgent

        make = SdkBadResults if bad_results else SdkReferenceAgent
        frames = _sdk(make, lines, initialize, options)
    return [f for f in frames if isinstance(f, list) or ("method" not in f and f.get("id") != 0)]


async def _trio(
    agent: BaseAgent, lines: list[bytes], initialize: bool, options: OwnerOptions | None
) -> list[Any]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    transport = RecordingTransport()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_agent(agent, receive, transport, max_line_bytes=LIMIT, options=options)
        )
        if initialize:
            await send.send_all(line(INITIALIZE) + b"\n")
            await transport.wait_for_frames(1)
        await send.send_all(b"".join(item + b"\n" for item in lines))
        await send.aclose()
    return [json.loads(frame) for frame in transport.frames]


def _sdk(
    make_agent: Callable[[SdkAdapter], Any],
    lines: list[bytes],
    initialize: bool,
    options: OwnerOptions | None,
) -> list[Any]:
    async def scenario(client: RawClient, _adapter: SdkAdapter) -> None:
        if initialize:
            await client.send_line(line(INITIALIZE))
            await client.read_until(lambda m: m.get("id") == 0)
        for item in lines:
            await client.send_line(item)

    client, _ = asyncio.run(run(make_agent, scenario, options, max_line_bytes=LIMIT))
    return list(client.messages)


def error(request_id: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


CASES: dict[str, tuple[list[bytes], list[dict[str, Any]]]] = {
    "not-json": (
        [b"not json"],
        [error(None, -32700, "Parse error: not a JSON message: Expecting value: line 1 column 1")],
    ),
    "over-the-line-limit": (
        [b'{"x": "' + b"y" * LIMIT + b'"}'],
        [error(None, -32700, f"Parse error: message longer than the {LIMIT}-byte line limit")],
    ),
    "no-message": (
        [b'"a string"'],
        [error(None, -32600, "Invalid Request: a JSON-RPC message is an object, not str")],
    ),
    "an-empty-batch": ([b"[]"], [error(None, -32600, "Invalid Request: an empty batch ...")]),
    "a-notification-without-a-valid-method": (
        [b'{"jsonrpc": "2.0", "method": 3}'],
        [error(None, -32600, "Invalid Request: invalid notification: the method must be a string")],
    ),
    "a-malformed-response": ([b'{"jsonrpc": "2.0", "id": 77, "result": {}, "extra": 1}'], []),
    "array-params": (
        [request(5, "session/list", [1])],
        [error(5, -32602, "invalid params: ACP params are an object")],
    ),
    "a-session-id-no-store-can-hold": (
        [request(6, "session/load", {"sessionId": "a\u0000b", "cwd": "/", "mcpServers": []})],
        [error(6, -32602, "invalid params: 'sessionId' 'a\\x00b' holds a NUL character (U+0000)")],
    ),
    "notifications-the-gate-drops": (
        [
            line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}}),
            line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 7}}),
            line({"jsonrpc": "2.0", "method": "_vendor/ping", "params": [1]}),
        ],
        [],
    ),
}


def same(answers: list[Any], expected: list[dict[str, Any]]) -> bool:
    """Whether ``answers`` are ``expected``; a message ending in ``...`` is a prefix (the rest
    is the decoder's or pydantic's detail)."""
    if len(answers) != len(expected):
        return False
    for got, want in zip(answers, expected, strict=True):
        message = want.get("error", {}).get("message", "")
        if message.endswith("..."):
            if not got.get("error", {}).get("message", "").startswith(message[:-3]):
                return False
            got = {**got, "error": {**got["error"], "message": message}}
        if got != want:
            return False
    return True


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", list(CASES))
def test_both_runtimes_answer_what_the_gate_decides_alike(runtime: str, case: str) -> None:
    lines, expected = CASES[case]
    answers = exchange(runtime, lines)
    if case == "not-json":  # the JSON decoder's message goes on with the position
        expected = [error(None, -32700, expected[0]["error"]["message"] + " (char 0)")]
    assert same(answers, expected), answers


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_both_runtimes_refuse_a_request_before_initialize(runtime: str) -> None:
    answers = exchange(
        runtime, [request(1, "session/new", {"cwd": "/", "mcpServers": []})], initialize=False
    )
    assert answers == [error(1, -32600, "'session/new' before 'initialize'")]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_both_runtimes_answer_a_batch_with_one_array(runtime: str) -> None:
    answers = exchange(
        runtime,
        [
            b"["
            + request(1, "session/list", {})
            + b", 42, "
            + line({"jsonrpc": "2.0", "method": "_vendor/ping"})
            + b", "
            + request(2, "session/list", [1])
            + b"]"
        ],
    )
    assert len(answers) == 1
    batch = answers[0]
    assert isinstance(batch, list)
    by_id = {entry["id"]: entry for entry in batch}
    assert set(by_id) == {1, 2, None}
    assert "result" in by_id[1]
    assert by_id[2] == error(2, -32602, "invalid params: ACP params are an object")
    assert by_id[None] == error(
        None, -32600, "Invalid Request: a JSON-RPC message is an object, not int"
    )


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_both_runtimes_refuse_an_id_still_unanswered(runtime: str) -> None:
    """A batch's entries are admitted before any of its handlers runs: the second request
    reuses the id of the first, still unanswered."""
    same_id = request(3, "session/list", {})
    [batch] = exchange(runtime, [b"[" + same_id + b", " + same_id + b"]"])
    assert error(3, -32600, "request id 3 is already in flight") in batch
    assert sum("result" in answer for answer in batch) == 1


class BadResults(BaseAgent):
    """Results the owner cannot send: over the frame limit, not JSON."""

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        return _bad_result(method.lstrip("_"))


class SdkBadResults(MiniAgent):
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return _bad_result(method)


def _bad_result(name: str) -> dict[str, Any]:
    return {"blob": "x" * 1000} if name == "big" else {"x": float("nan")}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_both_runtimes_answer_a_result_that_cannot_be_sent_with_an_internal_error(
    runtime: str,
) -> None:
    lines = [request(1, "_big", {}), request(2, "_nan", {})]
    options = OwnerOptions(max_frame_bytes=512)
    answers = exchange(runtime, lines, bad_results=True, options=options)
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[1] == error(
        1,
        -32603,
        "internal error: the result cannot be sent (a response of 1046 bytes is over the frame "
        "limit of 512 bytes)",
    )
    assert by_id[2] == error(
        2,
        -32603,
        "internal error: the result cannot be sent (result['x']: nan is not a JSON number)",
    )
