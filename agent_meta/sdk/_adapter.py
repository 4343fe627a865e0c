"""The official-SDK adapter: :class:`SdkAdapter`, the SDK's message transport with an asyncio
owner as the only writer.

The official ACP Python SDK (``agent-client-protocol``, import ``acp``) sends every message of a
connection through one seam: from 0.12 on, an object with ``async send(dict)``, ``async
receive()`` and ``async close()`` (``acp.run_agent(agent, input_stream=<it>)``); before, the
connection's ``sender_factory`` over asyncio streams (:mod:`agent_meta.sdk._streams`). An
:class:`SdkAdapter` serves either (:meth:`SdkAdapter.connection_kwargs` picks the one of the
installed release, see :mod:`agent_meta.sdk._release`). Every message the SDK sends goes
through the owner's FIFO (R2): responses, notifications and agent-to-client requests alike.
What the lifetimes need around those messages (open on ``session/new``, resync before a
``session/load`` or ``session/resume`` response, end on ``session/close``, the negotiated
version) is decided by the connection's :class:`~agent_meta.owner._shell.ConnectionShell`, as
for agent_meta's own connection and ``agent-meta own``; this module carries it out.
``session/set_title``, which the SDK has no method for, is answered by the adapter before the
SDK sees it, and the SDK's ``initialize`` and ``session/list`` results are rewritten to
advertise it and to list the client's titles (R13, the shell's title rule).

Cancellation: :meth:`SdkAdapter.send` is the owner's call underneath, so a cancelled send either
queued its whole message or nothing of it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
from typing import TYPE_CHECKING, Any, Protocol, final

from ..core._errors import FrameTooLargeError, MetaValueError, UnknownSessionError
from ..owner._shell import ConnectionShell
from ._release import SdkRelease, UnsupportedSdkError, installed_release
from ._streams import HANDLING, SeamReader, SeamSender, marking_dispatcher

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..owner._asyncio import AsyncioMetaOwner
    from ..owner._lifetime import SessionLifetime
    from ..owner._statistics import OwnerStatistics
    from ..owner._threadsafe import ThreadsafeOwner
    from ..sansio.inbound._gate import Answer, InboundGate, Undecodable
    from ..sansio.inbound._marks import InfoUpdate
    from ..sansio.inbound._tracker import OutboundPlan

__all__ = ["AdapterStatistics", "MessageSource", "SdkAdapter"]

logger = logging.getLogger("agent_meta.sdk")


class MessageSource(Protocol):
    """Where an adapter reads the client's messages from: the NDJSON reader of a stdio pipe,
    or the SDK's own in-memory transport under its HTTP and WebSocket servers."""

    async def receive(
        self,
    ) -> dict[str, Any] | Sequence[dict[str, Any] | Undecodable] | Undecodable | None:
        """The next message from the client, or the entries of a batch (each a message, or
        what makes an entry no message), or what makes a line no message (a
        :class:`~agent_meta.wire.MessageDecodeError`: the adapter answers it); ``None`` once
        the input has ended."""
        ...

    async def close(self) -> None:
        """Stop reading (the SDK calls it once, when the connection ends)."""
        ...


