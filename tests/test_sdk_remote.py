"""The adapter under the SDK's HTTP and WebSocket server (``agent_meta.sdk._remote``).

Needs a release with the SDK's HTTP server and its ``http`` extra; elsewhere the module skips,
saying why (``agent_meta.sdk`` itself imports on every release).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest

from agent_meta import OwnerClosedError, OwnerOptions
from tests.failing_store import FailingStore

remote_module = pytest.importorskip(
    "agent_meta.sdk._remote",
    reason="this SDK release has no HTTP server (or no http extra)",
    exc_type=ImportError,
)
RemoteConnection = remote_module.RemoteConnection

Message = dict[str, Any]


class FlakyInner:
    """An SDK message transport (the server end of the SDK's in-memory pair) whose peer goes
    away after ``delivered`` messages."""

    def __init__(self, delivered: int) -> None:
        self.sent: list[Message] = []
        self.delivered = delivered
        self.closed = False

    async def send(self, message: Message) -> None:
        if len(self.sent) == self.delivered:
            raise ConnectionResetError("the peer went away")
        self.sent.append(message)

    async def receive(self) -> Message | None:
        await asyncio.Event().wait()  # the client says nothing
        return None

    async def close(self) -> None:
        self.closed = True


def test_a_remote_transport_that_fails_stops_the_owner_and_keeps_what_it_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = FlakyInner(delivered=2)

    async def scenario() -> None:
        # v2, no coalescing: one frame per publication (v1 frames would absorb the next one).
        remote = RemoteConnection(inner, OwnerOptions(coalesce=False, protocol_version=2))
        adapter = await remote.adapter()
        lifetime = adapter.owner.open_lifetime("s1")
        assert await lifetime.publish(meta={"a": 1})
        assert await lifetime.publish(meta={"b": 2})
        await adapter.owner.wait_flushed()
        await lifetime.publish(meta={"c": 3})  # accepted; its write fails
        with pytest.raises(OwnerClosedError):
            await adapter.owner.wait_flushed()
        with pytest.raises(OwnerClosedError):
            await adapter.send({"jsonrpc": "2.0", "id": 1, "result": {}})
        await remote.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert [m["params"]["update"]["_meta"] for m in inner.sent] == [{"a": 1}, {"b": 2}]
    assert inner.closed
    assert "stopped with an error" in caplog.text


# --- a connection whose owner stops on its own ends (create_asgi_app) -------------------------

TOKEN = "a-test-token-not-a-secret"
AUTHORIZATION = (b"authorization", f"Bearer {TOKEN}".encode())
GUARD = 30.0
"""Seconds a scenario may take; reached only when something hangs."""


def asgi_app(store: FailingStore) -> Any:
    from tests.support.sdk_mini_agent import MiniAgent

    return remote_module.create_asgi_app(lambda _conn: MiniAgent(None), store=store, token=TOKEN)


def request(request_id: int, method: str, params: Message) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


INITIALIZE = request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
NEW_SESSION = request(2, "session/new", {"cwd": "/", "mcpServers": []})


def prompt(request_id: int, session_id: str, line: str) -> Message:
    text = [{"type": "text", "text": line}]
    return request(request_id, "session/prompt", {"sessionId": session_id, "prompt": text})


class Socket:
    """One in-memory WebSocket connection to an ASGI app, driven as its client."""

    def __init__(self, app: Any) -> None:
        self.to_app: asyncio.Queue[Message] = asyncio.Queue()
        self.from_app: asyncio.Queue[Message] = asyncio.Queue()
        scope = {"type": "websocket", "path": "/acp", "headers": [AUTHORIZATION]}
        self.to_app.put_nowait({"type": "websocket.connect"})
        self.served = asyncio.ensure_future(app(scope, self.to_app.get, self.from_app.put))

    async def event(self) -> Message:
        return await self.from_app.get()

    def send(self, message: Message) -> None:
        self.to_app.put_nowait({"type": "websocket.receive", "text": json.dumps(message)})

    async def answer(self, request_id: int) -> Message:
        """The response to ``request_id`` (the messages before it are skipped)."""
        while True:
            event = await self.event()
            assert event["type"] == "websocket.send", event
            message = json.loads(event["text"])
            if message.get("id") == request_id and "method" not in message:
                return cast("Message", message)


def http_scope(method: str, *headers: tuple[bytes, bytes]) -> Message:
    return {
        "type": "http",
        "method": method,
        "path": "/acp",
        "headers": [
            AUTHORIZATION,
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            *headers,
        ],
    }


async def post(app: Any, body: Message, *headers: tuple[bytes, bytes]) -> Any:
    """One POST to the app: its status, headers (names in lower case) and body."""
    sent: list[Message] = []
    requested = asyncio.Queue[Message]()
    requested.put_nowait({"type": "http.request", "body": json.dumps(body).encode()})

    async def send(event: Message) -> None:
        sent.append(event)

    await app(http_scope("POST", *headers), requested.get, send)
    start, *chunks = sent
    response_headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    content = b"".join(chunk.get("body", b"") for chunk in chunks)
    return start["status"], response_headers, json.loads(content) if content else None


class Stream:
    """A GET of the app's SSE stream, read as it comes."""

    def __init__(self, app: Any, *headers: tuple[bytes, bytes]) -> None:
        self.events: asyncio.Queue[Message] = asyncio.Queue()
        never = asyncio.Event()

        async def receive() -> Message:
            await never.wait()  # the client stays (the SDK's GET never reads it anyway)
            raise AssertionError("unreachable")

        self.served = asyncio.ensure_future(
            app(http_scope("GET", *headers), receive, self.events.put)
        )

    async def status(self) -> int:
        return cast("int", (await self.events.get())["status"])

    async def until(self, text: bytes) -> bytes:
        """The body up to the chunk holding ``text``; raises if the stream ends first."""
        body = b""
        while text not in body:
            event = await self.events.get()
            assert event.get("more_body"), f"the stream ended without {text!r}: {body!r}"
            body += cast("bytes", event["body"])
        return body

    async def rest(self) -> bytes:
        """The body up to the end of the stream."""
        body = b""
        while True:
            event = await self.events.get()
            body += cast("bytes", event["body"])
            if not event.get("more_body"):
                await self.served
                return body


def test_a_websocket_whose_owner_stopped_is_closed_1011(caplog: pytest.LogCaptureFixture) -> None:
    """The store fails under a prompt: the prompt is never answered, but the server closes the
    socket with 1011 (the SDK client then fails its pending requests), says why once, and the
    connection is gone from the server."""
    store = FailingStore(
        fail_on=2, after=True
    )  # session/new's lifetime is stored; the prompt's is not

    async def scenario() -> None:
        app = asgi_app(store)
        socket = Socket(app)
        accepted = await socket.event()
        assert accepted["type"] == "websocket.accept"
        connection_id = dict(accepted["headers"])[b"acp-connection-id"]
        socket.send(INITIALIZE)
        await socket.answer(1)
        socket.send(NEW_SESSION)
        session_id = (await socket.answer(2))["result"]["sessionId"]
        socket.send(prompt(3, session_id, "meta a 1"))
        while (event := await socket.event())["type"] == "websocket.send":
            assert json.loads(event["text"]).get("id") != 3  # never answered: nothing stored
        assert event == {
            "type": "websocket.close",
            "code": 1011,
            "reason": "the session-info owner stopped: the lifetime store failed",
        }
        await socket.served  # the handler returned; its read of the socket was cancelled
        assert socket.from_app.empty()
        refused = await post(app, NEW_SESSION, (b"acp-connection-id", connection_id))
        assert refused[::2] == (404, {"error": "Unknown connection id"})

    asyncio.run(asyncio.wait_for(scenario(), GUARD))
    said = [r for r in caplog.records if "stopped with an error" in r.getMessage()]
    assert len(said) == 1  # once: not again when the SDK closes the connection
    assert said[0].name == "agent_meta.sdk"
    assert "saving lifetimes failed" in said[0].getMessage()
    assert TOKEN not in caplog.text


def test_a_websocket_the_client_closes_is_not_closed_by_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that leaves ends its connection as before: the owner drains, nothing is sent
    after the disconnect, and nothing is said."""
    store = FailingStore(fail_on=2, after=True)

    async def scenario() -> None:
        socket = Socket(asgi_app(store))
        assert (await socket.event())["type"] == "websocket.accept"
        socket.send(INITIALIZE)
        await socket.answer(1)
        socket.send(NEW_SESSION)
        await socket.answer(2)
        socket.to_app.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await socket.served
        assert socket.from_app.empty()

    asyncio.run(asyncio.wait_for(scenario(), GUARD))
    assert store.calls == 1
    assert "stopped" not in caplog.text


def test_a_streamable_http_connection_whose_owner_stopped_is_removed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store fails under a prompt: the connection's SSE streams end (the SDK client then
    fails its pending requests), and later requests naming the connection are answered 404."""
    store = FailingStore(
        fail_on=2, after=True
    )  # session/new's lifetime is stored; the prompt's is not

    async def scenario() -> None:
        app = asgi_app(store)
        status, headers, body = await post(app, INITIALIZE)
        assert (status, body["id"]) == (200, 1)
        connection = (b"acp-connection-id", headers["acp-connection-id"].encode())
        stream = Stream(app, connection)
        assert await stream.status() == 200
        assert (await post(app, NEW_SESSION, connection))[0] == 202
        assert b'"sessionId":"s1"' in await stream.until(b'"id":2')
        session = (b"acp-session-id", b"s1")
        on_session = Stream(app, connection, session)
        assert await on_session.status() == 200
        assert (await post(app, prompt(3, "s1", "meta a 1"), connection, session))[0] == 202
        assert b'"id":3' not in await on_session.rest()  # it ends; never answered
        assert b'"id":3' not in await stream.rest()  # it ends too
        refused = await post(app, prompt(4, "s1", "hi"), connection, session)
        assert refused[::2] == (404, {"error": "Unknown connection id"})
        assert (await Stream(app, connection).status()) == 404

    asyncio.run(asyncio.wait_for(scenario(), GUARD))
    said = [r for r in caplog.records if "stopped with an error" in r.getMessage()]
    assert len(said) == 1  # once: not again when the SDK closes the connection
    assert "saving lifetimes failed" in said[0].getMessage()
    assert TOKEN not in caplog.text


def test_each_connections_agent_is_released_when_it_closes() -> None:
    """``on_close`` gets each connection's agent once it closed (``--listen`` used to keep
    every agent until the server stopped): after N connections, none is retained."""
    from tests.support.sdk_mini_agent import MiniAgent

    retained: set[Any] = set()
    released: list[Any] = []

    def make_agent(_connection: Any) -> Any:
        agent = MiniAgent(None)
        retained.add(agent)
        return agent

    async def release(agent: Any) -> None:
        retained.discard(agent)
        released.append(agent)

    async def scenario() -> None:
        app = remote_module.create_asgi_app(make_agent, token=TOKEN, on_close=release)
        for _ in range(5):
            socket = Socket(app)
            assert (await socket.event())["type"] == "websocket.accept"
            socket.send(INITIALIZE)
            await socket.answer(1)
            assert len(retained) == 1
            socket.to_app.put_nowait({"type": "websocket.disconnect", "code": 1000})
            await socket.served  # the SDK's handler closed the connection
            assert retained == set()

    asyncio.run(asyncio.wait_for(scenario(), GUARD))
    assert len(released) == 5
