"""The bearer-token gate in front of the HTTP and WebSocket server (``agent_meta.sdk._auth``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent_meta._tokens import MIN_TOKEN_BYTES, check_token
from agent_meta.sdk._auth import BearerAuth

TOKEN = "t" * MIN_TOKEN_BYTES


class App:
    """The app behind the gate: records the scopes it was called with."""

    def __init__(self) -> None:
        self.scopes: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scopes.append(scope["type"])


def call(
    gate: BearerAuth, scope: dict[str, Any], inbound: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    queue = list(inbound or [])

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return sent


def http(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "headers": list(headers), "client": ("10.0.0.1", 1)}


@pytest.mark.parametrize(
    "headers",
    [
        (),
        ((b"authorization", b"Bearer wrong"),),
        ((b"authorization", TOKEN.encode()),),  # no scheme
        ((b"authorization", b"Bearer " + TOKEN.encode() + b"x"),),
        ((b"x-token", b"Bearer " + TOKEN.encode()),),
    ],
)
def test_an_http_request_without_the_token_is_refused_401(
    headers: tuple[tuple[bytes, bytes], ...], caplog: pytest.LogCaptureFixture
) -> None:
    app = App()
    caplog.set_level(logging.INFO, logger="agent_meta.sdk")
    sent = call(BearerAuth(app, TOKEN), http(*headers))
    assert app.scopes == []  # the app never saw it
    assert sent[0]["status"] == 401
    assert (b"www-authenticate", b'Bearer realm="acp"') in sent[0]["headers"]
    assert TOKEN not in caplog.text
    assert "refused an unauthenticated http connection from 10.0.0.1" in caplog.text


def test_the_right_token_passes_whatever_the_header_name_case() -> None:
    app = App()
    for name in (b"authorization", b"Authorization"):
        assert call(BearerAuth(app, TOKEN), http((name, b"Bearer " + TOKEN.encode()))) == []
    assert app.scopes == ["http", "http"]


def test_a_websocket_upgrade_is_denied_with_401_where_the_server_can() -> None:
    app = App()
    scope = {"type": "websocket", "headers": [], "extensions": {"websocket.http.response": {}}}
    sent = call(BearerAuth(app, TOKEN), scope, [{"type": "websocket.connect"}])
    assert [m["type"] for m in sent] == [
        "websocket.http.response.start",
        "websocket.http.response.body",
    ]
    assert sent[0]["status"] == 401
    assert app.scopes == []


def test_a_websocket_upgrade_is_closed_where_the_server_has_no_denial_response() -> None:
    sent = call(
        BearerAuth(App(), TOKEN),
        {"type": "websocket", "headers": []},
        [{"type": "websocket.connect"}],
    )
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_lifespan_events_pass_through() -> None:
    app = App()
    assert call(BearerAuth(app, TOKEN), {"type": "lifespan"}) == []
    assert app.scopes == ["lifespan"]


@pytest.mark.parametrize("token", ["short", "with a space in it!!", "tökenwithunicode0123"])
def test_a_bad_token_is_refused_without_being_shown(token: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_token(token)
    assert token not in str(refused.value)


def test_the_scheme_is_case_insensitive_and_may_be_followed_by_several_spaces() -> None:
    """RFC 7235 2.1: ``bearer`` is ``Bearer`` (a client that sent it used to get 401)."""
    app = App()
    for scheme in (b"bearer ", b"BEARER ", b"bEaReR ", b"Bearer   "):
        header = (b"authorization", scheme + TOKEN.encode())
        assert call(BearerAuth(app, TOKEN), http(header)) == []
    assert app.scopes == ["http"] * 4
    for refused in (b"Basic " + TOKEN.encode(), b"Bearer" + TOKEN.encode(), TOKEN.encode()):
        sent = call(BearerAuth(app, TOKEN), http((b"authorization", refused)))
        assert sent[0]["status"] == 401
    assert app.scopes == ["http"] * 4