@final
@dataclasses.dataclass(frozen=True, slots=True)
class AdapterStatistics:
    """A snapshot of an adapter's counters, with its owner's: every counter of its lifetime
    tracker (:class:`~agent_meta.sansio.inbound._tracker.TrackerStatistics`) and of its inbound gate
    (:class:`~agent_meta.sansio.inbound._gate.GateStatistics`), by the same names."""

    owner: OwnerStatistics
    """The owner's counters (frames written, fenced, coalesced ...)."""
    absorbed_updates: int
    """``session_info_update`` messages the SDK sent that became publications on a lifetime."""
    refused_updates: int
    """``session_info_update`` messages the owner refused as publications (over the frame
    limit, say): logged, counted, and never raised into the agent's ``session_update``."""
    dropped_fields: int
    """Fields left out of absorbed updates because the negotiated version cannot carry them:
    an ``updatedAt`` without a UTC offset under ACP v2 (the rest of the update is published)."""
    passed_through_updates: int
    """``session_info_update`` messages written unchanged because no lifetime was open for their
    session (and no ``session/new`` or ``session/fork`` handler was opening it) or because
    they carried fields the owner does not know; they still go through the FIFO and are fenced
    after a close."""
    replayed_updates: int
    """``session_info_update`` messages a ``session/load`` or ``session/resume`` handler sent
    (from its own task, or a task it started) for a lifetime that already held its state:
    written unchanged as replay, not folded (the resync that follows restores the state on the
    client). Updates other tasks send meanwhile, and the agent's current info (a newer
    ``updatedAt``), are live and absorbed."""
    seeded_updates: int
    """``session_info_update`` messages written unchanged and kept for a lifetime's known state:
    a ``session/new`` or ``session/fork`` handler sent them before its response opened the
    lifetime (known as it opens), or a load or resume that opened the lifetime with nothing
    known replayed them (known, beneath what was published meanwhile, at its response)."""
    forgotten_requests: int
    """Requests the tracker remembered for their response and dropped unanswered, to stay
    within its bound (4096 at a time)."""
    refused_lines: int
    """Inbound lines and batch entries that are no JSON-RPC message (not JSON, too long, not a
    message), kept from the SDK: answered with an error, unless shaped like a response."""
    refused_requests: int
    """Requests the adapter answered with an error as ACP says, where the SDK would have
    served them (before ``initialize``, an id already in flight, a version the runtime does
    not serve ...): see :mod:`agent_meta.sansio.inbound._gate`."""
    ignored_notifications: int
    """Notifications kept from the SDK: array params, a ``$/cancel_request`` of no request
    still unanswered (or, before 1.0, of one that is no prompt), a ``session/cancel`` whose
    ``sessionId`` is no string."""
    replaced_responses: int
    """Responses of the SDK that could not be sent as they were, and went out as ``-32603`` (a
    result not JSON or over the frame limit) or without their error's ``data``."""
    completed_params: int
    """Requests passed to the SDK with a field it requires filled in (``mcpServers: []``)."""
    translated_cancels: int
    """``$/cancel_request`` notifications for a running prompt passed on as ``session/cancel``
    (releases before 1.0, whose connection ignores ``$/cancel_request``)."""
    batches: int
    """JSON-RPC batches served (the SDK takes none: the adapter hands it their entries one by
    one and answers with one array)."""


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

    def __init__(
        self,
        owner: AsyncioMetaOwner,
        source: MessageSource,
        *,
        writer: asyncio.StreamWriter | None = None,
        release: SdkRelease | None = None,
    ) -> None:
        self._owner = owner
        self._source = source
        self._writer = writer
        self._release = release
        self._shell: ConnectionShell | None = None
        self._ready: collections.deque[Mapping[str, Any]] = collections.deque()
        self._settled = asyncio.Event()
        self._marks_in_dispatcher = False
        self._warned: set[str] = set()
        self._opening: dict[str, asyncio.Event] = {}

    @property
    def owner(self) -> AsyncioMetaOwner:
        """The connection's owner: every lifetime, statistics, raw frames."""
        return self._owner

    @property
    def release(self) -> SdkRelease:
        """The SDK release this adapter serves (the installed one unless given)."""
        if self._release is None:
            self._release = installed_release()
        return self._release

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

    async def wait_opened(self, session_id: str) -> SessionLifetime:
        """Wait until ``session_id``'s lifetime is open, and return it.

        The adapter opens a new session's lifetime as the SDK queues the ``session/new``
        response, so work of the handler that must reach the client after that response (it
        learns the session id from it), such as an ``available_commands_update``, waits here:
        which task the SDK sends the response from differs between releases. Cancelling it
        only stops the wait.
        """
        while not self._owner.has_lifetime(session_id):
            await self._opening.setdefault(session_id, asyncio.Event()).wait()
        return self._owner.lifetime(session_id)

    def statistics(self) -> AdapterStatistics:
        """The adapter's counters and its owner's."""
        counters = dataclasses.asdict(self.shell.policy.tracker.statistics)
        counters |= dataclasses.asdict(self.gate.statistics)
        return AdapterStatistics(owner=self._owner.statistics(), **counters)

    @property
    def gate(self) -> InboundGate:
        """What the adapter answers before the SDK sees a message (see
        :mod:`agent_meta.sansio.inbound._gate`)."""
        return self.shell.gate

    @property
    def shell(self) -> ConnectionShell:
        """The connection's gate and lifetime policy (made once the SDK release is known)."""
        if self._shell is None:
            self._shell = ConnectionShell(
                self._owner,
                cancels_prompts=not self.release.cancels_requests,
                completes_params=True,
                initializes_once=True,
                on_open=self._opened,
            )
        return self._shell

    def connection_kwargs(self, *, versions: Sequence[int] | None = None) -> dict[str, Any]:
        """The keyword arguments that put this adapter under the installed SDK's connection::

            await acp.run_agent(agent, **adapter.connection_kwargs(), use_unstable_protocol=True)

        (or ``acp.AgentSideConnection(agent, **adapter.connection_kwargs())``). From 0.12 on
        the adapter is the message transport (``input_stream``); before, the connection gets
        the adapter's stream pair and ``sender_factory``. Where the SDK starts request
        handlers from a dispatcher task (0.8 to 0.12.0), a ``dispatcher_factory`` marks each
        handler with its request.

        ``versions`` are the ACP versions the runtime serves, when the adapter should negotiate
        as ACP says instead of the SDK: ``(2,)`` under ``acp.experimental.v2.run_agent``,
        ``(1, 2)`` under an ``AgentProtocolRouter`` with both agents (SDK 1.0). An
        ``initialize`` below all of them is then answered ``-32022``, one above the highest is
        served as the highest. Without it the agent (a v1 agent's ``initialize``) decides.

        Raises :class:`~agent_meta.sdk.UnsupportedSdkError` for an SDK outside the supported
        range, for a streams-only release when the adapter has no stream writer (one made over
        a message transport), and for ``versions`` with 2 where the SDK has no v2 side.
        """
        release = self.release
        if versions is not None:
            served = tuple(sorted(set(versions)))
            if not served or not set(served) <= {1, 2}:
                raise ValueError(f"versions must be a non-empty subset of (1, 2): {versions!r}")
            if 2 in served and not release.v2:
                raise UnsupportedSdkError(
                    f"agent-client-protocol {release.version} has no ACP v2 side (1.0 on)"
                )
            self.gate.versions = served
        kwargs: dict[str, Any] = {}
        if release.message_transport:
            kwargs["input_stream"] = self
        elif self._writer is None:
            raise UnsupportedSdkError(
                f"agent-client-protocol {release.version} connects over asyncio streams only;"
                " this adapter has no stream writer"
            )
        else:
            kwargs["input_stream"] = self._writer  # the SDK's sender_factory gets it, unused
            kwargs["output_stream"] = SeamReader(self)
            kwargs["sender_factory"] = lambda _writer, _supervisor: SeamSender(self)
        if release.dispatcher:
            kwargs["dispatcher_factory"] = marking_dispatcher(self._admit, self._dispatching)
        return kwargs

    # -- the SDK's transport ---------------------------------------------------------------
    async def receive(self) -> dict[str, Any] | None:
        """The next message from the client, for the SDK. A ``session/load`` or
        ``session/resume`` opens its session's lifetime before the SDK's handler runs, so
        that the history its handler replays is part of the lifetime.

        What ACP answers before any handler runs is answered here (:attr:`gate`); a batch's
        entries are handed over one by one. At the end of the input it returns ``None`` once no
        request of the client is still being answered (as agent_meta's own connection does),
        unless the agent waits for the client, which can no longer answer. Cancelling it
        loses no message: one taken from the source and not handed over stays queued.
        A ``session/set_title`` is answered here and never handed over (R13)."""
        while True:
            message = await self._next_admitted()
            if message is None:
                return None
            if self.shell.answers_here(message):
                await self._answer_here(message)
                continue
            if not self._marks_in_dispatcher:
                if self.release.dispatcher:
                    self._warn_once(
                        "dispatcher",
                        f"agent-client-protocol {self.release.version} starts handlers from a "
                        "dispatcher task: pass **adapter.connection_kwargs() to acp.run_agent, "
                        "or a load's replay is taken as live",
                    )
                admitted, token = await self._admit(message)
                if not admitted:
                    continue  # answered with an error: the store could not be read
                HANDLING.set(token)  # for the handler task the SDK starts next
            return message if isinstance(message, dict) else dict(message)

    async def _admit(self, message: Mapping[str, Any]) -> tuple[bool, int | None]:
        """Carry out the lifetime policy for a message about to reach a handler: whether it
        may (``False``: it was answered with an error, the lifetime store having failed) and
        its handler token (:data:`~agent_meta.sdk._streams.HANDLING`)."""
        admitted = await self.shell.admit(message)
        if admitted.answer is not None:
            await self._queue(admitted.answer)
            return False, None
        return True, admitted.token

    async def _next_admitted(self) -> Mapping[str, Any] | None:
        """The next message the shell lets through, answering those it refuses."""
        while not self._ready:
            item = await self._source.receive()
            if item is None:
                await self._input_ended()
                return None
            intake = self.shell.take(item)
            if intake.refused is not None:
                logger.warning("%s", intake.refused)
            if intake.ignored is not None:
                logger.info("ignoring a notification: %s", intake.ignored)
            self._ready.extend(intake.messages)
            if intake.answer is not None:
                await self._owner.send_encoded(intake.answer, None)
        return self._ready.popleft()

    async def _answer_here(self, message: Mapping[str, Any]) -> None:
        """Answer a ``session/set_title`` (R13): its confirmation, then its response, both
        through :meth:`send` (a batch's answer collects it). Cancelled before the response is
        queued, the request goes back to the front of what the SDK gets next."""
        try:
            await self._queue(await self.shell.answer_here(message))
        except BaseException:
            self._ready.appendleft(message)
            raise

    async def _input_ended(self) -> None:
        """Wait until the SDK may stop: the client's requests answered and the ACP v2 turns
        that run on after their answer ended (the SDK would close its connection under them),
        within the owner's ``drain_timeout`` (a client that stopped reading cannot hold the
        exit)."""
        gate = self.gate
        gate.input_ended()
        timeout = self._owner.options.drain_timeout
        try:
            async with asyncio.timeout(None if math.isinf(timeout) else timeout):
                while not gate.may_stop:
                    self._settled.clear()
                    await self._settled.wait()
        except TimeoutError:
            logger.warning(
                "the client's input ended; %d of its requests were still unanswered after "
                "the drain timeout of %s s, and are cancelled (ACP v2 turns still running "
                "after their answer: %d)",
                gate.in_flight,
                timeout,
                len(gate.turns),
            )

    async def send(self, message: dict[str, Any]) -> None:
        """Queue one message of the SDK through the owner.

        A ``session_info_update`` for a session with an open lifetime is published on it (its
        fields join the known state, R1); every other message is written as it is, after what
        was queued before it (R2), except a response that cannot be sent (a result not JSON or
        over the frame limit: ``-32603`` instead, as the gate says). An ``initialize`` or
        ``session/list`` result is rewritten first (R13: it advertises ``session/set_title``, it
        lists the client's titles); a listing the store cannot be read for is answered
        ``-32603``. Raises :class:`~agent_meta.MetaValueError` for a message that is not
        JSON-RPC or not JSON, and :class:`~agent_meta.UnknownSessionError` for a request to the
        client about a session whose lifetime has ended (it would never be answered).
        """
        if "method" not in message:
            await self._respond(message)
            return
        plan = self.shell.policy.response(message, handling=HANDLING.get())
        if plan.update is not None and plan.session_id is not None:
            await self._absorb(plan.session_id, plan.update)
            return
        await self._write(message, plan)

    async def close(self) -> None:
        """Stop reading the client. The owner keeps running until its block ends, so what was
        queued is still written."""
        await self._source.close()

    # -- internals -------------------------------------------------------------------------
    def _opened(self, session_id: str) -> None:
        """A lifetime is open: wake who waits for it (:meth:`wait_opened`)."""
        opened = self._opening.pop(session_id, None)
        if opened is not None:
            opened.set()

    def _dispatching(self) -> None:
        """The SDK built the adapter's dispatcher: requests are admitted there, not read."""
        self._marks_in_dispatcher = True

    async def _absorb(self, session_id: str, update: InfoUpdate) -> None:
        """Publish an update the SDK sent. The SDK has already accepted it from the agent, so
        nothing here raises into the agent's ``session_update``: what the owner refuses is
        counted and logged once."""
        statistics = self.shell.policy.tracker.statistics
        if update.dropped:
            self._warn_once(
                "dropped",
                f"left out {', '.join(update.dropped)} of a session_info_update for session "
                f"{session_id!r}: ACP v{self._owner.protocol_version} cannot carry it (an "
                "updatedAt needs a UTC offset); the rest was published",
            )
        try:
            await self._owner.lifetime(session_id).publish(
                title=update.title,  # type: ignore[arg-type]  # checked by the owner (R12)
                updated_at=update.updated_at,  # type: ignore[arg-type]
                meta=update.meta,  # type: ignore[arg-type]
                notification_meta=update.notification_meta,
            )
        except (MetaValueError, FrameTooLargeError, UnknownSessionError) as exc:
            statistics.refused_updates += 1
            self._warn_once(
                "refused", f"refused a session_info_update for session {session_id!r}: {exc}"
            )
            return
        statistics.absorbed_updates += 1

    def _warn_once(self, kind: str, message: str) -> None:
        """Log ``message`` as a warning the first time, at debug level after."""
        if kind in self._warned:
            logger.debug("%s", message)
            return
        self._warned.add(kind)
        logger.warning("%s (said once per connection; counted in statistics())", message)

    async def _respond(self, message: Mapping[str, Any]) -> None:
        """Queue a response as the shell says (rewritten, alone or with the batch it
        completes), after the lifetime step it needs."""
        if "error" not in message and "result" not in message:
            raise MetaValueError("not a JSON-RPC message: no method, result or error")
        await self._queue(await self.shell.respond(message, handling=HANDLING.get()))

    async def _queue(self, answer: Answer) -> None:
        """Queue what the shell made of a response, if anything is to be written yet."""
        try:
            if answer.frame is not None:
                await self._owner.send_encoded(answer.frame, None)
                self.shell.sent(answer)
        finally:
            if self.shell.gate.may_stop:
                self._settled.set()  # the end of the input waited for this answer

    async def _write(self, message: Mapping[str, Any], plan: OutboundPlan) -> None:
        """Queue a notification or a request to the client as it is."""
        owner = self._owner
        method = message["method"]
        params = message.get("params")
        gate = self.gate
        if "id" not in message:
            await owner.send_notification(method, params)
            gate.sent_notification(message)
            if gate.may_stop:
                self._settled.set()  # the end of the input waited for this turn to end
            return
        gate.sent_request(message["id"])
        try:
            if not await owner.send_request(message["id"], method, params):
                raise UnknownSessionError(f"session {plan.session_id!r} has ended")
        finally:
            if gate.may_stop:
                self._settled.set()  # the end of the input waited for this request
