"""The ACP lifetime policy, carried out on an owner: what every connection does around its
messages, whoever wrote the connection.

Both of agent_meta's connections (its own trio :class:`~agent_meta.AgentConnection` and the
official-SDK adapter) put every request they receive and every response they send through one
:class:`LifetimePolicy`. The sans-IO :class:`~agent_meta.sansio._seam.LifetimeTracker` decides;
this module only opens, resyncs and closes lifetimes on the owner as it says:

- a ``session/load`` or ``session/resume`` opens its session's lifetime before its handler runs
  (taking a stored one over from whichever owner held it), so what the handler replays or
  publishes belongs to it;
- ``session/new`` and ``session/fork`` open the lifetime their response names, as the response
  is queued, knowing what their handler sent for it before (the tracker's ``seed``);
- a successful ``session/load`` or ``session/resume`` is preceded by a resync (R4): after the
  replay, before the response (a replay that built the state is made known beneath what was
  published meanwhile first: the tracker's ``seed``);
- a successful ``session/close`` ends the lifetime before its response is queued (R5, R6);
- a failed load or resume that opened a lifetime with nothing known ends it again.

An agent on either connection gets all of that without calling anything; the lifetime handles
stay for what the protocol does not drive (publications, domain edits, failure incidents).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, final

from ..core._errors import AgentMetaError
from ..core._session_info import SessionInfo
from ..sansio._modes import wire_mode
from ..sansio._seam import (
    LifetimeStep,
    LifetimeTracker,
    OutboundPlan,
    ReplayStart,
    replaying_session,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..sansio._marks import InfoUpdate
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
        return replay.token

    def response(
        self, message: Mapping[str, object], *, handling: int | None = None
    ) -> OutboundPlan:
        """A message is about to be queued: carry out what it needs first (a response's
        lifetime step, the version ``initialize`` negotiated) and return the plan (for a
        ``session_info_update``, the publication it stands for). ``handling``: the token of
        the request whose handler sends it (:meth:`request`)."""
        owner = self._owner
        plan = self.tracker.outbound(
            message,
            owner.has_lifetime,
            handling=handling,
            offset_timestamps=wire_mode(
                owner.protocol_version, owner.options.v1_meta_mode
            ).requires_offset_timestamps,
            known=self._known,
        )
        self.carry_out(plan)
        return plan

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
