"""``agent_meta.sdk.run_agent``: the SDK's ``acp.run_agent`` with an adapter under it.

One call that works on every supported SDK release, whichever seam it offers (see
:mod:`agent_meta.sdk._release`): it opens the adapter over stdio (or the asyncio stream pair
given), hands the SDK the arguments of its seam, and records which adapter serves the
connection, so that the agent finds it with :func:`adapter_of` (the ``conn`` its
``on_connect`` receives). ``agent-meta run`` calls it in place of ``acp.run_agent``.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any

from ._release import installed_release
from ._stdio import open_stdio_adapter, open_stream_adapter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from ..owner._store import LifetimeStore
    from ..sansio._options import OwnerOptions
    from ._adapter import SdkAdapter

__all__ = ["adapter_of", "on_connection", "register_connection", "run_agent", "sdk_run_agent"]

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
    has put its wrapper in its place)."""
    from acp import core  # the SDK is imported when it is needed

    function: Callable[..., Awaitable[None]] = core.run_agent
    return getattr(function, ORIGINAL_ATTRIBUTE, function)


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
    and ``store`` are the owner's (:func:`~agent_meta.sdk.open_stdio_adapter`).

    The agent reaches its adapter with ``await agent_meta.sdk.adapter_of(conn)``. Returns when
    the client's input ends and the owner has written what it accepted; raises
    :class:`~agent_meta.TransportBrokenError` when frames were left unwritten (a client that
    stopped reading), :class:`~agent_meta.sdk.UnsupportedSdkError` for an SDK outside the
    supported range, and ``TypeError`` for arguments that would take the writing away from the
    adapter (a ``sender_factory`` or ``dispatcher_factory`` of the agent's own).
    """
    installed_release()  # refuse an unsupported SDK before anything is opened
    clash = sorted(_ADAPTER_OWNS & connection_kwargs.keys())
    if clash:
        raise TypeError(f"agent_meta's adapter provides {', '.join(clash)}; the agent cannot")
    limit = connection_kwargs.pop("stdio_buffer_limit_bytes", None)
    limits: dict[str, Any] = {} if limit is None else {"max_line_bytes": limit}
    opening: AbstractAsyncContextManager[SdkAdapter]
    if input_stream is None and output_stream is None:
        opening = open_stdio_adapter(options, store=store, stdout=stdout, **limits)
    elif isinstance(input_stream, asyncio.StreamWriter) and isinstance(
        output_stream, asyncio.StreamReader
    ):
        opening = open_stream_adapter(output_stream, input_stream, options, store=store, **limits)
    else:
        raise TypeError(
            "agent_meta.sdk.run_agent serves stdio, or an asyncio StreamWriter (input_stream) "
            "and StreamReader (output_stream)"
        )
    async with opening as adapter:
        await sdk_run_agent()(
            _registering(agent, adapter), **adapter.connection_kwargs(), **connection_kwargs
        )


def _registering(agent: Any, adapter: SdkAdapter) -> Callable[[Any], Any]:
    """What the SDK builds the agent with: the agent (or what its factory makes), once the
    connection is recorded as the adapter's (before ``on_connect`` runs)."""

    async def found() -> SdkAdapter:
        return adapter

    def build(connection: Any) -> Any:
        register_connection(connection, found)
        for hook in _HOOKS:
            try:
                hook(adapter, connection)
            except Exception:
                logger.exception("a connection hook failed: %r", hook)
        return agent(connection) if callable(agent) else agent

    return build
