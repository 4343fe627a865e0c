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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any, final

import acp.http.server as sdk_server
from acp.http.asgi import AcpAsgiApp
from acp.http.server import AcpServer, ConnectionRegistry

from ..owner._asyncio import open_asyncio_owner
from ._adapter import SdkAdapter
from ._auth import BearerAuth
from ._run import register_connection
from ._stdio import SDK_DEFAULT_OPTIONS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..owner._store import LifetimeStore
    from ..sansio._options import OwnerOptions

__all__ = ["MessageTransport", "RemoteConnection", "create_asgi_app"]

logger = logging.getLogger("agent_meta.sdk")


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
    owner starts with the connection's first message and stops when the SDK closes it."""

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
                logger.exception("the owner of an SDK connection stopped with an error")
        await self._inner.close()

    async def _run(self) -> None:
        try:
            options = self._options or SDK_DEFAULT_OPTIONS
            transport = MessageTransport(self._inner)
            async with open_asyncio_owner(transport, options, store=self._store) as owner:
                self._adapter = SdkAdapter(owner, _InnerSource(self._inner))
                self._ready.set()
                await self._done.wait()
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._ready.set()


def create_asgi_app(
    agent_factory: Callable[[Any], Any],
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
    token: str | None = None,
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
    """
    server = AcpServer(agent_factory)
    server._registry = _AdaptingRegistry(options, store)  # no public hook for this
    app = AcpAsgiApp(server)
    return app if token is None else BearerAuth(app, token)


class _AdaptingRegistry(ConnectionRegistry):
    """The SDK's connection registry, building every connection over a :class:`RemoteConnection`."""

    def __init__(self, options: OwnerOptions | None, store: LifetimeStore | None) -> None:
        super().__init__()
        self._options = options
        self._store = store

    def create(self, agent_factory: Any) -> Any:
        with self._adapting():
            return super().create(agent_factory)

    def create_multiplex(self, agent_factory: Any) -> Any:
        with self._adapting():
            return super().create_multiplex(agent_factory)

    @contextlib.contextmanager
    def _adapting(self) -> Iterator[None]:
        namespace = vars(sdk_server)  # the name ConnectionState builds its connection with
        original = namespace["AgentSideConnection"]
        options = self._options
        store = self._store

        def connect(to_agent: Callable[[Any], Any], inner: Any, **kwargs: Any) -> Any:
            remote = RemoteConnection(inner, options, store=store)

            def make_agent(connection: Any) -> Any:
                register_connection(connection, remote.adapter)
                return to_agent(connection)

            kwargs["use_unstable_protocol"] = True
            return original(make_agent, remote, **kwargs)

        namespace["AgentSideConnection"] = connect
        try:
            yield
        finally:
            namespace["AgentSideConnection"] = original
