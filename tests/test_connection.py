"""The agent-side connection with a toy agent: negotiation, errors, concurrency, ordering."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from agent_meta import (
    AgentConnection,
    BaseAgent,
    ClientRequestError,
    OwnerOptions,
    RequestContext,
    TransportBrokenError,
    serve_agent,
)
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.core._jsonrpc import ErrorCode, JsonRpcError
from tests.peer import serve

if TYPE_CHECKING:
    from agent_meta.core._json import JsonObject

INIT_V2 = {"protocolVersion": 2, "info": {"name": "test", "version": "0"}}


class ToyAgent(BaseAgent):
    """Sessions are names; prompts can be held open until cancelled or released."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.prompt_started = trio.Event()
        self.scopes: dict[str, trio.CancelScope] = {}
        self.cancelled: list[str] = []

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {"agentVersion": ctx.protocol_version}

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        name = params.get("name")
        if not isinstance(name, str):
            raise JsonRpcError(ErrorCode.INVALID_PARAMS, "invalid params: 'name' must be a string")
        lifetime = ctx.owner.open_lifetime(name)
        await lifetime.publish(meta={"created": True})

        async def after() -> None:
            await ctx.connection.session_update(name, {"sessionUpdate": "after_new"})

        ctx.after_response(after)
        return {"sessionId": name}

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session_id = str(params.get("sessionId"))
        if session_id == "boom":
            raise RuntimeError("kaboom")
        lifetime = ctx.owner.lifetime(session_id)  # UnknownSessionError -> -32002
        if params.get("hold"):
            with trio.CancelScope() as scope:
                self.scopes[session_id] = scope
                self.prompt_started.set()
                await self.release.wait()
            if scope.cancelled_caught:
                return {"stopReason": "cancelled"}
        await ctx.connection.session_update(session_id, {"sessionUpdate": "before_reply"})
        await lifetime.publish(title="done")
        return {"stopReason": "end_turn"}

    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        session_id = str(params.get("sessionId"))
        self.cancelled.append(session_id)
        scope = self.scopes.get(session_id)
        if scope is not None:
            scope.cancel()


def _code(response: dict[str, Any]) -> int:
    assert "result" not in response
    assert response["error"]["message"]
    code = response["error"]["code"]
    assert isinstance(code, int)
    return code


@pytest.mark.parametrize(
    ("allowed", "requested", "negotiated"),
    [
        ((1, 2), 2, 2),
        ((1, 2), 1, 1),
        ((1, 2), 7, 2),
        ((1,), 2, 1),
    ],
)
async def test_initialize_negotiates_the_version(
    allowed: tuple[int, ...], requested: int, negotiated: int
) -> None:
    async with serve(ToyAgent(), protocol_versions=allowed) as peer:
        response = await peer.request("initialize", {"protocolVersion": requested})
    expected: dict[str, Any] = {"protocolVersion": negotiated, "agentVersion": negotiated}
    if negotiated == 1:  # session/set_title, answered by the connection (R13), is advertised
        titles: dict[str, Any] = {"setTitle": {}, "title": {}}
        expected["agentCapabilities"] = {"sessionCapabilities": titles}
        # what its v1 _meta objects mean: whole (docs/own.md, "What a v1 object means")
        expected["_meta"] = {"agent-meta": {"v1MetaObjects": "whole"}}
    assert response["result"] == expected


@pytest.mark.parametrize(("allowed", "requested"), [((2,), 1), ((1, 2), 0)])
async def test_a_version_below_every_supported_one_is_refused_with_32022(
    allowed: tuple[int, ...], requested: int
) -> None:
    """ACP v2 schema: no supported version at or below the request -> -32022 with the
    requested and supported versions; the connection stays usable for another initialize."""
    async with serve(ToyAgent(), protocol_versions=allowed) as peer:
        refused = await peer.request("initialize", {"protocolVersion": requested})
        assert refused["error"] == {
            "code": ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version",
            "data": {"requested": requested, "supported": list(allowed)},
        }
        accepted = await peer.request("initialize", {"protocolVersion": 2})
        assert accepted["result"]["protocolVersion"] == 2


