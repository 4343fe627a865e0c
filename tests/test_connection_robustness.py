"""A request that goes wrong costs that request, never the connection (R12).

Each test sends its requests, closes the input, and lets :func:`serve_agent` finish: it must
return normally (no exception) with every request answered.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

from agent_meta import BaseAgent, RequestContext, serve_agent
from agent_meta.testing import RecordingTransport

if TYPE_CHECKING:
    from agent_meta import JsonObject


async def exchange(agent: BaseAgent, requests: list[dict[str, Any]]) -> dict[object, Any]:
    """Serve ``requests`` (after ``initialize``) to the end of input; responses by id."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    transport = RecordingTransport()
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}}]
    lines += requests
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_agent, agent, receive, transport)
        await send.send_all(data)
        await send.aclose()
    return {m["id"]: m for m in transport.messages if "id" in m and "method" not in m}


class BadResults(BaseAgent):
    async def ext_method(self, ctx: RequestContext, method: str, params: JsonObject) -> JsonObject:
        if method == "_nan":
            return {"x": float("nan")}
        if method == "_big":
            return {"blob": "x" * (2 << 20)}  # over the default 1 MiB frame limit
        return {"ok": True}


async def test_a_result_the_owner_refuses_is_an_internal_error_and_the_connection_goes_on() -> None:
    responses = await exchange(
        BadResults(),
        [
            {"jsonrpc": "2.0", "id": 1, "method": "_big", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "_nan", "params": {}},
            {"jsonrpc": "2.0", "id": 3, "method": "_fine", "params": {}},
        ],
    )
    assert responses[1]["error"]["code"] == -32603
    assert responses[2]["error"]["code"] == -32603
    assert responses[3]["result"] == {"ok": True}


class FailingCallback(BaseAgent):
    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        ctx.owner.open_lifetime("s")

        async def advertise() -> None:
            raise RuntimeError("advertising failed")

        ctx.after_response(advertise)
        return {"sessionId": "s"}

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {"sessions": []}


async def test_a_failing_after_response_callback_is_logged_not_fatal() -> None:
    responses = await exchange(
        FailingCallback(),
        [
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}},
        ],
    )
    assert responses[1]["result"] == {"sessionId": "s"}
    assert responses[2]["result"] == {"sessions": []}
