"""The adapter under the SDK's own HTTP and WebSocket servers: :func:`create_asgi_app`.

The SDK (0.12) serves streamable HTTP and WebSocket with one ASGI app,
``acp.http.asgi.create_asgi_app(agent_factory)``. For each connection it binds an
``AgentSideConnection`` to one end of an in-memory message pair; its pump reads the other end.
:func:`create_asgi_app` builds the same app, but each connection's ``AgentSideConnection`` gets
a :class:`RemoteConnection` around that end: an owner writes every message the agent sends into
it, exactly as over stdio. The SDK offers no hook for this, so the connection class the SDK's
server module builds is swapped for the duration of that (synchronous) construction only.

The SDK's HTTP server leaves ``session/resume`` and ``session/close`` unrouted; connections
made here route them (``use_unstable_protocol=True``), as lifetimes need them.

Over streamable HTTP the SDK splits a connection's messages across SSE streams, and the client
merges them ("order is preserved within a stream, interleaved across"): a ``session/load`` on a
fresh HTTP connection may see its resync and its response on different streams. WebSocket and
stdio keep one order.

A connection whose owner stops on its own (a lifetime-store write failed, or its transport
broke) can serve nothing more; over stdio the agent then exits 1. Here the connection ends
instead, so that its client learns it must reconnect: the failure is logged once, a WebSocket is
closed by the server with code ``1011`` (:class:`_SocketEnd`), and a streamable HTTP connection
is removed from the SDK's registry, which ends its SSE streams (the client's pending requests
fail) and answers later requests naming it ``404``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
from typing import TYPE_CHECKING, Any, Final, final

import acp.http.server as sdk_server
from acp.http.asgi import AcpAsgiApp
from acp.http.server import AcpServer, ConnectionRegistry

from ..core._errors import StoreError, TransportBrokenError
from ..owner._asyncio import open_asyncio_owner
from ._adapter import SdkAdapter
from ._auth import BearerAuth
from ._run import register_connection
from ._stdio import SDK_DEFAULT_OPTIONS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, MutableMapping

    from ..sansio._options import OwnerOptions
    from ..stores._store import LifetimeStore

__all__ = ["MessageTransport", "RemoteConnection", "create_asgi_app"]

logger = logging.getLogger("agent_meta.sdk")

CLOSE_CODE: Final = 1011
"""The WebSocket close code of a connection whose owner stopped on its own (internal error)."""


@final
class MessageTransport:
    """The owner's :class:`~agent_meta.Transport` onto an SDK message transport: each frame is
    handed over as the message it encodes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send_frame(self, frame: bytes) -> None:
        await self._inner.send(json.loads(frame))


