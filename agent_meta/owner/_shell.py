"""What every agent-side connection does around its messages, decided once:
:class:`ConnectionShell`.

agent_meta's trio connection, the official-SDK adapter and ``agent-meta own``'s relay each read
a client's messages, hand them on (to handlers, to the SDK, to a child agent) and queue what
answers them. Between those steps the same rules apply, whatever does the I/O:

- the inbound gate (:class:`~agent_meta.sansio.inbound._gate.InboundGate`) refuses what ACP refuses
  before an agent sees it (``-32700``, ``-32600``, ``-32602``, a request before
  ``initialize`` ...), negotiates the version and keeps the books of what is unanswered;
- the lifetime policy (:class:`~agent_meta.owner._policy.LifetimePolicy`) opens, resyncs and
  ends lifetimes as requests and responses pass, and takes a load's or resume's stored
  lifetime over before its handler runs;
- ``session/set_title`` is served by the connection unless the agent behind a proxy serves
  it (R13), and ``initialize`` and ``session/list`` results are rewritten for it;
- a lifetime store that fails answers the request it failed for with ``-32603``
  (:func:`~agent_meta.sansio.inbound._handler_errors.failure_of`), and the connection goes on.

The shell holds the gate and the policy; a connection keeps only its I/O. It gives the shell
what it read (:meth:`~ConnectionShell.take`), writes what the shell says, admits each message
before handing it on (:meth:`~ConnectionShell.admit`), and puts each response through
:meth:`~ConnectionShell.respond` before queuing it (a proxy that forwards its agent's bytes:
:meth:`~ConnectionShell.forwarded`). Only :meth:`~ConnectionShell.admit`,
:meth:`~ConnectionShell.respond` and :meth:`~ConnectionShell.answer_here` can wait (a store
round trip, queue room for a title's confirmation); cancelled, they change nothing the
connection has to undo.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, final

from ..core._errors import StoreError
from ..sansio._frames import join_response_frames
from ..sansio.inbound._gate import InboundGate
from ..sansio.inbound._handler_errors import failure_of
from ..sansio.inbound._titles import SET_TITLE
from ._policy import LifetimePolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..sansio.inbound._gate import Answer, Undecodable
    from ..sansio.inbound._tracker import OpeningStart, OutboundPlan, ReplayStart
    from ._base import OwnerBase

    Item: TypeAlias = Mapping[str, Any] | Sequence[Mapping[str, Any] | Undecodable] | Undecodable
    """What a connection read: a message, a batch's entries, or what makes a line no message."""

__all__ = ["Admitted", "ConnectionShell", "Intake"]

logger = logging.getLogger("agent_meta")


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Intake:
    """What to do with one item a connection read: write ``answer`` now (a refusal, or the
    array of a batch's refusals when no request of it goes on), and hand ``messages`` on, in
    order, each through :meth:`ConnectionShell.admit`. ``ignored`` says why a notification was
    dropped, ``refused`` why a line or a request was answered with an error (for the log)."""

    answer: bytes | None = None
    messages: tuple[Mapping[str, Any], ...] = ()
    ignored: str | None = None
    refused: str | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Admitted:
    """A message about to be handed on. ``answer``: the lifetime store failed, the request is
    answered with that (queue its frame, then :meth:`ConnectionShell.sent`) and goes no
    further. ``start``: what the lifetime policy began for it (a load's or resume's replay
    window, a new's or fork's opening), whose ``token`` marks what its handler sends."""

    message: Mapping[str, Any]
    answer: Answer | None = None
    start: ReplayStart | OpeningStart | None = None

    @property
    def token(self) -> int | None:
        """The handler token of the request (see :meth:`LifetimePolicy.request`)."""
        return None if self.start is None else self.start.token


