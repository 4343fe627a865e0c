"""Serving the SDK agents on stdio: the adapter under the SDK's connection, and a clean stop.

This is the whole embedding (the "five lines" of adopting agent_meta in an SDK agent), for
ACP v1::

    async with open_stdio_adapter(options, store=store) as adapter:
        agent = SdkReferenceAgent(adapter)
        await acp.run_agent(agent, **adapter.connection_kwargs(), use_unstable_protocol=True)

for ACP v2 (SDK 1.0: ``acp.experimental.v2`` takes the agent object and no
``use_unstable_protocol``)::

        agent = SdkReferenceAgentV2(adapter)
        kwargs = adapter.connection_kwargs(versions=(2,))
        await v2.run_agent(agent, **kwargs, observers=[agent.observe])

and for either, chosen by the version the client's ``initialize`` asks for
(``acp.experimental.negotiation``, SDK 1.0)::

        router = AgentProtocolRouter(v1=lambda conn: v1_agent, v2=lambda conn: v2_agent)
        kwargs = adapter.connection_kwargs(versions=(1, 2))
        await router.run(**kwargs, observers=[v2_agent.observe])

The adapter follows the version the ``initialize`` response names; given the versions served,
it answers an ``initialize`` below them ``-32022`` (and a batch entry by entry) itself. Add
what a command-line agent needs: history in the same store (a SQLite file or PostgreSQL), and
SIGTERM / SIGINT ending the connection so that the owner still writes what it accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
from typing import TYPE_CHECKING, Any, cast

import acp

from agent_meta import OwnerOptions
from agent_meta.sdk import open_stdio_adapter

from ._agent import SdkReferenceAgent

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

    from agent_meta import LifetimeStore, PostgresStore, SQLiteStore
    from agent_meta.sdk import SdkAdapter

    from ._base import SdkAgentBase

__all__ = ["sdk_protocol_versions", "serve_sdk_agent"]

logger = logging.getLogger("agent_meta.sdk_agent")


def sdk_protocol_versions() -> tuple[int, ...]:
    """The ACP versions the installed SDK lets the agent speak: ``(1, 2)`` where it has the
    v2 API (``acp.experimental.v2``, 1.0 on), else ``(1,)``."""
    try:
        found = importlib.util.find_spec("acp.experimental.v2") is not None
    except ModuleNotFoundError:  # no acp.experimental at all
        found = False
    return (1, 2) if found else (1,)


async def serve_sdk_agent(
    options: OwnerOptions | None = None,
    *,
    protocols: tuple[int, ...] = (1,),
    store: LifetimeStore | None = None,
    history: SQLiteStore | PostgresStore | None = None,
    max_line_bytes: int | None = None,
    handle_signals: bool = False,
) -> None:
    """Serve one client on stdin and stdout until the input ends (or a signal arrives).

    ``protocols`` are the ACP versions ``initialize`` may negotiate: ``(1,)`` the v1 agent,
    ``(2,)`` the v2 agent, ``(1, 2)`` the one the client asks for (both need the SDK 1.0; see
    :func:`sdk_protocol_versions`). ``options`` are the owner's (by default protocol v1, or 2
    when only v2 is served; the owner follows what ``initialize`` answers); ``store`` keeps the
    lifetimes and ``history`` the sessions and conversation (usually the same
    :class:`~agent_meta.SQLiteStore` or :class:`~agent_meta.PostgresStore`, as with
    ``--store``). ``max_line_bytes`` bounds inbound
    lines. With ``handle_signals``, SIGTERM and SIGINT stop reading, end the connection and
    let the owner drain; a second one acts as usual.
    """
    if not protocols or not set(protocols) <= set(sdk_protocol_versions()):
        raise ValueError(f"the installed SDK serves ACP {sdk_protocol_versions()}, not {protocols}")
    if options is None:
        options = OwnerOptions(protocol_version=2 if protocols == (2,) else 1)
    extra: dict[str, Any] = {} if max_line_bytes is None else {"max_line_bytes": max_line_bytes}
    async with open_stdio_adapter(options, store=store, **extra) as adapter:
        agents: list[SdkAgentBase[Any]] = []
        serving = asyncio.ensure_future(_serving(adapter, protocols, history, agents))
        try:
            with _stop_on_signals(serving) if handle_signals else contextlib.nullcontext():
                await asyncio.wait({serving})  # a signal cancels it: not an error here
            if not serving.cancelled():
                serving.result()
        finally:
            serving.cancel()
            for agent in agents:
                await agent.aclose()


async def _serving(
    adapter: SdkAdapter,
    protocols: tuple[int, ...],
    history: SQLiteStore | PostgresStore | None,
    agents: list[SdkAgentBase[Any]],
) -> None:
    """Build the agent(s) (``agents`` gets them, to close) and run the SDK's connection."""
    v1 = await _build(SdkReferenceAgent, adapter, history) if 1 in protocols else None
    v2 = None
    if 2 in protocols:
        from ._agent_v2 import SdkReferenceAgentV2  # the SDK 1.0 only

        v2 = await _build(SdkReferenceAgentV2, adapter, history)
    agents.extend(agent for agent in (v1, v2) if agent is not None)
    await _connection(adapter, v1, v2)