@final
class _InnerSource:
    """The client's messages, read from the SDK's end of the pair."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def receive(self) -> dict[str, Any] | None:
        message: dict[str, Any] | None = await self._inner.receive()
        return message

    async def close(self) -> None:
        """The pair is closed by :meth:`RemoteConnection.close`, once the owner has drained."""


@final
class RemoteConnection:
    """The SDK transport of one HTTP or WebSocket connection: an :class:`SdkAdapter` whose
    owner starts with the connection's first message and stops when the SDK closes it.

    If the owner stops on its own first (a store write failed, its transport broke), that is
    logged and :attr:`on_stopped` is called with a short reason for the client."""

    def __init__(
        self, inner: Any, options: OwnerOptions | None, *, store: LifetimeStore | None = None
    ) -> None:
        self._inner = inner
        self._options = options
        self._store = store
        self._adapter: SdkAdapter | None = None
        self._ready = asyncio.Event()
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._stopped_by_itself = False
        self.on_stopped: Callable[[str], None] | None = None
        """Called once, with a reason fit for the client (no secrets), if the owner stops on its
        own, before :meth:`close`; :func:`create_asgi_app` ends the connection then."""
        self.on_closed: Callable[[], Awaitable[None]] | None = None
        """Awaited at the end of :meth:`close` (``create_asgi_app``'s ``on_close``)."""

    async def adapter(self) -> SdkAdapter:
        """The connection's adapter, once its owner runs (started here if need be)."""
        if self._adapter is None:
            if self._task is None:
                self._task = asyncio.get_running_loop().create_task(self._run())
            await self._ready.wait()
            if self._adapter is None:
                raise RuntimeError("the connection's owner did not start") from self._failure
        return self._adapter

    async def send(self, message: dict[str, Any]) -> None:
        await (await self.adapter()).send(message)

    async def receive(self) -> dict[str, Any] | None:
        return await (await self.adapter()).receive()

    async def close(self) -> None:
        """Let the owner write what is queued, then close the SDK's end of the pair."""
        self._done.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:  # the SDK ignores errors of close(): say it here
                if not self._stopped_by_itself:  # said when it stopped
                    logger.exception("the owner of an SDK connection stopped with an error")
        try:
            await self._inner.close()
        finally:
            if self.on_closed is not None:
                await self.on_closed()

    async def _run(self) -> None:
        try:
            options = self._options or SDK_DEFAULT_OPTIONS
            transport = MessageTransport(self._inner)
            async with open_asyncio_owner(transport, options, store=self._store) as owner:
                self._adapter = SdkAdapter(owner, _InnerSource(self._inner))
                self._ready.set()
                await self._done.wait()
        except Exception as exc:
            self._failure = exc
            if not self._done.is_set():
                self._stopped(exc)
            raise
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._ready.set()

    def _stopped(self, exc: Exception) -> None:
        """The owner stopped on its own: say so once, and have the connection ended."""
        self._stopped_by_itself = True
        reason = stop_reason(exc)
        expected = isinstance(exc, StoreError | TransportBrokenError)
        logger.error(
            "the owner of an SDK connection stopped with an error; the connection is ended: %s",
            exc,
            exc_info=None if expected else exc,  # a store's or a transport's error says enough
        )
        if self.on_stopped is not None:
            self.on_stopped(reason)


def stop_reason(exc: BaseException) -> str:
    """Why a connection ends whose owner stopped with ``exc``: short (a WebSocket close reason
    holds 123 bytes), and without the error's text (it may name the store)."""
    if isinstance(exc, StoreError):
        return "the session-info owner stopped: the lifetime store failed"
    if isinstance(exc, TransportBrokenError):
        return "the session-info owner stopped: its transport broke"
    return "the session-info owner stopped"


def create_asgi_app(
    agent_factory: Callable[[Any], Any],
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
    token: str | None = None,
    on_close: Callable[[Any], Awaitable[None]] | None = None,
) -> Any:
    """The SDK's ASGI app for streamable HTTP and WebSocket, with an owner per connection.

    ``agent_factory`` is the SDK's: called with each connection's ``AgentSideConnection``,
    it returns that connection's agent (which finds its adapter with
    :func:`~agent_meta.sdk.adapter_of`). ``options`` configure every connection's owner.
    ``store`` is shared by all of them (and by every other process on it): a client that
    reconnects and resumes a session takes its lifetime over, from whichever connection held
    it (``docs/durability.md``). ``token``: every HTTP request and WebSocket upgrade must carry
    ``Authorization: Bearer <token>`` (:class:`~agent_meta.sdk._auth.BearerAuth`; refused with
    ``401`` before any ACP message is read). Serve the app with any ASGI server (uvicorn).
    Needs the ``sdk-http`` extra (``agent-client-protocol`` 0.12 with its ``http`` extra).

    A connection whose owner stops on its own (a store write failed) ends: a WebSocket is
    closed with code ``1011``, a streamable HTTP connection is removed (its SSE streams end,
    and requests naming it are answered ``404``).

    ``on_close`` is awaited with a connection's agent once the connection has closed and its
    owner written what it accepted: release the agent there (nothing else keeps it).
    """
    server = AcpServer(agent_factory)
    server._registry = _AdaptingRegistry(options, store, on_close)  # no public hook for this
    app = _EndingSockets(AcpAsgiApp(server))
    return app if token is None else BearerAuth(app, token)


_SOCKET: contextvars.ContextVar[_SocketEnd | None] = contextvars.ContextVar(
    "agent_meta_sdk_socket", default=None
)
"""The WebSocket connection being served, while the SDK's handler runs (in its own task): the
registry reads it when the handler builds the connection, synchronously, in that task."""


class _AdaptingRegistry(ConnectionRegistry):
    """The SDK's connection registry, building every connection over a :class:`RemoteConnection`
    and ending the connection when its owner stops on its own."""

    def __init__(
        self,
        options: OwnerOptions | None,
        store: LifetimeStore | None,
        on_close: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__()
        self._options = options
        self._store = store
        self._on_close = on_close
        self._removals: set[asyncio.Task[None]] = set()

    def create(self, agent_factory: Any) -> Any:
        with self._adapting() as built:
            state = super().create(agent_factory)
        self._watch(state.connection_id, built)
        return state

    def create_multiplex(self, agent_factory: Any) -> Any:
        with self._adapting() as built:
            state = super().create_multiplex(agent_factory)
        self._watch(state.connection_id, built)
        return state

    def _watch(self, connection_id: str, built: list[RemoteConnection]) -> None:
        for remote in built:  # one
            remote.on_stopped = functools.partial(self._stopped, connection_id, _SOCKET.get())

    def _stopped(self, connection_id: str, socket: _SocketEnd | None, reason: str) -> None:
        """The owner of ``connection_id`` stopped on its own: end the connection."""
        if socket is not None:  # the socket closes; the SDK's handler then removes it
            socket.end(reason)
            return
        removal = asyncio.get_running_loop().create_task(self.remove(connection_id))
        self._removals.add(removal)
        removal.add_done_callback(self._removals.discard)

    @contextlib.contextmanager
    def _adapting(self) -> Iterator[list[RemoteConnection]]:
        namespace = vars(sdk_server)  # the name ConnectionState builds its connection with
        original = namespace["AgentSideConnection"]
        options = self._options
        store = self._store
        on_close = self._on_close
        built: list[RemoteConnection] = []

        def connect(to_agent: Callable[[Any], Any], inner: Any, **kwargs: Any) -> Any:
            remote = RemoteConnection(inner, options, store=store)
            built.append(remote)

            def make_agent(connection: Any) -> Any:
                register_connection(connection, remote.adapter)
                agent = to_agent(connection)
                if on_close is not None:
                    remote.on_closed = functools.partial(on_close, agent)
                return agent

            kwargs["use_unstable_protocol"] = True
            return original(make_agent, remote, **kwargs)

        namespace["AgentSideConnection"] = connect
        try:
            yield built
        finally:
            namespace["AgentSideConnection"] = original


@final
class _EndingSockets:
    """ASGI middleware in front of the SDK's app: each WebSocket connection can be ended by the
    server (:class:`_SocketEnd`). The SDK's handler reads the socket until the client
    disconnects, and never closes it; here its reads end when its owner stopped on its own, and
    the socket is closed with :data:`CLOSE_CODE` once the handler has returned."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope.get("type") != "websocket":
            await self._app(scope, receive, send)
            return
        socket = _SocketEnd(receive)
        token = _SOCKET.set(socket)
        try:
            await self._app(scope, socket.receive, send)
        finally:
            _SOCKET.reset(token)
            client_left = await socket.stop_reading()
        if socket.reason is not None and not client_left:
            with contextlib.suppress(OSError):  # the client left meanwhile (ASGI says OSError)
                await send({"type": "websocket.close", "code": CLOSE_CODE, "reason": socket.reason})


@final
class _SocketEnd:
    """The reads of one WebSocket connection, which :meth:`end` ends: the SDK's handler is
    then told the socket disconnected (its read still waiting is cancelled by
    :meth:`stop_reading`), as if the client had left."""

    def __init__(self, receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> None:
        self._receive = receive
        self._reading: asyncio.Task[MutableMapping[str, Any]] | None = None
        self._ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._client_left = False
        self.reason: str | None = None
        """Why the server ends the connection, once it does."""

    def end(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self._ended.set_result(None)

    async def receive(self) -> MutableMapping[str, Any]:
        """The next ASGI event of the socket, or a disconnect once the connection is ended."""
        if self._reading is None:
            if self.reason is not None:
                return {"type": "websocket.disconnect", "code": CLOSE_CODE}
            self._reading = asyncio.ensure_future(self._receive())
        reading = self._reading
        await asyncio.wait((reading, self._ended), return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():  # ended: the read stays pending until stop_reading
            return {"type": "websocket.disconnect", "code": CLOSE_CODE}
        self._reading = None
        event = reading.result()
        if event.get("type") == "websocket.disconnect":
            self._client_left = True
        return event

    async def stop_reading(self) -> bool:
        """Cancel a read still waiting; whether the client left (the server must not close a
        socket the client closed)."""
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel()
            await asyncio.wait((reading,))
            if not reading.cancelled():
                if reading.exception() is None:
                    self._client_left |= reading.result().get("type") == "websocket.disconnect"
                else:
                    self._client_left = True  # the server failed to read: nothing to close
        return self._client_left