async def test_initialize_rejects_a_bad_version_and_methods_before_it() -> None:
    async with serve(ToyAgent()) as peer:
        assert _code(await peer.request("session/new", {"name": "a"})) == ErrorCode.INVALID_REQUEST
        assert (
            _code(await peer.request("initialize", {"protocolVersion": "2"}))
            == ErrorCode.INVALID_PARAMS
        )
        assert _code(await peer.request("initialize", {})) == ErrorCode.INVALID_PARAMS
        assert (await peer.request("initialize", INIT_V2))["result"]["protocolVersion"] == 2


@pytest.mark.parametrize("requested", [65536, 2**70])
async def test_a_version_beyond_uint16_is_invalid_params(requested: int) -> None:
    """ACP's ``ProtocolVersion`` is a ``uint16`` (v2 schema): a larger number is not a
    version at all, so ``-32602``, not a negotiation to the highest one. 65535 is valid."""
    async with serve(ToyAgent()) as peer:
        refused = await peer.request("initialize", {"protocolVersion": requested})
        assert _code(refused) == ErrorCode.INVALID_PARAMS, refused
        accepted = await peer.request("initialize", {"protocolVersion": 65535})
        assert accepted["result"]["protocolVersion"] == 2


@pytest.mark.parametrize(("requested", "served"), [(1, True), (2, False), (7, False)])
async def test_a_null_initialize_id_is_judged_by_the_version_it_asks_for(
    requested: int, served: bool
) -> None:
    """v1's ``RequestId`` allows ``null``, v2's does not. Before ``initialize`` has
    negotiated, the version the request asks for decides: an ``initialize`` that negotiates
    v1 with ``id: null`` is served. It used to be refused "in ACP v2" whatever it asked for."""
    async with serve(ToyAgent()) as peer:
        await peer.send(
            {"id": None, "method": "initialize", "params": {"protocolVersion": requested}}
        )
        answer = (await peer.until_response(None))[-1]
        if served:
            assert answer["result"]["protocolVersion"] == 1, answer
        else:
            assert _code(answer) == ErrorCode.INVALID_REQUEST, answer


