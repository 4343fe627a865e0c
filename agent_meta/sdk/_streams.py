"""The adapter at the SDK's stream seam, for the releases without a message transport.

Before 0.12, ``AgentSideConnection`` takes only an asyncio ``StreamWriter`` / ``StreamReader``
pair, and writes every message from one sender task that its ``sender_factory`` builds. Seen
at the stream, a line no longer tells which handler sent it, so the adapter does not sit there:

- :class:`SeamSender` is what the ``sender_factory`` returns. Its ``send`` is awaited by the
  task that sends the message (a handler, or the agent's own task), and hands the message to
  :meth:`SdkAdapter.send <agent_meta.sdk.SdkAdapter.send>`, as the message transport does from
  0.12 on. The writer the SDK passes it is never written to.
- :class:`SeamReader` is the ``StreamReader`` the connection reads: each line it returns is a
  message the adapter's source has already checked (bad lines are answered there).
- :func:`marking_dispatcher` builds the dispatcher those releases (and 0.12.0) start request
  handlers from: each handler's task marks itself with its request before the handler runs, so
  a ``session/load``'s replay is told from live updates, and a ``session/new``'s updates are
  kept for the lifetime it opens.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
from typing import TYPE_CHECKING, Any, final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ._adapter import SdkAdapter

__all__ = ["HANDLING", "SeamReader", "SeamSender", "marking_dispatcher"]

HANDLING: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agent_meta_sdk_handling", default=None
)
"""The token of the request the current task handles: a ``session/load``,
``session/resume``, ``session/new`` or ``session/fork`` (``None`` for any other).

It is set where the SDK starts the request's handler task: in the SDK's receive loop as
:meth:`SdkAdapter.receive <agent_meta.sdk.SdkAdapter.receive>` hands over each request
(``None`` for any other message), or, on the releases that start handlers from a dispatcher
task, at the start of the handler's own task (:func:`marking_dispatcher`). A task copies its
creator's context, so the handler (and the tasks it starts) carry their request's token, while
a background task started earlier carries what was set when it was started. What a handler
sends while its request runs is that request's (a load's replay; what a new session's lifetime
must know when it opens); what other work of the agent sends, or that handler's tasks once the
response is out, is live."""


@final
class SeamSender:
    """The SDK's message sender (what its ``sender_factory`` returns), sending through the
    adapter. Cancelling :meth:`send` queues the whole message or none of it (the owner's
    rule)."""

    def __init__(self, adapter: SdkAdapter) -> None:
        self._adapter = adapter

    async def send(self, payload: dict[str, Any]) -> None:
        await self._adapter.send(payload)

    async def close(self) -> None:
        """Nothing to stop: the owner writes what is queued when the adapter's block ends."""


@final
class SeamReader(asyncio.StreamReader):
    """The ``StreamReader`` the SDK's connection reads: one checked message per line, from the
    adapter's :meth:`~agent_meta.sdk.SdkAdapter.receive`. The SDK reads it with ``readline``
    (0.6 to 0.8) or ``readuntil`` (0.9 on); nothing else of a ``StreamReader`` is used."""

    def __init__(self, adapter: SdkAdapter) -> None:
        super().__init__()
        self._adapter = adapter
        self.ended = asyncio.Event()
        """Set once the SDK has been handed the end of the input (its receive loop stops):
        on SDK 0.6, which has no ``run_agent`` to return then, :func:`agent_meta.sdk.run_agent`
        waits for it."""

    async def readline(self) -> bytes:
        """The next message as one line; ``b""`` at the end of the input."""
        message = await self._adapter.receive()
        if message is None:
            self.ended.set()
            return b""
        # ASCII escapes keep any string (lone surrogates too) exactly as the client sent it.
        return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"

    async def readuntil(self, separator: Any = b"\n") -> bytes:
        """As :meth:`readline`; at the end of the input, ``IncompleteReadError`` with nothing
        read, as a ``StreamReader`` raises it."""
        line = await self.readline()
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        return line


def marking_dispatcher(
    admit: Callable[[Mapping[str, Any]], Awaitable[tuple[bool, int | None]]],
    built: Callable[[], None],
) -> Callable[..., Any]:
    """A ``dispatcher_factory`` for the SDK's connection: the SDK's own dispatcher, whose request
    handlers first await ``admit(message)`` and mark their task with the token it returns (see
    :data:`HANDLING`), or, when it says the request was answered already, do not run.
    Handlers start in the order the requests were read, so requests are admitted in that order
    too. ``built`` is called when the SDK builds the dispatcher, as it builds its connection:
    before it reads anything."""
    # Only the releases with a dispatcher have it (the installed one is checked by the caller).
    dispatcher_class = importlib.import_module("acp.task").DefaultMessageDispatcher

    def build(
        queue: Any,
        supervisor: Any,
        store: Any,
        request_runner: Callable[[dict[str, Any]], Awaitable[Any]],
        notification_runner: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> Any:
        built()

        async def run_request(message: dict[str, Any]) -> Any:
            admitted, token = await admit(message)
            if not admitted:
                return None
            HANDLING.set(token)
            return await request_runner(message)

        return dispatcher_class(
            queue=queue,
            supervisor=supervisor,
            store=store,
            request_runner=run_request,
            notification_runner=notification_runner,
        )

    return build
