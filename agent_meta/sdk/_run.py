"""The SDK's entry points with an adapter under them: ``agent_meta.sdk.run_agent`` for
``acp.run_agent``, :func:`run_v2_agent` for ``acp.experimental.v2.run_agent`` and
:func:`serve_router` for ``AgentProtocolRouter.run``.

Each works on every supported SDK release that has the entry point, whichever seam it offers
(see :mod:`agent_meta.sdk._release`): it opens the adapter over stdio (or the asyncio stream
pair given), hands the SDK the arguments of its seam, and records which adapter serves the
connection, so that the agent finds it with :func:`adapter_of` (the ``conn`` its
``on_connect`` receives). ``agent-meta run`` calls them in place of the SDK's. On SDK 0.6,
which has no ``run_agent``, :func:`run_agent` builds the connection as 0.6 agents do
(``AgentSideConnection(factory, writer, reader)``) and returns when the SDK has been handed the
end of the input, as ``run_agent`` does on later releases.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from typing import TYPE_CHECKING, Any, cast

from ._release import UnsupportedSdkError, installed_release
from ._stdio import open_stdio_adapter, open_stream_adapter
from ._streams import SeamReader

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from ..sansio._options import OwnerOptions
    from ..stores._store import LifetimeStore
    from ._adapter import SdkAdapter

__all__ = [
    "adapter_of",
    "connecting_v2_factory",
    "on_connection",
    "register_connection",
    "run_agent",
    "run_connection",
    "run_v2_agent",
    "sdk_connection_class",
    "sdk_run_agent",
    "serve_router",
]

logger = logging.getLogger("agent_meta.sdk")

_HOOKS: list[Callable[[SdkAdapter, Any], None]] = []

_CONNECTIONS: weakref.WeakKeyDictionary[Any, Callable[[], Awaitable[SdkAdapter]]] = (
    weakref.WeakKeyDictionary()
)

_ADAPTER_OWNS = frozenset({"sender_factory", "dispatcher_factory"})

ORIGINAL_ATTRIBUTE = "__agent_meta_original__"
"""The attribute of a wrapped ``acp.run_agent`` that holds the SDK's own function."""


def register_connection(connection: object, adapter: Callable[[], Awaitable[SdkAdapter]]) -> None:
    """Record how to reach the adapter of an SDK ``connection`` (see :func:`adapter_of`)."""
    _CONNECTIONS[connection] = adapter


async def adapter_of(connection: object) -> SdkAdapter:
    """The adapter under an ``AgentSideConnection`` (the ``conn`` an agent's ``on_connect``
    or ``agent_factory`` receives), for its lifetime handles: a connection started by
    :func:`run_agent` (and so by ``agent-meta run``) or made by
    :func:`~agent_meta.sdk.create_asgi_app`. Raises ``KeyError`` for any other."""
    return await _CONNECTIONS[connection]()


def on_connection(hook: Callable[[SdkAdapter, Any], None]) -> Callable[[], None]:
    """Call ``hook(adapter, connection)`` for every connection :func:`run_agent` starts (and so
    every connection of an agent under ``agent-meta run``), as the SDK builds it, before the
    agent's ``on_connect``. Returns a function that removes the hook.

    This is how an extension publishes into an agent it did not write: load it with
    ``agent-meta run --import MODULE``, and keep the adapter to reach the lifetimes
    (``adapter.lifetime(sid)``, ``adapter.threadsafe``) once they open. A hook that raises is
    logged; the connection goes on.
    """
    _HOOKS.append(hook)

    def remove() -> None:
        if hook in _HOOKS:
            _HOOKS.remove(hook)

    return remove


def sdk_run_agent() -> Callable[..., Awaitable[None]]:
    """The SDK's own ``run_agent`` (the one ``acp.core`` defines, even where ``agent-meta run``
    has put its wrapper in its place). SDK 0.6 has none: :func:`run_connection` serves there."""
    from acp import core  # the SDK is imported when it is needed

    function: Callable[..., Awaitable[None]] = core.run_agent
    return getattr(function, ORIGINAL_ATTRIBUTE, function)


def sdk_connection_class() -> Callable[..., Any]:
    """The SDK's own ``AgentSideConnection`` (even where ``agent-meta run`` has put its own
    class in its place, on SDK 0.6)."""
    from acp.agent import connection  # the SDK is imported when it is needed

    found: Callable[..., Any] = connection.AgentSideConnection
    return getattr(found, ORIGINAL_ATTRIBUTE, found)