def _connection(
    adapter: SdkAdapter, v1: SdkReferenceAgent | None, v2: Any
) -> Coroutine[Any, Any, None]:
    """The SDK's ``run_agent`` for the agent(s) given, over the adapter, which negotiates the
    version as the trio runtime does (``-32022`` below the versions served)."""
    served = tuple(version for version, agent in ((1, v1), (2, v2)) if agent is not None)
    kwargs = adapter.connection_kwargs(versions=served)
    if v2 is None:
        # Duck-typed, as the SDK allows: a method the agent lacks is answered -32601, where
        # a subclass of the acp.Agent Protocol would answer its stub's null.
        return acp.run_agent(cast("acp.Agent", v1), **kwargs, use_unstable_protocol=True)
    run: Coroutine[Any, Any, None]
    if v1 is None:
        from acp.experimental import v2 as acp_v2

        run = acp_v2.run_agent(v2, **kwargs, observers=[v2.observe])
        return run
    from acp.experimental.negotiation import AgentProtocolRouter

    # The router calls the factory of the version it picks with its connection, then the
    # agent's on_connect, except 1.0.0rc2's v2 side: the v2 factory hands the agent its
    # connection itself (on_connect only keeps it, so a second call changes nothing).
    # session/resume and session/close are stable v1 routes on 1.0.
    v1_agent = cast("acp.Agent", v1)

    def connected_v2(connection: Any) -> Any:
        v2.on_connect(connection)
        return v2

    router = AgentProtocolRouter(v1=lambda _conn: v1_agent, v2=connected_v2)
    run = router.run(**kwargs, observers=[v2.observe])
    return run


async def _build(
    kind: type[SdkAgentBase[Any]], adapter: SdkAdapter, history: SQLiteStore | PostgresStore | None
) -> Any:
    if history is None:
        return kind(adapter)
    return await kind.with_store(adapter, history)


@contextlib.contextmanager
def _stop_on_signals(serving: asyncio.Future[None]) -> Iterator[None]:
    """The first SIGTERM or SIGINT cancels ``serving`` (the SDK's receive loop ends quietly,
    and its handlers are cancelled); the handlers are then removed, so a second signal acts
    as it would without them."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)

    def stop(number: int) -> None:
        logger.info("signal %d: stopping", number)
        serving.cancel()
        for each in signals:
            loop.remove_signal_handler(each)

    for each in signals:
        loop.add_signal_handler(each, stop, each)
    try:
        yield
    finally:
        for each in signals:
            loop.remove_signal_handler(each)
