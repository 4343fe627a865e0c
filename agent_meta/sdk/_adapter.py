"""The official-SDK adapter: :class:`SdkAdapter`, the SDK's message transport with an asyncio
owner as the only writer.

The official ACP Python SDK (``agent-client-protocol``, import ``acp``) sends every message of a
connection through one seam: an object with ``async send(dict)``, ``async receive()`` and
``async close()`` (``acp.run_agent(agent, input_stream=<it>)``). An :class:`SdkAdapter` is such
an object. Every message the SDK sends goes through the owner's FIFO (R2): responses,
notifications and agent-to-client requests alike. What the lifetimes need around those messages
(open on ``session/new``, resync before a ``session/load`` or ``session/resume`` response, end on
``session/close``, the negotiated version) is planned by the sans-IO
:class:`~agent_meta.sansio._seam.LifetimeTracker`; this module carries the plan out.

Cancellation: :meth:`SdkAdapter.send` is the owner's call underneath, so a cancelled send either
queued its whole message or nothing of it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Protocol, final

from ..core._errors import MetaValueError, UnknownSessionError
from ..sansio._seam import LifetimeStep, LifetimeTracker, OutboundPlan

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..owner._asyncio import AsyncioMetaOwner
    from ..owner._base import OwnerStatistics
    from ..owner._lifetime import SessionLifetime
    from ..owner._threadsafe import ThreadsafeOwner

__all__ = ["AdapterStatistics", "MessageSource", "SdkAdapter"]

logger = logging.getLogger("agent_meta.sdk")

_replaying: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agent_meta_sdk_replaying", default=None
)
"""The replay token of the ``session/load`` or ``session/resume`` the current task handles.

:meth:`SdkAdapter.receive` sets it in the SDK's receive loop as it hands over each request
(``None`` for any other message); the SDK starts the request's handler task right after, and a
task copies its creator's context, so the handler (and the tasks it starts) carry their
request's token, while a background task started earlier carries what was set when it was
started. What a handler sends while its request runs is replay; what other work of the agent
sends, or that handler's tasks once the response is out, is live."""


class MessageSource(Protocol):
    """Where an adapter reads the client's messages from: the NDJSON reader of a stdio pipe,
    or the SDK's own in-memory transport under its HTTP and WebSocket servers."""

    async def receive(self) -> dict[str, Any] | None:
        """The next message from the client; ``None`` once the input has ended."""
        ...

    async def close(self) -> None:
        """Stop reading (the SDK calls it once, when the connection ends)."""
        ...


@final
@dataclasses.dataclass(frozen=True, slots=True)
class AdapterStatistics:
    """A snapshot of an adapter's counters, with its owner's."""

    owner: OwnerStatistics
    """The owner's counters (frames written, fenced, coalesced ...)."""
    absorbed_updates: int
    """``session_info_update`` messages the SDK sent that became publications on a lifetime."""
    passed_through_updates: int
    """``session_info_update`` messages written unchanged because no lifetime was open for their
    session (say, sent while ``session/new`` was still running) or because they carried fields
    the owner does not know; they still go through the FIFO and are fenced after a close."""
    replayed_updates: int
    """``session_info_update`` messages a ``session/load`` or ``session/resume`` handler sent
    (from its own task, or a task it started) for a lifetime that already held its state:
    written unchanged as replay, not folded (the resync that follows restores the state on the
    client). Updates other tasks send meanwhile are live and absorbed."""
    refused_lines: int
    """Inbound lines answered with an error instead of reaching the SDK (not JSON, too long,
    not a JSON-RPC message)."""


