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
  is queued;
- a successful ``session/load`` or ``session/resume`` is preceded by a resync (R4): after the
  replay, before the response;
- a successful ``session/close`` ends the lifetime before its response is queued (R5, R6);
- a failed load or resume that opened a lifetime with nothing known ends it again.

An agent on either connection gets all of that without calling anything; the lifetime handles
stay for what the protocol does not drive (publications, domain edits, failure incidents).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, final

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
        it holds one: a store round trip), and the token returned marks what its handler
        sends as replay (see :meth:`response`); else ``None``. Raises
        :class:`~agent_meta.StoreError` when the store cannot be read (the request is then
        answered with an error, and nothing is opened)."""
        replay = await self.open_replay(message)
        return None if replay is None else replay.token

    async def open_replay(self, message: Mapping[str, object]) -> ReplayStart | None:
        """:meth:`request`, returning the whole :class:`~agent_meta.sansio._seam.ReplayStart`
        (whether the request replays, whether its lifetime held its state before): for a
        driver that tells replay from live state by the order of frames, not by handler."""
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
        self.open(replay.session_id)
        return replay

    def response(
        self, message: Mapping[str, object], *, replaying: int | None = None
    ) -> OutboundPlan:
        """A message is about to be queued: carry out what it needs first (a response's
        lifetime step, the version ``initialize`` negotiated) and return the plan (for a
        ``session_info_update``, the publication it stands for). ``replaying``: the token of
        the load or resume whose handler sends it."""
        owner = self._owner
        plan = self.tracker.outbound(
            message,
            owner.has_lifetime,
            replaying=replaying,
            offset_timestamps=wire_mode(
                owner.protocol_version, owner.options.v1_meta_mode
            ).requires_offset_timestamps,
        )
        self.carry_out(plan)
        return plan

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
        elif plan.step is LifetimeStep.RESYNC:
            if owner.has_lifetime(session_id):
                owner.lifetime(session_id).resync()
        elif owner.has_lifetime(session_id):  # LifetimeStep.CLOSE or DISCARD
            owner.close_lifetime(session_id)

    def open(self, session_id: str) -> None:
        """Open ``session_id``'s lifetime unless it is open (a stored one is restored)."""
        if not self._owner.has_lifetime(session_id):
            self._owner.open_lifetime(session_id)
        if self._on_open is not None:
            self._on_open(session_id)
