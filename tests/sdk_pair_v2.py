"""The ACP v2 side of ``sdk_pair``: an SDK 1.0 agent on ``acp.experimental.v2`` (or on the
negotiating router) behind the adapter, and the raw client of :mod:`sdk_pair`, over OS pipes.

The agent side is what ``agent-meta agent --runtime sdk`` runs (``_serve.py``):
``v2.run_agent(agent, **adapter.connection_kwargs(), observers=[agent.observe])`` or
``AgentProtocolRouter(v1=..., v2=...).run(**adapter.connection_kwargs(), observers=[...])``.
Import it only where ``acp.experimental.v2`` exists (the SDK 1.0).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from acp.experimental import v2
from acp.experimental.negotiation import AgentProtocolRouter

from agent_meta import OwnerOptions
from agent_meta.sdk._run import connecting_v2_factory
from tests.sdk_pair import GUARD, RawClient, _pair

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from agent_meta.sdk import SdkAdapter
    from agent_meta.stores._store import LifetimeStore

V2_OPTIONS = OwnerOptions(protocol_version=2)
"""The owner's options for a v2-only agent (``agent-meta agent --runtime sdk --protocol 2``)."""


async def run_v2(
    make_agent: Callable[[SdkAdapter], Any],
    scenario: Callable[[RawClient, SdkAdapter], Awaitable[None]],
    options: OwnerOptions | None = V2_OPTIONS,
    *,
    observe: bool = True,
    max_line_bytes: int = 1 << 20,
    store: LifetimeStore | None = None,
) -> tuple[RawClient, SdkAdapter]:
    """Run ``scenario`` against a v2 SDK agent (built by ``make_agent``) behind an adapter;
    ``observe``: pass the agent's observer to the connection, as the CLI does."""

    def connect(adapter: SdkAdapter, agents: list[Any]) -> Coroutine[Any, Any, None]:
        agent = make_agent(adapter)
        agents.append(agent)
        observers = [agent.observe] if observe else []
        run: Coroutine[Any, Any, None] = v2.run_agent(
            agent, **adapter.connection_kwargs(), observers=observers
        )
        return run

    return await _run(connect, scenario, options, max_line_bytes, store)


async def run_auto(
    make_v1: Callable[[SdkAdapter], Any],
    make_v2: Callable[[SdkAdapter], Any],
    scenario: Callable[[RawClient, SdkAdapter], Awaitable[None]],
) -> tuple[RawClient, SdkAdapter]:
    """As :func:`run_v2`, with both agents behind the SDK's negotiating router (``--protocol
    auto``): the client's ``initialize`` picks one."""

    def connect(adapter: SdkAdapter, agents: list[Any]) -> Coroutine[Any, Any, None]:
        v1_agent, v2_agent = make_v1(adapter), make_v2(adapter)
        agents.extend((v1_agent, v2_agent))
        # As the reference agent builds it (1.0.0rc2's router calls no v2 on_connect itself).
        v2_factory = connecting_v2_factory(lambda _conn: v2_agent)
        router = AgentProtocolRouter(v1=lambda _conn: v1_agent, v2=v2_factory)
        run: Coroutine[Any, Any, None] = router.run(
            **adapter.connection_kwargs(), observers=[v2_agent.observe]
        )
        return run

    return await _run(connect, scenario, None, 1 << 20)


async def _run(
    connect: Callable[[SdkAdapter, list[Any]], Coroutine[Any, Any, None]],
    scenario: Callable[[RawClient, SdkAdapter], Awaitable[None]],
    options: OwnerOptions | None,
    max_line_bytes: int,
    store: LifetimeStore | None = None,
) -> tuple[RawClient, SdkAdapter]:
    agents: list[Any] = []
    paired = _pair(options, max_line_bytes, store)
    async with asyncio.timeout(GUARD), paired as (client, adapter):
        served = asyncio.create_task(connect(adapter, agents))
        try:
            await scenario(client, adapter)
            await client.close_input()
            await served
        finally:
            served.cancel()
            for agent in agents:
                await agent.aclose()
    while await client.read_one() is not None:  # what the owner wrote while draining
        pass
    for transport in client.opened:
        transport.close()
    return client, adapter
