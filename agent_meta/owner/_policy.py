"""The ACP lifetime policy, carried out on an owner: what every connection does around its
messages, whoever wrote the connection.

Both of agent_meta's connections (its own trio :class:`~agent_meta.AgentConnection` and the
official-SDK adapter) put every request they receive and every response they send through one
:class:`LifetimePolicy`. The sans-IO :class:`~agent_meta.sansio.inbound._tracker.LifetimeTracker`
decides; this module only opens, resyncs and closes lifetimes on the owner as it says:

- a ``session/load`` or ``session/resume`` opens its session's lifetime before its handler runs
  (taking a stored one over from whichever owner held it), so what the handler replays or
  publishes belongs to it;
- ``session/new`` and ``session/fork`` open the lifetime their response names, as the response
  is queued, knowing what their handler sent for it before (the tracker's ``seed``);
- a successful ``session/load`` or ``session/resume`` is preceded by a resync (R4): after the
  replay, before the response (a replay that built the state is made known beneath what was
  published meanwhile first: the tracker's ``seed``);
- a successful ``session/close`` ends the lifetime before its response is queued (R5, R6);
- a failed load or resume that opened a lifetime with nothing known ends it again;
- ``session/set_title`` is answered here, never by the agent (:meth:`LifetimePolicy.set_title`,
  R13): the title becomes the client's, confirmed with a ``session_info_update``, stored, then
  answered; an ``initialize`` result advertises it and a ``session/list`` result lists the
  client's titles (:meth:`LifetimePolicy.rewrite`). A proxy in front of an agent that serves
  ``session/set_title`` itself forwards it instead (:attr:`LifetimePolicy.forwards_titles`).

An agent on either connection gets all of that without calling anything; the lifetime handles
stay for what the protocol does not drive (publications, domain edits, failure incidents).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, final

from ..core._errors import (
    AgentMetaError,
    FrameTooLargeError,
    LifetimeTakenOverError,
    StoreError,
    shown_id,
)
from ..core._jsonrpc import ErrorCode, JsonRpcError
from ..core._session_info import SessionInfo
from ..sansio._modes import wire_mode
from ..sansio.inbound._handler_errors import failure_of
from ..sansio.inbound._titles import (
    advertise_titles,
    advertises_titles,
    listed_session_ids,
    read_title_request,
    retitle_listing,
    title_result,
)
from ..sansio.inbound._tracker import (
    LifetimeStep,
    LifetimeTracker,
    OpeningStart,
    OutboundPlan,
    ReplayStart,
    replaying_session,
)
from ..sansio.inbound._v1_objects import advertise_v1_meta
from ._titles import client_titles

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..sansio.inbound._marks import InfoUpdate
    from ._base import OwnerBase

__all__ = ["LifetimePolicy"]

logger = logging.getLogger("agent_meta")


@final
class LifetimePolicy:
    """Follows one connection's messages and keeps its owner's lifetimes as ACP says."""

    __slots__ = ("_on_open", "_owner", "tracker")

    def __init__(self, owner: OwnerBase, *, on_open: Callable[[str], None] | None = None) -> None:
        self._owner = owner
        self._on_open = on_open
        self.tracker = LifetimeTracker()
        """The sans-IO planner (its ``statistics`` count what it planned)."""

    async def request(self, message: Mapping[str, object]) -> int | None:
        """A message from the client is about to be handled. For a ``session/load`` or
        ``session/resume``, its session's lifetime opens now (taken over from the store when
        it holds one: a store round trip). For those and for ``session/new`` and
        ``session/fork``, the token returned marks what the handler sends as that request's
        (see :meth:`response`: replay, or what the lifetime the request opens must know); else
        ``None``. Raises :class:`~agent_meta.StoreError` when the store cannot be read (the
        request is then answered with an error, and nothing is opened)."""
        start = await self.start(message)
        return None if start is None else start.token

    async def start(self, message: Mapping[str, object]) -> ReplayStart | OpeningStart | None:
        """:meth:`request`, returning what the tracker started: a load's or resume's
        :class:`~agent_meta.sansio.inbound._tracker.ReplayStart` (whether the request replays,
        whether its lifetime held its state before), a new's or fork's
        :class:`~agent_meta.sansio.inbound._tracker.OpeningStart`, else ``None``: for a driver that
        attributes the agent's frames to requests by their order, not by handler."""
        owner = self._owner
        session_id = replaying_session(message)
        existed = False
        if session_id is not None:
            existed = await owner.claim_lifetime(session_id) is not None
        replay = self.tracker.inbound(
            message, lambda _: existed, protocol_version=owner.protocol_version
        )
        if replay is None:
            return None
        if isinstance(replay, ReplayStart):
            self.open(replay.session_id)
        return replay

    def response(
        self, message: Mapping[str, object], *, handling: int | None = None
    ) -> OutboundPlan:
        """A message is about to be queued: carry out what it needs first (a response's
        lifetime step, the version ``initialize`` negotiated) and return the plan (for a
        ``session_info_update``, the publication it stands for). ``handling``: the token of
        the request whose handler sends it (:meth:`request`)."""
        plan = self.plan(message, handling=handling)
        self.carry_out(plan)
        return plan

    def plan(self, message: Mapping[str, object], *, handling: int | None = None) -> OutboundPlan:
        """:meth:`response` without carrying the plan out (for a proxy that settles its replay
        window first, then calls :meth:`carry_out`)."""
        owner = self._owner
        return self.tracker.outbound(
            message,
            owner.has_lifetime,
            handling=handling,
            offset_timestamps=wire_mode(
                owner.protocol_version, owner.options.v1_meta_mode
            ).requires_offset_timestamps,
            known=self._known,
        )

    def answering(self, message: Mapping[str, object]) -> str | None:
        """The method of the request a response answers, if it was seen (:meth:`request`)."""
        return self.tracker.answering(message)

    def _known(self, session_id: str) -> SessionInfo:
        """What the owner knows of ``session_id`` (a snapshot: asked only in a load or resume
        window, and at the response of one that built the state)."""
        owner = self._owner
        if not owner.has_lifetime(session_id):
            return SessionInfo()
        return owner.lifetime(session_id).snapshot()

    def carry_out(self, plan: OutboundPlan) -> None:
        """What must happen before the message is queued: the version, a lifetime step."""
        owner = self._owner
        if plan.protocol_version is not None:
            try:
                owner.set_protocol_version(plan.protocol_version)
            except RuntimeError:
                logger.warning(
                    "initialize answered protocol %d after a session opened; frames stay v%d",
                    plan.protocol_version,
                    owner.protocol_version,
                )
        session_id = plan.session_id
        if plan.step is None or session_id is None:
            return
        if plan.step is LifetimeStep.OPEN:
            self.open(session_id)
            self._seed(session_id, plan.seed)
        elif plan.step is LifetimeStep.RESYNC:
            if owner.has_lifetime(session_id):
                self._seed(session_id, plan.seed)
                owner.lifetime(session_id).resync()
        elif plan.step is LifetimeStep.ADOPT_TITLE:
            if owner.has_lifetime(session_id) and plan.title is not None:
                self._adopt_title(session_id, plan.title)
        elif owner.has_lifetime(session_id):  # LifetimeStep.CLOSE or DISCARD
            owner.close_lifetime(session_id)

    def _seed(self, session_id: str, seed: InfoUpdate | None) -> None:
        """Make what the plan says the lifetime must know known, without a frame: the client
        has it already (or the resync that follows tells it). What the owner refuses (over the
        frame limit, say) is logged: those frames were written, but the state does not hold
        them."""
        if seed is None:
            return
        try:
            self._owner.lifetime(session_id).seed(
                title=seed.title,  # type: ignore[arg-type]  # checked by the owner (R12)
                updated_at=seed.updated_at,  # type: ignore[arg-type]
                meta=seed.meta,  # type: ignore[arg-type]
            )
        except AgentMetaError as exc:
            logger.warning(
                "session %s: what its handler sent could not be made known: %s", session_id, exc
            )

    def open(self, session_id: str) -> None:
        """Open ``session_id``'s lifetime unless it is open (a stored one is restored)."""
        if not self._owner.has_lifetime(session_id):
            self._owner.open_lifetime(session_id)
        if self._on_open is not None:
            self._on_open(session_id)

    # -- client-set titles (R13) -----------------------------------------------------------
    @property
    def forwards_titles(self) -> bool:
        """Whether ``session/set_title`` reaches the agent: set it in a proxy in front of an
        agent that advertises it (:func:`~agent_meta.sansio.inbound._titles.advertises_titles` of
        the agent's ``initialize`` result). Its successful response then makes the title the
        client's (:meth:`~agent_meta.SessionLifetime.adopt_client_title`) before it is written,
        so later titles of the agent are kept off the wire. Off (the default), the connection
        answers it with :meth:`set_title`."""
        return self.tracker.forwards_titles

    @forwards_titles.setter
    def forwards_titles(self, value: bool) -> None:
        self.tracker.forwards_titles = value

    def agent_initialized(self, result: object) -> None:
        """The agent behind a proxy answered ``initialize`` with ``result``: it serves
        ``session/set_title`` itself if it advertises it (:attr:`forwards_titles`)."""
        self.forwards_titles = isinstance(result, dict) and advertises_titles(result)

    async def set_title(self, params: Mapping[str, object]) -> dict[str, Any]:
        """Serve ``session/set_title`` (R13) and return its result, ``{"title": ...}``.

        The title becomes the client's: its confirming ``session_info_update`` is queued (after
        everything queued before, R2) and, with a store, stored before this returns, so that
        the response, queued by the caller after it, is written only once the title is stored.
        Raises :class:`~agent_meta.JsonRpcError`: ``-32602`` for params
        :func:`~agent_meta.sansio.inbound._titles.read_title_request` refuses or a title the frame
        limit cannot carry, ``-32002`` for a session with no open lifetime here (never
        created, loaded or resumed on this connection, closed, or taken over by another
        holder); nothing is stored or sent then. :class:`~agent_meta.StoreError` if the store
        failed. Cancelled while it waits for queue room, nothing changed.
        """
        request = read_title_request(params)
        session_id = request.session_id
        owner = self._owner
        if not owner.has_lifetime(session_id):
            raise _no_session(session_id, "is not open on this connection")
        lifetime = owner.lifetime(session_id)
        try:
            accepted = await lifetime.set_client_title(request.title)
        except LifetimeTakenOverError:
            raise _no_session(session_id, "was taken over by another connection") from None
        except FrameTooLargeError as exc:
            raise JsonRpcError(
                ErrorCode.INVALID_PARAMS, f"invalid params: 'title' is too long: {exc}"
            ) from None
        if not accepted:
            raise _no_session(session_id, "was closed")
        return title_result(request.title)

    async def answer_set_title(self, message: Mapping[str, object]) -> dict[str, Any]:
        """The JSON-RPC response to a ``session/set_title`` request ``message``, served with
        :meth:`set_title` (its errors become error responses): for a connection that writes
        whole messages (the SDK adapter, a proxy)."""
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id")}
        params = message.get("params")
        try:
            answer["result"] = await self.set_title(params if isinstance(params, dict) else {})
        except JsonRpcError as exc:
            answer["error"] = exc.to_error()
        except StoreError as exc:
            failure = failure_of(exc)
            assert failure is not None  # a store failure is answered, never raised
            logger.exception("session/set_title: %s", failure.error.message)
            answer["error"] = failure.error.to_error()
        return answer

    async def rewrite(self, message: Mapping[str, object]) -> Mapping[str, object]:
        """A response as the client must get it, before :meth:`response` plans it: an
        ``initialize`` result advertises ``session/set_title`` in both shapes
        (:func:`~agent_meta.sansio.inbound._titles.advertise_titles`) and, on v1, whether its
        ``_meta`` objects are whole
        (:func:`~agent_meta.sansio.inbound._v1_objects.advertise_v1_meta`), a ``session/list``
        result lists the title the client set for each session (its open lifetime's, else the
        store's: one store round trip for the sessions listed that are not open here). ``message``
        itself when nothing changes (so a proxy can forward its bytes), else a new message.
        Raises :class:`~agent_meta.StoreError` if the store cannot be read."""
        method = self.tracker.answering(message)
        if method is None:
            return message
        result = message["result"]
        if not isinstance(result, dict):
            return message
        if method == "initialize":
            changed = advertise_titles(result)
            if result.get("protocolVersion") == 1:  # what its v1 objects mean (R10)
                merged = self._owner.options.v1_meta_mode == "merged"
                changed = advertise_v1_meta(changed or result, "whole" if merged else "patch")
        elif method == "session/list":
            titles = await client_titles(self._owner, listed_session_ids(result))
            changed = retitle_listing(result, titles)
        else:
            return message
        return message if changed is None else {**message, "result": changed}

    def _adopt_title(self, session_id: str, title: str) -> None:
        """The agent answered a forwarded ``session/set_title``: the title is the client's."""
        try:
            self._owner.lifetime(session_id).adopt_client_title(title)
        except FrameTooLargeError as exc:
            logger.warning(
                "session %s: the title the agent stored is not kept: %s", session_id, exc
            )


def _no_session(session_id: str, why: str) -> JsonRpcError:
    return JsonRpcError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"session {shown_id(session_id)} {why}",
        {"sessionId": session_id},
    )