async def run_agent(
    agent: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    stdout: int | None = None,
    **connection_kwargs: Any,
) -> None:
    """``acp.run_agent``, with an agent_meta adapter as the connection's only writer.

    A drop-in for the SDK's function on every supported release: ``agent`` (an agent, or a
    callable that builds one from the connection), the streams and ``connection_kwargs``
    (``use_unstable_protocol``, ``observers`` ...) mean what they mean there. Without
    streams it serves stdio (``stdout``: a file descriptor to write instead of stdout); with
    an asyncio ``StreamWriter`` (``input_stream``) and ``StreamReader`` (``output_stream``) it
    serves them. ``stdio_buffer_limit_bytes`` bounds inbound lines as in the SDK. ``options``
    and ``store`` are the owner's (:func:`~agent_meta.sdk.open_stdio_adapter`). SDK 0.6 has
    no ``run_agent``: there it builds ``AgentSideConnection(agent, ...)`` as 0.6 agents do
    (``agent`` is then called with the connection, and its handlers are 0.6's camelCase ones).

    The agent reaches its adapter with ``await agent_meta.sdk.adapter_of(conn)``. Returns when
    the client's input ends and the owner has written what it accepted; requests still running
    then are answered first (the SDK alone would cancel them), for up to the owner's
    ``drain_timeout``, which is unbounded by default (docs/sdk.md). Raises
    :class:`~agent_meta.TransportBrokenError` when frames were left unwritten (a client that
    stopped reading), :class:`~agent_meta.sdk.UnsupportedSdkError` for an SDK outside the
    supported range, and ``TypeError`` for arguments that would take the writing away from the
    adapter (a ``sender_factory`` or ``dispatcher_factory`` of the agent's own).
    """
    await run_connection(
        None,
        agent,
        input_stream,
        output_stream,
        options=options,
        store=store,
        stdout=stdout,
        **connection_kwargs,
    )


async def run_connection(
    connect: Callable[..., Any] | None,
    agent: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    stdout: int | None = None,
    **connection_kwargs: Any,
) -> None:
    """:func:`run_agent`, the SDK's connection built by ``connect`` (called as the SDK's
    ``AgentSideConnection``, it returns the connection, listening) instead of by the SDK's
    ``run_agent``. ``None`` is the SDK's own ``run_agent`` where it has one, else its
    ``AgentSideConnection``. ``agent-meta run`` passes the agent's own connection object on SDK
    0.6, where agents build it themselves.

    A connection built this way listens from its constructor, as on SDK 0.6: this returns when
    the SDK has been handed the end of the input, closing the connection, as ``run_agent`` does
    on 0.12. 0.6 routes nothing unstable, so ``use_unstable_protocol`` is not passed on there.
    """
    release = installed_release()  # refuse an unsupported SDK before anything is opened
    opening = _opening(input_stream, output_stream, options, store, stdout, connection_kwargs)
    async with opening as adapter:
        factory = _registering(agent if callable(agent) else _returning(agent), adapter)
        kwargs = {**adapter.connection_kwargs(), **connection_kwargs}
        if connect is None and release.runs_agent:
            await sdk_run_agent()(factory, **kwargs)
            return
        if not release.runs_agent:
            kwargs.pop("use_unstable_protocol", None)
        await _listen(connect or sdk_connection_class(), factory, kwargs)


async def _listen(connect: Callable[..., Any], factory: Any, kwargs: dict[str, Any]) -> None:
    """Build the connection over the adapter's seam and wait until the SDK has been handed the
    end of the input (the connection reads from its constructor on), then close it."""
    reader = kwargs.pop("output_stream", None)
    if not isinstance(reader, SeamReader):  # a message transport: a release that has run_agent
        raise UnsupportedSdkError(
            f"agent-client-protocol {installed_release().version}: a connection built by the "
            "agent is served through agent_meta only at the stream seam (SDK 0.6 to 0.11)"
        )
    connection = connect(factory, kwargs.pop("input_stream"), reader, **kwargs)
    try:
        await reader.ended.wait()
    finally:
        await asyncio.shield(connection.close())


async def run_v2_agent(
    agent: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    stdout: int | None = None,
    **connection_kwargs: Any,
) -> None:
    """``acp.experimental.v2.run_agent`` (SDK 1.0 on), with an agent_meta adapter as the
    connection's only writer; the arguments are those of :func:`run_agent`, and ``agent`` is
    the v2 agent object (the SDK's v2 side takes no factory).

    It is served through the SDK's own ``AgentProtocolRouter`` with that one agent, which
    gives the connection to the agent as ``run_agent`` does (``on_connect``) while letting the
    adapter record it first. The adapter negotiates as ACP says: an ``initialize`` asking for
    v1 is answered ``-32022``, one asking for more than v2 gets v2 (the SDK alone answers
    ``-32602`` to both). Raises :class:`~agent_meta.sdk.UnsupportedSdkError` on an SDK
    without a v2 side.
    """
    await serve_router(
        None,
        input_stream,
        output_stream,
        v2=_returning(agent),
        options=options,
        store=store,
        stdout=stdout,
        **connection_kwargs,
    )