@final
class SdkAdapter:
    """The official SDK's transport for one connection; the owner writes, the SDK is unchanged.

    Pass it as ``input_stream`` to ``acp.run_agent`` (or ``acp.AgentSideConnection``). Get one
    from :func:`~agent_meta.sdk.open_stdio_adapter` (or
    :func:`~agent_meta.sdk.open_stream_adapter`); under the SDK's HTTP and WebSocket servers,
    :func:`~agent_meta.sdk.create_asgi_app` makes one per connection.

    What the SDK cannot express goes through :meth:`lifetime`: ``publish(meta=None)`` clears
    ``_meta``, ``publish(title=None)`` clears the title, ``domain(key)`` edits inside one key,
    ``report_failure`` / ``resolve_failure`` keep failure incidents (R7, R8).
    """

    def __init__(self, owner: AsyncioMetaOwner, source: MessageSource) -> None:
        self._owner = owner
        self._source = source
        self._tracker = LifetimeTracker()
        self.refused_lines = 0
        """Inbound lines the source answered with an error (see :class:`AdapterStatistics`)."""

    @property
    def owner(self) -> AsyncioMetaOwner:
        """The connection's owner: every lifetime, statistics, raw frames."""
        return self._owner

    @property
    def threadsafe(self) -> ThreadsafeOwner:
        """The owner's calls for worker threads (:class:`~agent_meta.ThreadsafeOwner`)."""
        return self._owner.threadsafe

    def lifetime(self, session_id: str) -> SessionLifetime:
        """The open lifetime of ``session_id``: the handle for what the SDK cannot say.

        Lifetimes open when the SDK answers ``session/new`` (or ``session/fork``), and when a
        ``session/load`` or ``session/resume`` arrives (a stored one is restored). Raises
        :class:`~agent_meta.UnknownSessionError` when none is open.
        """
        return self._owner.lifetime(session_id)

    def statistics(self) -> AdapterStatistics:
        """The adapter's counters and its owner's."""
        tracked = self._tracker.statistics
        return AdapterStatistics(
            owner=self._owner.statistics(),
            absorbed_updates=tracked.absorbed_updates,
            passed_through_updates=tracked.passed_through_updates,
            replayed_updates=tracked.replayed_updates,
            refused_lines=self.refused_lines,
        )

    # -- the SDK's transport ---------------------------------------------------------------
    async def receive(self) -> dict[str, Any] | None:
        """The next message from the client, for the SDK. A ``session/load`` or
        ``session/resume`` opens its session's lifetime before the SDK sees it, so that the
        history its handler replays is part of the lifetime."""
        message = await self._source.receive()
        if message is None:
            return None
        replay = self._tracker.inbound(message, self._lifetime_exists)
        _replaying.set(None if replay is None else replay.token)  # for the handler task next
        if replay is not None and not self._owner.has_lifetime(replay.session_id):
            self._owner.open_lifetime(replay.session_id)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        """Queue one message of the SDK through the owner.

        A ``session_info_update`` for a session with an open lifetime is published on it (its
        fields join the known state, R1); every other message is written as it is, after what
        was queued before it (R2). Raises :class:`~agent_meta.MetaValueError` for a message that
        is not JSON-RPC or not JSON, and :class:`~agent_meta.UnknownSessionError` for a request
        to the client about a session whose lifetime has ended (it would never be answered).
        """
        plan = self._tracker.outbound(message, self._owner.has_lifetime, replaying=_replaying.get())
        self._prepare(plan)
        update = plan.update
        if update is not None and plan.session_id is not None:
            await self._owner.lifetime(plan.session_id).publish(
                title=update.title,  # type: ignore[arg-type]  # checked by the owner (R12)
                updated_at=update.updated_at,  # type: ignore[arg-type]
                meta=update.meta,  # type: ignore[arg-type]
                notification_meta=update.notification_meta,
            )
            return
        await self._write(message, plan)

    async def close(self) -> None:
        """Stop reading the client. The owner keeps running until its block ends, so what was
        queued is still written."""
        await self._source.close()

    # -- internals -------------------------------------------------------------------------
    def _lifetime_exists(self, session_id: str) -> bool:
        return self._owner.has_lifetime(session_id) or self._owner.has_stored_lifetime(session_id)

    def _prepare(self, plan: OutboundPlan) -> None:
        """What must happen before the message is queued: the version, a lifetime step."""
        if plan.protocol_version is not None:
            try:
                self._owner.set_protocol_version(plan.protocol_version)
            except RuntimeError:
                logger.warning(
                    "initialize answered protocol %d after a session opened; frames stay v%d",
                    plan.protocol_version,
                    self._owner.protocol_version,
                )
        session_id = plan.session_id
        if plan.step is None or session_id is None:
            return
        owner = self._owner
        if plan.step is LifetimeStep.OPEN:
            if not owner.has_lifetime(session_id):
                owner.open_lifetime(session_id)
        elif plan.step is LifetimeStep.RESYNC:
            if owner.has_lifetime(session_id):
                owner.lifetime(session_id).resync()
        elif owner.has_lifetime(session_id):  # LifetimeStep.CLOSE or DISCARD
            owner.close_lifetime(session_id)

    async def _write(self, message: Mapping[str, Any], plan: OutboundPlan) -> None:
        owner = self._owner
        method = message.get("method")
        params = message.get("params")
        if method is not None:
            if "id" not in message:
                await owner.send_notification(method, params)
            elif not await owner.send_request(message["id"], method, params):
                raise UnknownSessionError(f"session {plan.session_id!r} has ended")
        elif "error" in message:
            await owner.send_response(message.get("id"), error=message["error"])
        elif "result" in message:
            await owner.send_response(message.get("id"), result=message["result"])
        else:
            raise MetaValueError("not a JSON-RPC message: no method, result or error")