@final
class ConnectionShell:
    """The inbound gate and the lifetime policy of one connection (see the module docstring).

    ``versions``, ``cancels_prompts``, ``completes_params`` and ``initializes_once`` configure
    the gate for the runtime behind the connection
    (:class:`~agent_meta.sansio.inbound._gate.InboundGate`); ``on_open`` is told each lifetime the
    policy opens.
    """

    __slots__ = ("gate", "policy")

    def __init__(
        self,
        owner: OwnerBase,
        *,
        versions: Sequence[int] | None = None,
        cancels_prompts: bool = False,
        completes_params: bool = False,
        initializes_once: bool = False,
        on_open: Callable[[str], None] | None = None,
    ) -> None:
        self.gate = InboundGate(
            max_frame_bytes=owner.max_frame_bytes,
            versions=versions,
            cancels_prompts=cancels_prompts,
            completes_params=completes_params,
            initializes_once=initializes_once,
        )
        """What is answered before any handler runs, and what responses become."""
        self.policy = LifetimePolicy(owner, on_open=on_open)
        """The lifetimes, as the messages passing say (R4, R5, R6, R13)."""

    # -- what came in ------------------------------------------------------------------------
    def take(self, item: Item) -> Intake:
        """Decide one item read from the client: a message, a batch (the gate collects the
        answers of its requests into one array, see :meth:`respond`), or a line that is no
        message."""
        gate = self.gate
        if isinstance(item, Mapping):
            admission = gate.admit(item)
            if admission.message is not None:
                return Intake(messages=(admission.message,))
            refused = None if admission.answer is None else f"refused {item.get('method')!r}"
            return Intake(answer=admission.answer, ignored=admission.ignored, refused=refused)
        if isinstance(item, Sequence):
            batch = gate.admit_batch(item)
            return Intake(answer=batch.answer, messages=batch.messages)
        return Intake(answer=gate.refuse(item), refused=f"refused a line: {item}")

    def take_forwarded_batch(self, entries: Sequence[Mapping[str, Any] | Undecodable]) -> Intake:
        """Decide a batch that a proxy forwards as a batch of its own (``agent-meta own``: its
        agent answers it with an array): each entry decided alone, the refusals collected into
        one array of their own, written at once."""
        refusals: list[bytes] = []
        passed: list[Mapping[str, Any]] = []
        for entry in entries:
            intake = self.take(entry)
            if intake.answer is not None:
                refusals.append(intake.answer)
            passed.extend(intake.messages)
        answer = join_response_frames(refusals) if refusals else None
        refused = None if len(passed) == len(entries) else "refused entries of a batch"
        return Intake(answer=answer, messages=tuple(passed), refused=refused)

    async def admit(self, message: Mapping[str, Any]) -> Admitted:
        """A message :meth:`take` passed on is about to be handed on: a request's lifetime
        step begins (a load's or resume's stored lifetime is taken over: a store round trip).
        A store that fails answers the request instead (``-32603``)."""
        if "method" not in message or "id" not in message:
            return Admitted(message)  # a notification, or the client's answer to a request
        try:
            start = await self.policy.start(message)
        except StoreError as exc:
            error = self._store_failed(message, exc)
            return Admitted(message, answer=await self.respond(error))
        return Admitted(message, start=start)

    def answers_here(self, message: Mapping[str, Any]) -> bool:
        """Whether the connection answers ``message`` itself: a ``session/set_title`` request,
        unless the agent behind a proxy serves it (R13)."""
        if message.get("method") != SET_TITLE or "id" not in message:
            return False
        return not self.policy.forwards_titles

    async def answer_here(self, message: Mapping[str, Any]) -> Answer:
        """Serve a ``session/set_title`` (:meth:`answers_here`): the title becomes the
        client's, its confirmation is queued (and stored), then the answer is made as
        :meth:`respond` makes it. Cancelled while the confirmation waits for queue room,
        nothing changed."""
        return await self.respond(await self.policy.answer_set_title(message))

    # -- what goes out -----------------------------------------------------------------------
    async def respond(self, message: Mapping[str, Any], *, handling: int | None = None) -> Answer:
        """A response about to be queued. Rewritten as R13 says (an ``initialize`` result
        advertises ``session/set_title``, a ``session/list`` lists the client's titles; a store
        that fails while they are read answers ``-32603``), checked by the gate (one that cannot
        be sent becomes ``-32603``; held while its batch waits for the others), and the lifetime
        step it needs carried out (open, resync, close) before the caller queues
        ``answer.frame``; then call :meth:`sent`. ``handling``: the token of the handler that
        sends it, where the connection knows it."""
        try:
            message = await self.policy.rewrite(message)
        except StoreError as exc:
            message = self._store_failed(message, exc)
        answer = self.gate.respond(message)
        if answer.replaced is not None:
            logger.error("the response to request %r: %s", message.get("id"), answer.replaced)
        self.policy.response(answer.response, handling=handling)
        return answer

    def sent(self, answer: Answer) -> None:
        """``answer.frame`` is queued: the requests it answers are answered."""
        self.gate.sent(answer)

    # -- a proxy, which forwards its agent's bytes ---------------------------------------------
    async def rewrite_forwarded(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """A response of the agent behind a proxy as the client must get it (R13, as
        :meth:`respond` rewrites one; ``message`` itself when nothing changes, so that its
        bytes are forwarded). The agent's ``initialize`` result tells whether it serves
        ``session/set_title`` itself."""
        if self.policy.answering(message) == "initialize":
            self.policy.agent_initialized(message.get("result"))
        try:
            return await self.policy.rewrite(message)
        except StoreError as exc:
            return self._store_failed(message, exc)

    def forwarded(self, message: Mapping[str, Any]) -> OutboundPlan:
        """A response of the agent behind a proxy is about to be queued as its own bytes (or
        as :meth:`rewrite` made it): the request it answers is answered, and the plan of the
        lifetime step it needs is returned, for the proxy to carry out
        (:meth:`LifetimePolicy.carry_out`) once it has settled what its replay window says."""
        self.gate.forwarded(message)
        return self.policy.plan(message)

    def _store_failed(self, message: Mapping[str, Any], exc: StoreError) -> dict[str, Any]:
        """The error response a request whose lifetime store failed is answered with."""
        failure = failure_of(exc)
        assert failure is not None  # a store failure is answered, never raised
        logger.error("%s", failure.error.message, exc_info=exc)
        return {"jsonrpc": "2.0", "id": message.get("id"), "error": failure.error.to_error()}