async def serve_router(
    router: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    v1: Callable[[Any], Any] | None = None,
    v2: Callable[[Any], Any] | None = None,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    stdout: int | None = None,
    **connection_kwargs: Any,
) -> None:
    """``router.run(...)`` for an ``acp.experimental.negotiation.AgentProtocolRouter`` (SDK
    1.0 on), with an agent_meta adapter as the connection's only writer; the other arguments
    are those of :func:`run_agent`. ``router`` may be ``None`` with the ``v1`` and ``v2``
    agent factories given instead (a router's own are used otherwise).

    The adapter renders for the version the router picks, and answers an ``initialize`` below
    every version the router serves with ``-32022``. Raises
    :class:`~agent_meta.sdk.UnsupportedSdkError` on an SDK without the router.
    """
    release = installed_release()
    if not release.v2:
        raise UnsupportedSdkError(
            f"agent-client-protocol {release.version} has no ACP v2 side or protocol router "
            "(1.0 on)"
        )
    from acp.experimental.negotiation import AgentProtocolRouter

    if router is not None:
        v1, v2 = _factories_of(router)
    versions = tuple(version for version, given in ((1, v1), (2, v2)) if given is not None)
    if not versions:
        raise ValueError("serve_router needs a router, or a v1 or v2 agent factory")
    opening = _opening(input_stream, output_stream, options, store, stdout, connection_kwargs)
    async with opening as adapter:
        if v2 is not None:
            v2 = connecting_v2_factory(v2)
        served = AgentProtocolRouter(
            v1=None if v1 is None else _registering(v1, adapter),
            v2=None if v2 is None else _registering(v2, adapter),
        )
        run = getattr(AgentProtocolRouter.run, ORIGINAL_ATTRIBUTE, AgentProtocolRouter.run)
        await run(served, **adapter.connection_kwargs(versions=versions), **connection_kwargs)


@functools.cache
def _v2_attach_connects() -> bool:
    """Whether the SDK's v2 ``AgentSideConnection.attach``, which ``AgentProtocolRouter`` builds
    the v2 agent with, hands the agent its connection (``on_connect``) as the v2 ``run_agent``
    does. 1.0.0rc2's does not (rc3's does): found by attaching a probe agent to no connection,
    which only builds objects."""
    from acp.experimental.v2.agent import AgentSideConnection

    connected: list[object] = []

    class Probe:
        def on_connect(self, connection: object) -> None:
            connected.append(connection)

    AgentSideConnection.attach(lambda _connection: Probe(), cast("Any", None))
    return bool(connected)


def connecting_v2_factory(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A v2 agent factory for ``AgentProtocolRouter`` that hands the agent its connection
    (``on_connect``) as the SDK's own v2 ``run_agent`` does: ``factory`` itself where the
    router's v2 side calls ``on_connect`` (1.0.0rc3 on), else ``factory`` then ``on_connect``
    (1.0.0rc2's router does not call it)."""
    if _v2_attach_connects():
        return factory

    def build(connection: Any) -> Any:
        agent = factory(connection)
        on_connect = getattr(agent, "on_connect", None)
        if on_connect is not None:
            on_connect(connection)
        return agent

    return build


def _factories_of(router: Any) -> tuple[Any, Any]:
    """A router's v1 and v2 agent factories (the SDK keeps them as ``_v1`` and ``_v2``)."""
    try:
        return router._v1, router._v2
    except AttributeError:
        raise UnsupportedSdkError(
            f"cannot find the agent factories of {router!r}: an AgentProtocolRouter of "
            f"agent-client-protocol {installed_release().version} keeps them elsewhere; pass "
            "v1= and v2= to agent_meta.sdk.serve_router instead"
        ) from None


def _opening(
    input_stream: Any,
    output_stream: Any,
    options: OwnerOptions | None,
    store: LifetimeStore | None,
    stdout: int | None,
    connection_kwargs: dict[str, Any],
) -> AbstractAsyncContextManager[SdkAdapter]:
    """The adapter for the streams an SDK entry point was given (stdio without any); takes
    ``stdio_buffer_limit_bytes`` out of ``connection_kwargs``."""
    clash = sorted(_ADAPTER_OWNS & connection_kwargs.keys())
    if clash:
        raise TypeError(f"agent_meta's adapter provides {', '.join(clash)}; the agent cannot")
    limit = connection_kwargs.pop("stdio_buffer_limit_bytes", None)
    limits: dict[str, Any] = {} if limit is None else {"max_line_bytes": limit}
    if input_stream is None and output_stream is None:
        return open_stdio_adapter(options, store=store, stdout=stdout, **limits)
    if isinstance(input_stream, asyncio.StreamWriter) and isinstance(
        output_stream, asyncio.StreamReader
    ):
        return open_stream_adapter(output_stream, input_stream, options, store=store, **limits)
    raise TypeError(
        "agent_meta.sdk serves stdio, or an asyncio StreamWriter (input_stream) and "
        "StreamReader (output_stream)"
    )


def _returning(agent: Any) -> Callable[[Any], Any]:
    """A factory that gives ``agent`` whatever the connection."""

    def factory(_connection: Any) -> Any:
        return agent

    return factory


def _registering(factory: Callable[[Any], Any], adapter: SdkAdapter) -> Callable[[Any], Any]:
    """What the SDK builds the agent with: what ``factory`` makes, once the connection is
    recorded as the adapter's and the hooks have seen it (before ``on_connect`` runs)."""

    async def found() -> SdkAdapter:
        return adapter

    def build(connection: Any) -> Any:
        register_connection(connection, found)
        for hook in _HOOKS:
            try:
                hook(adapter, connection)
            except Exception:
                logger.exception("a connection hook failed: %r", hook)
        return factory(connection)

    return build
