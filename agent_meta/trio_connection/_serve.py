"""Serving one ACP client over a pair of byte streams: :func:`serve_agent`.

It opens the connection's owner, reads NDJSON lines and hands each to the connection's
dispatcher, until the input ends; then it winds the work down and waits (bounded) until what was
accepted is written. At the end of the input stream the connection stops reading, fails the
agent's unanswered requests (:class:`~agent_meta.ConnectionClosedError`), lets the handlers in
flight finish, cancels the background tasks, waits until everything queued is written (at most
``OwnerOptions.drain_timeout`` seconds), and returns. :meth:`AgentConnection.shutdown` stops
reading at once and winds the work down within a bounded time, its last writes included. Frames
left unwritten at either bound (a client that stopped reading) make :func:`serve_agent` raise
:class:`~agent_meta.TransportBrokenError`; the frame it was in the middle of writing then stays
incomplete (a stalled pipe gives no way to finish it). Cancelling :func:`serve_agent` itself
cancels all of that at once, with the same effect on a frame being written.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Literal

import trio

from ..owner._failures import unwritten_error
from ..owner._trio import open_owner
from ..sansio._options import OwnerOptions
from ._connection import SUPPORTED_PROTOCOL_VERSIONS, AgentConnection
from ._lines import DEFAULT_MAX_LINE_BYTES, IncompleteLineError, LineTooLongError, NdjsonLineReader

if TYPE_CHECKING:
    from collections.abc import Collection

    from ..owner._transport import Transport
    from ..stores._store import LifetimeStore
    from ._agent import Agent
    from ._dispatch import Dispatcher

__all__ = ["serve_agent"]

logger = logging.getLogger("agent_meta.connection")


async def serve_agent(
    agent: Agent,
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream | Transport,
    *,
    protocol_versions: Collection[int] = SUPPORTED_PROTOCOL_VERSIONS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    options: OwnerOptions | None = None,
    store: LifetimeStore | None = None,
    task_status: trio.TaskStatus[AgentConnection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``agent`` until ``receive_stream`` ends (see the module docstring for shutdown).

    ``protocol_versions`` limits what ``initialize`` may negotiate (``(1,)``, ``(2,)`` or
    both). ``options`` and ``store`` are passed to :func:`~agent_meta.open_owner` (the
    protocol version in ``options`` is replaced by the negotiated one). Malformed input is
    answered with the JSON-RPC error it deserves and the connection goes on: ``-32700`` for a
    line that is not JSON or is longer than ``max_line_bytes``, ``-32600`` for JSON that is not
    a JSON-RPC message, except a malformed response: a response is never answered (it fails
    the agent's request it names, or is dropped). Started with ``nursery.start``, it reports the
    :class:`AgentConnection` once it serves (the module docstring says how it ends). Raises
    :class:`~agent_meta.TransportBrokenError` /
    :class:`~agent_meta.OwnerClosedError` when the output breaks, and
    :class:`~agent_meta.TransportBrokenError` when frames accepted before the end could not
    all be written within ``options.drain_timeout`` or the bound of
    :meth:`AgentConnection.shutdown` (the client stopped reading).
    """
    versions = tuple(sorted(set(protocol_versions)))
    if not versions or not set(versions) <= set(SUPPORTED_PROTOCOL_VERSIONS):
        raise ValueError(f"protocol_versions must be a non-empty subset of (1, 2): {versions!r}")
    reader = NdjsonLineReader(receive_stream, max_line_bytes=max_line_bytes)
    highest: Literal[1, 2] = 2 if versions[-1] == 2 else 1
    options = dataclasses.replace(options or OwnerOptions(), protocol_version=highest)
    stop = trio.CancelScope()  # a graceful stop's bound, the owner's last writes included
    flushed = False
    with stop:
        async with open_owner(send_stream, options, store=store) as owner:
            async with trio.open_nursery() as background:
                connection = AgentConnection(
                    owner, agent, protocol_versions=versions, stop_scope=stop
                )
                async with trio.open_nursery() as requests:
                    reading = connection.serve(background, requests)
                    task_status.started(connection)
                    with reading:
                        await _read_loop(connection.dispatcher, reader, requests)
                    connection.input_ended()
                background.cancel_scope.cancel()
            with trio.move_on_after(options.drain_timeout):
                await owner.wait_flushed()
                flushed = True
            if not flushed:  # the owner would only wait again: stop it now
                raise unwritten_error(f"within the drain timeout of {options.drain_timeout} s")
    if not flushed:
        raise unwritten_error("within the bound of the graceful stop")


async def _read_loop(
    dispatcher: Dispatcher, reader: NdjsonLineReader, nursery: trio.Nursery
) -> None:
    while True:
        try:
            line = await reader.receive_line()
        except LineTooLongError as exc:
            await dispatcher.refuse(exc)
            continue
        except IncompleteLineError as exc:
            logger.warning("%s", exc)
            await dispatcher.refuse(exc)
            return
        if line is None:
            return
        await dispatcher.dispatch_line(line, nursery)
