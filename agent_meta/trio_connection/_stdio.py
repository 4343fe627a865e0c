"""Serving the agent on this process's stdin and stdout, with signals: :func:`serve_stdio`,
:func:`run_stdio_agent`."""

from __future__ import annotations

import functools
import logging
import os
import signal
from typing import TYPE_CHECKING

import trio

from ._connection import SUPPORTED_PROTOCOL_VERSIONS, AgentConnection
from ._lines import DEFAULT_MAX_LINE_BYTES
from ._serve import serve_agent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection

    from ..sansio._options import OwnerOptions
    from ..stores._store import LifetimeStore
    from ._agent import Agent

__all__ = ["run_stdio_agent", "serve_stdio"]

logger = logging.getLogger("agent_meta.connection")


async def serve_stdio(
    agent: Agent,
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    handle_signals: bool = False,
) -> None:
    """:func:`serve_agent` over this process's stdin and stdout (which then carry only ACP).

    Duplicates of the file descriptors are used, so closing the streams leaves ``sys.stdin``
    and ``sys.stdout`` usable; log to stderr. With ``handle_signals``, the first SIGTERM or
    SIGINT stops the agent gracefully (:meth:`AgentConnection.shutdown`: it returns within a
    bounded time, having written what was accepted) and a second one ends the process at once.
    """
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    serve = functools.partial(
        serve_agent,
        agent,
        stdin,
        stdout,
        protocol_versions=protocol_versions,
        max_line_bytes=max_line_bytes,
        options=options,
        store=store,
    )
    async with stdin, stdout:
        if not handle_signals:
            await serve()
            return
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:

                async def serve_then_stop_watching(
                    *, task_status: trio.TaskStatus[AgentConnection] = trio.TASK_STATUS_IGNORED
                ) -> None:
                    try:
                        await serve(task_status=task_status)
                    finally:
                        nursery.cancel_scope.cancel()  # the signal watcher's work is over

                connection = await nursery.start(serve_then_stop_watching)
                nursery.start_soon(_stop_on_signals, connection, signals)


async def _stop_on_signals(connection: AgentConnection, signals: AsyncIterator[int]) -> None:
    stopping = False
    async for signum in signals:
        if stopping:
            logger.warning("signal %d again: exiting at once", signum)
            os._exit(128 + signum)
        logger.warning("signal %d: stopping (send it again to exit at once)", signum)
        stopping = True
        connection.shutdown()


def run_stdio_agent(
    agent_factory: Callable[[], Agent],
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    handle_signals: bool = True,
) -> None:
    """Run the agent made by ``agent_factory`` on stdio until stdin ends (own trio run).

    SIGTERM and SIGINT stop it gracefully (see :func:`serve_stdio`) unless ``handle_signals``
    is false.
    """

    async def main() -> None:
        await serve_stdio(
            agent_factory(),
            protocol_versions=protocol_versions,
            max_line_bytes=max_line_bytes,
            options=options,
            store=store,
            handle_signals=handle_signals,
        )

    trio.run(main)
