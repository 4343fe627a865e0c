"""``agent-meta agent --runtime sdk --listen``: the SDK agent served to remote clients.

ACP over WebSocket at ``ws://HOST:PORT/acp`` and streamable HTTP at ``http://HOST:PORT/acp``,
on one ASGI app (the SDK's, through :func:`agent_meta.sdk.create_asgi_app`) under uvicorn.
Each connection has its own owner and its own agent; all of them share the store, so a client
that reconnects, to this process or to another one on the same store (a replica), resumes its
sessions from where any connection left them. Every connection must present the bearer token;
SIGTERM and SIGINT stop accepting, close the connections and let each owner write what it
accepted (uvicorn's graceful shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from typing import TYPE_CHECKING, Any, cast

import uvicorn  # here, not where it is used: the CLI imports this module to check the extra

from agent_meta.sdk import create_asgi_app

from ._agent import SdkReferenceAgent

if TYPE_CHECKING:
    from agent_meta import LifetimeStore, OwnerOptions, PostgresStore, SQLiteStore

__all__ = ["ListenError", "serve_sdk_listen"]

logger = logging.getLogger("agent_meta.sdk_agent")


def _websockets() -> str:
    """uvicorn's WebSocket implementation on the ``websockets`` library: its sans-I/O one where
    uvicorn has it (0.35 on; the other is deprecated, with a warning at every start)."""
    from uvicorn.config import WS_PROTOCOLS

    return "websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "websockets"


class ListenError(OSError):
    """The address cannot be listened on (in use, not this machine's, a host not found)."""


async def serve_sdk_listen(
    host: str,
    port: int,
    token: str,
    options: OwnerOptions,
    *,
    store: LifetimeStore | None = None,
    history: SQLiteStore | PostgresStore | None = None,
    announce: bool = True,
) -> None:
    """Serve until SIGTERM or SIGINT. ``port`` 0 takes a free one; with ``announce`` the
    address is printed on stdout as ``listening ws://HOST:PORT/acp`` (never the token).
    ``store`` and ``history`` are as in :func:`~.serve_sdk_agent`, shared by every
    connection. :class:`ListenError` when the address cannot be listened on."""
    from .._common._storage import HistoryStore

    shared_history = None if history is None else HistoryStore(history)
    if shared_history is not None:
        await shared_history.load()  # creates (or migrates) the tables once, before any client
    agents: set[SdkReferenceAgent] = set()
    """The agents of the connections open now (each is released when its connection ends)."""

    def make_agent(_connection: Any) -> Any:
        # The adapter is found from the connection at initialize (create_asgi_app makes one).
        agent = SdkReferenceAgent(None, shared_history)
        agents.add(agent)
        return cast("Any", agent)

    async def release(agent: Any) -> None:
        agents.discard(agent)
        await asyncio.shield(agent.aclose())

    app = create_asgi_app(make_agent, options, store=store, token=token, on_close=release)
    try:
        listener = socket.create_server((host, port))
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc}") from exc
    bound_host, bound_port = listener.getsockname()[:2]
    if announce:
        print(f"listening ws://{bound_host}:{bound_port}/acp", flush=True)
    address = f"{bound_host}:{bound_port}"
    logger.info("serving ACP on ws://%s/acp and http://%s/acp", address, address)
    config = uvicorn.Config(app, log_level="warning", ws=_websockets(), lifespan="off")
    server = uvicorn.Server(config)

    def stop(_signum: int, _frame: object) -> None:
        server.should_exit = True

    # uvicorn stops gracefully on these signals while it serves, then raises the signal again
    # for the handler that was there before: this one, so that a graceful stop exits 0.
    previous = {each: signal.signal(each, stop) for each in (signal.SIGTERM, signal.SIGINT)}
    try:
        await server.serve(sockets=[listener])
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
        listener.close()
        for agent in list(agents):
            await asyncio.shield(agent.aclose())