@pytest.mark.parametrize("session_id", [["x"], {"a": 1}, 5, None, True])
async def test_session_cancel_with_a_bad_session_id_is_ignored_quietly(
    session_id: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``session/cancel`` is a notification (never answered) whose ``sessionId`` is a
    string: anything else is ignored without reaching the agent and without a traceback.
    The reference agent's cancel handler used to raise ``TypeError`` (an unhashable id), and a
    traceback was logged."""
    agent = ReferenceAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.notify("session/cancel", {"sessionId": session_id})
        response = await peer.request("session/list", {})
        assert response["result"] == {"sessions": []}
    failures = [r for r in caplog.records if r.exc_info is not None or r.levelname == "ERROR"]
    assert failures == [], [r.getMessage() for r in failures]


async def test_the_version_cannot_change_once_a_session_is_open() -> None:
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.request("session/new", {"name": "a"})
        assert (
            _code(await peer.request("initialize", {"protocolVersion": 1}))
            == ErrorCode.INVALID_REQUEST
        )


async def test_malformed_input_gets_the_right_error_and_the_connection_survives() -> None:
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send_raw(b"{not json\n")
        assert _code((await peer.until_response(None))[-1]) == ErrorCode.PARSE_ERROR
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": "x", "params": NaN}\n')
        assert _code((await peer.until_response(None))[-1]) == ErrorCode.PARSE_ERROR
        await peer.send_raw(b'{"jsonrpc": "1.0", "id": 6, "method": "x"}\n')
        assert _code((await peer.until_response(6))[-1]) == ErrorCode.INVALID_REQUEST
        await peer.send_raw(b"[]\n")
        assert _code((await peer.until_response(None))[-1]) == ErrorCode.INVALID_REQUEST
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 8, "method": "x", "params": [1]}\n')
        assert _code((await peer.until_response(8))[-1]) == ErrorCode.INVALID_PARAMS
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 9, "method": "x", "params": 5}\n')
        assert _code((await peer.until_response(9))[-1]) == ErrorCode.INVALID_REQUEST
        assert _code(await peer.request("session/frobnicate", {})) == ErrorCode.METHOD_NOT_FOUND
        assert _code(await peer.request("_vendor/thing", {})) == ErrorCode.METHOD_NOT_FOUND
        assert _code(await peer.request("session/new", {"name": 3})) == ErrorCode.INVALID_PARAMS
        assert (
            _code(await peer.request("session/prompt", {"sessionId": "x"}))
            == ErrorCode.RESOURCE_NOT_FOUND
        )
        assert (
            _code(await peer.request("session/prompt", {"sessionId": "boom"}))
            == ErrorCode.INTERNAL_ERROR
        )
        # Unknown notifications and stray responses are ignored, without an answer.
        await peer.notify("_vendor/ping", {})
        await peer.send({"id": 99, "result": {}})
        assert (await peer.request("session/new", {"name": "a"}))["result"] == {"sessionId": "a"}


async def test_an_overlong_line_is_a_parse_error_and_the_next_line_is_served() -> None:
    async with serve(ToyAgent(), max_line_bytes=256) as peer:
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "p": "' + b"z" * 1000)
        assert _code((await peer.until_response(None))[-1]) == ErrorCode.PARSE_ERROR
        await peer.send_raw(b'"}\n')
        assert (await peer.request("initialize", INIT_V2))["result"]["protocolVersion"] == 2


async def test_eof_inside_a_line_answers_a_parse_error_then_stops_cleanly() -> None:
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 3, "meth')
        await peer.to_agent.aclose()
        assert _code((await peer.until_response(None))[-1]) == ErrorCode.PARSE_ERROR
        assert await peer.receive() is None


async def test_frames_enqueued_by_a_handler_precede_its_response_and_after_response_follows() -> (
    None
):
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        before, response = await peer.call("session/new", {"name": "a"})
        assert [f["params"]["update"]["sessionUpdate"] for f in before] == ["session_info_update"]
        assert response["result"] == {"sessionId": "a"}
        after = await peer.receive()
        assert after is not None
        assert after["params"]["update"] == {"sessionUpdate": "after_new"}
        before, response = await peer.call("session/prompt", {"sessionId": "a"})
        kinds = [f["params"]["update"]["sessionUpdate"] for f in before]
        assert kinds == ["before_reply", "session_info_update"]
        assert peer.mirror.info("a").title == "done"


async def test_a_long_prompt_blocks_neither_cancel_nor_other_sessions() -> None:
    agent = ToyAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.request("session/new", {"name": "slow"})
        await peer.request("session/new", {"name": "fast"})
        await peer.send(
            {
                "id": "held",
                "method": "session/prompt",
                "params": {"sessionId": "slow", "hold": True},
            }
        )
        await agent.prompt_started.wait()
        # Another session's prompt is served while the first one is held open.
        assert (await peer.request("session/prompt", {"sessionId": "fast"}))["result"] == {
            "stopReason": "end_turn"
        }
        await peer.notify("session/cancel", {"sessionId": "slow"})
        frames = await peer.until_response("held")
        assert frames[-1]["result"] == {"stopReason": "cancelled"}
        assert agent.cancelled == ["slow"]


async def test_cancel_request_answers_request_cancelled() -> None:
    agent = ToyAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.request("session/new", {"name": "s"})
        await peer.send(
            {"id": 41, "method": "session/prompt", "params": {"sessionId": "s", "hold": True}}
        )
        await agent.prompt_started.wait()
        await peer.notify("$/cancel_request", {"requestId": 41})
        assert _code((await peer.until_response(41))[-1]) == ErrorCode.REQUEST_CANCELLED


class EarlyAnswerAgent(BaseAgent):
    """``_work`` answers at once with ``ctx.respond()``, then works on until released."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.cancelled = False
        self.finished = False

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        await ctx.respond({"accepted": True})
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.cancelled = True
            raise
        self.finished = True
        return {}


async def test_cancel_request_for_an_answered_request_is_ignored() -> None:
    """ACP v2 schema, ``CancelRequestNotification``: "Receivers MUST ignore this notification
    for an unknown or already-answered request ID". A handler that answered with
    ``ctx.respond()`` and works on must not be cancelled by a later ``$/cancel_request``."""
    agent = EarlyAnswerAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        assert (await peer.request("_work", {}))["result"] == {"accepted": True}
        await peer.notify("$/cancel_request", {"requestId": peer._ids})
        await trio.testing.wait_all_tasks_blocked()
        assert not agent.cancelled, "an answered request was cancelled"
        agent.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert agent.finished


class AskingAgent(BaseAgent):
    """``_ask`` sends ``_client/question`` to the client and reports how it was answered."""

    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        try:
            result = await ctx.connection.request("_client/question", {})
        except ClientRequestError as exc:
            return {"code": exc.code, "message": exc.message}
        return {"result": result}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"result": "allow"}, {"result": "allow"}),
        ({"result": [1, None]}, {"result": [1, None]}),
        ({"result": None}, {"result": None}),
        ({"result": {}, "extra": 1}, ErrorCode.INVALID_REQUEST),
        ({"result": {}, "error": {"code": 1, "message": "m"}}, ErrorCode.INVALID_REQUEST),
        ({"jsonrpc": "1.0", "result": {}}, ErrorCode.INVALID_REQUEST),
        ({"error": {"code": "1", "message": "m"}}, ErrorCode.INVALID_REQUEST),
    ],
    ids=["string", "array", "null", "extra-member", "result-and-error", "jsonrpc-1.0", "bad-error"],
)
async def test_a_client_answer_is_never_answered_and_always_settles_the_request(
    answer: dict[str, Any], expected: dict[str, Any] | int
) -> None:
    """JSON-RPC never answers a response. A response with any JSON ``result`` is valid and is
    delivered to the waiting request as it is; a malformed one fails that request with
    :class:`ClientRequestError` (``-32600``). A result that was not an object, or a malformed
    answer, used to be answered with an error response carrying the agent's own request id
    (which the client read as the answer to its own request of that id), and the agent's
    request waited forever."""
    async with serve(AskingAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send({"id": "q", "method": "_ask", "params": {}})
        question = await peer.receive()
        assert question is not None
        assert question["method"] == "_client/question", question
        await peer.send({"id": question["id"], **answer})
        frames: list[dict[str, Any]] = []
        while not frames or "method" in frames[-1]:  # up to the first response the agent sends
            frame = await peer.receive()
            assert frame is not None
            frames.append(frame)
        assert frames[-1]["id"] == "q", f"the agent answered the client's answer: {frames[-1]}"
        result = frames[-1]["result"]
        if isinstance(expected, int):
            assert result["code"] == expected, result
            assert "malformed" in result["message"], result
        else:
            assert result == expected


async def test_a_malformed_answer_to_no_request_is_dropped() -> None:
    """A response-shaped message that is not valid and answers nothing the agent asked is
    logged and dropped, never answered."""
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send({"id": 77, "result": {}, "extra": 1})
        await peer.send({"id": "x", "error": {"code": 1}})
        await peer.send({"id": 78})
        await peer.send({"id": 99, "method": "session/new", "params": {"name": "a"}})
        frames = await peer.until_response(99)
        assert [f for f in frames if "method" not in f] == [frames[-1]], frames
        assert frames[-1]["result"] == {"sessionId": "a"}


async def test_a_duplicate_request_id_in_flight_is_rejected() -> None:
    agent = ToyAgent()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.request("session/new", {"name": "s"})
        held = {"id": 5, "method": "session/prompt", "params": {"sessionId": "s", "hold": True}}
        await peer.send(held)
        await agent.prompt_started.wait()
        await peer.send(held)
        assert _code((await peer.until_response(5))[-1]) == ErrorCode.INVALID_REQUEST
        agent.release.set()
        assert (await peer.until_response(5))[-1]["result"] == {"stopReason": "end_turn"}


async def test_eof_lets_requests_in_flight_finish_and_cancels_background_tasks() -> None:
    agent = ToyAgent()
    background_cancelled = trio.Event()

    class WithBackground(ToyAgent):
        async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
            async def forever() -> None:
                try:
                    await trio.sleep_forever()
                finally:
                    background_cancelled.set()

            ctx.connection.start_background(forever, name="forever")
            return {}

    agent = WithBackground()
    async with serve(agent) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.request("session/new", {"name": "s"})
        await peer.send(
            {"id": 9, "method": "session/prompt", "params": {"sessionId": "s", "hold": True}}
        )
        await agent.prompt_started.wait()
        await peer.to_agent.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert not background_cancelled.is_set()  # still serving the held prompt
        agent.release.set()
        assert (await peer.until_response(9))[-1]["result"] == {"stopReason": "end_turn"}
        assert await peer.receive() is None
    assert background_cancelled.is_set()


async def test_protocol_versions_are_checked() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    with pytest.raises(ValueError, match="subset"):
        await serve_agent(ToyAgent(), receive, send, protocol_versions=(3,))


async def test_a_batch_is_answered_by_one_array_after_its_last_request() -> None:
    """JSON-RPC batches (ACP v2 transports): each entry is processed, invalid entries get their
    own -32600 with id null, notifications no answer, and all responses leave as one line."""
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send_raw(
            b'[{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"name": "a"}},'
            b" 42,"
            b' {"jsonrpc": "2.0", "method": "_vendor/ping"},'
            b' {"jsonrpc": "2.0", "id": 2, "method": "session/frobnicate"}]\n'
        )
        frames = await peer.until_response(2)
        batch_line = peer.lines[-1]
        assert batch_line.startswith(b"[")  # one line, one array
        by_id = {frame.get("id"): frame for frame in frames if "method" not in frame}
        assert by_id[1]["result"] == {"sessionId": "a"}
        assert by_id[None]["error"]["code"] == ErrorCode.INVALID_REQUEST
        assert by_id[2]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
        after = await peer.receive()  # the after_response update follows the whole batch
        assert after is not None
        assert after["params"]["update"]["sessionUpdate"] == "after_new"


async def test_a_batch_of_notifications_gets_no_answer() -> None:
    async with serve(ToyAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        await peer.send_raw(b'[{"jsonrpc": "2.0", "method": "_vendor/ping"}]\n')
        response = await peer.request("session/new", {"name": "n"})
        assert response["result"] == {"sessionId": "n"}
        assert not any(line.startswith(b"[") for line in peer.lines)
        assert [f["id"] for f in peer.frames if "method" not in f] == [1001, 1002]


@pytest.mark.parametrize("drain_timeout", [10.0, math.inf])
async def test_a_graceful_stop_is_bounded_and_reports_unwritten_frames(
    autojump_clock: trio.testing.MockClock, drain_timeout: float
) -> None:
    """``AgentConnection.shutdown(grace, drain)``: whatever is still running ``grace + drain``
    seconds later is cancelled and :func:`serve_agent` returns: one bound, whatever
    ``OwnerOptions.drain_timeout`` says. With a client that stopped reading, frames stay
    unwritten, and :func:`serve_agent` says so (``TransportBrokenError``; the CLI exits 1).
    The owner's own drain used to come on top (10 s more, or forever with the default), and
    :func:`serve_agent` returned as if everything was written. Virtual time (autojump)."""
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, _from_agent = trio.testing.lockstep_stream_one_way_pair()  # never read
    ended: dict[str, Any] = {}

    async def run(*, task_status: trio.TaskStatus[AgentConnection]) -> None:
        options = OwnerOptions(drain_timeout=drain_timeout)
        try:
            await serve_agent(
                ToyAgent(), agent_in, agent_out, options=options, task_status=task_status
            )
        except TransportBrokenError as exc:
            ended["error"] = exc
        ended["at"] = trio.current_time()

    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            connection: AgentConnection = await nursery.start(run)
            await to_agent.send_all(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n')
            await trio.testing.wait_all_tasks_blocked()  # its answer is stuck on the output
            start = trio.current_time()
            connection.shutdown(grace=5, drain=10)
    elapsed = ended["at"] - start
    assert elapsed <= 15, f"the stop took {elapsed} s, longer than grace + drain"
    assert elapsed == pytest.approx(min(15, drain_timeout))  # the drain ends at either bound
    assert "stopped reading" in str(ended.get("error")), ended
