"""Serving the SDK agent on stdio: the adapter under ``acp.run_agent``, and a clean stop.

This is the whole embedding (the "five lines" of adopting agent_meta in an SDK agent)::

    async with open_stdio_adapter(options, store=store) as adapter:
        agent = SdkReferenceAgent(adapter)
        await acp.run_agent(agent, **adapter.connection_kwargs(), use_unstable_protocol=True)

plus what a command-line agent needs: history in the same SQLite file, and SIGTERM / SIGINT
ending the connection so that the owner still writes what it accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import TYPE_CHECKING, Any, cast

import acp

from agent_meta import OwnerOptions
from agent_meta.sdk import open_stdio_adapter

from ._agent import SdkReferenceAgent

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_meta import LifetimeStore, SQLiteStore

__all__ = ["serve_sdk_agent"]

logger = logging.getLogger("agent_meta.sdk_agent")


async def serve_sdk_agent(
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
    history: SQLiteStore | None = None,
    max_line_bytes: int | None = None,
    handle_signals: bool = False,
) -> None:
    """Serve one client on stdin and stdout until the input ends (or a signal arrives).

    ``options`` are the owner's (protocol v1: the SDK 0.12 speaks nothing else); ``store``
    keeps the lifetimes and ``history`` the sessions and conversation (usually the same
    :class:`~agent_meta.SQLiteStore`, as with ``--store``). ``max_line_bytes`` bounds inbound
    lines. With ``handle_signals``, SIGTERM and SIGINT stop reading, end the connection and
    let the owner drain; a second one acts as usual.
    """
    if options is None:
        options = OwnerOptions(protocol_version=1)
    extra: dict[str, Any] = {} if max_line_bytes is None else {"max_line_bytes": max_line_bytes}
    async with open_stdio_adapter(options, store=store, **extra) as adapter:
        if history is None:
            agent = SdkReferenceAgent(adapter)
        else:
            agent = await SdkReferenceAgent.with_store(adapter, history)
        serving = asyncio.ensure_future(
            # Duck-typed, as the SDK allows: a method the agent lacks is answered -32601,
            # where a subclass of the acp.Agent Protocol would answer its stub's null.
            acp.run_agent(
                cast("acp.Agent", agent),
                **adapter.connection_kwargs(),
                use_unstable_protocol=True,
            )
        )
        try:
            with _stop_on_signals(serving) if handle_signals else contextlib.nullcontext():
                await asyncio.wait({serving})  # a signal cancels it: not an error here
            if not serving.cancelled():
                serving.result()
        finally:
            serving.cancel()
            await agent.aclose()


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
