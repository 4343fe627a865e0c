"""Bearer-token authentication for the HTTP and WebSocket server: :class:`BearerAuth`.

Once any connection can take a session over by resuming it, reaching the server is reaching
every session whose id is known, so every connection must authenticate. :class:`BearerAuth` is
ASGI middleware in front of the SDK's app: each HTTP request and each WebSocket upgrade must
carry ``Authorization: Bearer <token>``; anything else is refused with ``401`` before the app
(and so any ACP message) sees it. The comparison takes constant time (:func:`hmac.compare_digest`)
and the token never reaches a log record or an error message.
"""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any, Final, final

from .._tokens import check_token

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

__all__ = ["BearerAuth"]

logger = logging.getLogger("agent_meta.sdk")

_DENIAL: Final = b"401 Unauthorized: send Authorization: Bearer <token>\n"
_DENIAL_HEADERS: Final = (
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"www-authenticate", b'Bearer realm="acp"'),
)
"""The headers of a refusal, over HTTP and as a WebSocket denial response."""


@final
class BearerAuth:
    """ASGI middleware: pass a request or a WebSocket upgrade to ``app`` only when it carries
    ``Authorization: Bearer <token>``; refuse it with ``401`` otherwise. Lifespan events pass
    through."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._token = check_token(token)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket") or self._authorized(scope):
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        logger.info(
            "refused an unauthenticated %s connection from %s",
            kind,
            "?" if not client else client[0],
        )
        if kind == "http":
            await _deny_http(send)
        else:
            await _deny_websocket(scope, receive, send)

    def _authorized(self, scope: MutableMapping[str, Any]) -> bool:
        presented = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                presented = value
                break
        # The scheme is case-insensitive, and one or more spaces follow it (RFC 7235 2.1):
        # "bearer", "BEARER" and "Bearer" are one scheme.
        scheme, _, credentials = presented.partition(b" ")
        # Constant time whatever was presented (compare_digest takes equal work for equal
        # lengths; the length of the expected value is not the secret).
        matches = hmac.compare_digest(credentials.lstrip(b" "), self._token)
        return matches and scheme.lower() == b"bearer"


async def _deny_http(send: Callable[[Any], Awaitable[None]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [*_DENIAL_HEADERS, (b"content-length", str(len(_DENIAL)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": _DENIAL})


async def _deny_websocket(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[Any]],
    send: Callable[[Any], Awaitable[None]],
) -> None:
    """Refuse the upgrade: a ``401`` response where the server offers the WebSocket denial
    response extension (uvicorn does), else a close before accepting (an HTTP ``403``)."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 401,
                "headers": list(_DENIAL_HEADERS),
            }
        )
        await send({"type": "websocket.http.response.body", "body": _DENIAL})
        return
    await send({"type": "websocket.close", "code": 1008})
