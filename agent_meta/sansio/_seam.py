"""What an owner does around each message of an agent connection it did not write.

An agent built on another JSON-RPC stack (the official ACP Python SDK) hands the owner whole
messages at a message-level transport seam: every request it receives, every response,
notification and request it sends. :class:`LifetimeTracker` reads those messages and decides,
without any agent code, what the session lifetimes need (R4, R5, R6, R10):

- ``initialize``'s response sets the protocol version the owner renders for (R10), when it
  is one the owner can render;
- ``session/load`` and ``session/resume`` open (or keep) the session's lifetime when the
  request arrives; their successful response is preceded by a resync (R4). A lifetime the
  request opened with nothing known is closed again when it fails. While the handler of a
  replaying request runs (every load, and every v1 resume: agents replay on a v1 resume too;
  a v2 resume only with a ``replayFrom`` cursor, as v2 says: ``core/_replay.py``, the one
  answer every part of agent_meta gives), the ``session_info_update``s *it*
  sends are replay: :meth:`LifetimeTracker.inbound` gives each
  such request a token, the driver marks the handler with it and passes it back with what the
  handler sends (``replaying``); the token ends with the request's response. A lifetime that
  existed before the request (open, or kept by the store) already holds the state, so replayed
  patches pass through without touching it (re-applying old patches would bring back removed
  keys) and the resync then puts the client right; a live update sent meanwhile by other work
  of the agent (a background task) is still absorbed, so the resync carries it. A lifetime the
  request opened with nothing known is built from the replay: those updates are absorbed;
- ``session/new`` and ``session/fork`` open the lifetime their response names, before that
  response is written;
- ``session/close``'s successful response ends the lifetime before it is written, so nothing
  of the session follows it (R5, R6);
- a ``session_info_update`` for a session with an open lifetime becomes a publication, so its
  fields join the known state (R1); for any other session it passes through unchanged and is
  counted;
- where ``session/set_title`` reaches the agent (a proxy in front of an agent that advertises
  it, :attr:`LifetimeTracker.forwards_titles`), its successful response makes the title the
  client's (R13) before it is written;
- an error response changes no lifetime.

The tracker also says which request a response answers (:meth:`LifetimeTracker.answering`), so
that the connection can rewrite an ``initialize`` or ``session/list`` result first
(:mod:`agent_meta.sansio._titles`).

Only requests whose response matters are remembered, at most :data:`PENDING_REQUESTS` at a
time. The tracker is pure: the driver asks the owner whether a lifetime is open and carries out
the plan.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias, TypeGuard, final

from ..core._replay import replay_of
from ..core._sentinel import OMITTED
from ..core._timestamps import is_rfc3339
from ._frames import session_of
from ._modes import WIRE_MODES
from ._titles import SET_TITLE

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "PENDING_REQUESTS",
    "InfoUpdate",
    "LifetimeStep",
    "LifetimeTracker",
    "OutboundPlan",
    "ReplayStart",
    "RequestId",
    "TrackerStatistics",
    "info_update_of",
    "is_request_id",
    "replaying_session",
]

PENDING_REQUESTS: Final = 4096
"""Requests awaiting their response that the tracker remembers; the oldest is forgotten first."""

RequestId: TypeAlias = int | str | None
"""A JSON-RPC request id, as the tracker keys the requests it remembers."""

_INFO_UPDATE_FIELDS: Final = frozenset({"sessionUpdate", "title", "updatedAt", "_meta"})
_NOTIFICATION_FIELDS: Final = frozenset({"sessionId", "update", "_meta"})


class LifetimeStep(enum.Enum):
    """A change to a session lifetime that must happen before an outbound message is written."""

    OPEN = "open"
    """Open the lifetime of ``session_id`` unless it is open (restoring a stored one)."""
    RESYNC = "resync"
    """Queue a resync of ``session_id``'s lifetime (``_meta: null``, then its known state)."""
    CLOSE = "close"
    """End ``session_id``'s lifetime (and its stored record)."""
    DISCARD = "discard"
    """A load or resume that opened ``session_id``'s lifetime with nothing known failed: end
    that lifetime again, as if the request had never come (if it is still open)."""
    ADOPT_TITLE = "adopt_title"
    """The agent answered a forwarded ``session/set_title``: ``OutboundPlan.title`` is the
    client's title of ``session_id``'s lifetime now (R13), confirmed by the agent already."""


@final
@dataclass(frozen=True, slots=True)
class ReplayStart:
    """A ``session/load`` or ``session/resume`` arrived: open ``session_id``'s lifetime before
    the agent handles it (unless it is open), and mark the handler with ``token``: what it
    sends, passed back as ``outbound(..., replaying=token)``, is that request's replay."""

    session_id: str
    token: int
    replays: bool = True
    """Whether the request replays history (a v2 ``session/resume`` without ``replayFrom``
    does not): only then is what its handler sends taken as replay."""
    held: bool = False
    """Whether the lifetime held its state before the request (open, or kept by the store):
    what is replayed is then history; otherwise the replay is all there is to build it from."""


@final
@dataclass(frozen=True, slots=True)
class InfoUpdate:
    """The fields of a ``session_info_update``, each ``OMITTED`` when the message left it out."""

    title: object = OMITTED
    updated_at: object = OMITTED
    meta: object = OMITTED
    notification_meta: Mapping[str, object] | None = None
    dropped: tuple[str, ...] = ()
    """Wire fields of the message left out because the negotiated version cannot carry them
    (an ``updatedAt`` without a UTC offset under v2); the rest is still published."""


@final
@dataclass(frozen=True, slots=True)
class OutboundPlan:
    """What to do with one outbound message, in order: ``protocol_version``, ``step``, then
    either publish ``update`` on ``session_id``'s lifetime or write the message as it is.

    ``session_id`` is the session the message belongs to (``params.sessionId``), which the owner
    fences once its lifetime has ended; ``is_request`` says the message is a request to the
    client, whose sender waits for an answer and must be told when it is fenced instead.
    """

    session_id: str | None = None
    step: LifetimeStep | None = None
    protocol_version: int | None = None
    update: InfoUpdate | None = None
    is_request: bool = False
    title: str | None = None
    """The title of a :attr:`LifetimeStep.ADOPT_TITLE` step."""


_WRITE_AS_IS: Final = OutboundPlan()


@final
@dataclass(slots=True)
class TrackerStatistics:
    """Counters of a :class:`LifetimeTracker`."""

    absorbed_updates: int = 0
    """``session_info_update`` messages turned into publications on an open lifetime (the
    driver counts one once the owner has accepted it)."""
    refused_updates: int = 0
    """``session_info_update`` messages planned as publications that the owner refused (a
    frame over the limit, say): the driver counts them, and never raises into the agent."""
    dropped_fields: int = 0
    """Fields left out of absorbed updates because the negotiated version cannot carry them
    (:attr:`InfoUpdate.dropped`)."""
    passed_through_updates: int = 0
    """``session_info_update`` messages written unchanged: no lifetime was open for their
    session, or they carried fields the owner does not know."""
    replayed_updates: int = 0
    """``session_info_update`` messages sent while a ``session/load`` or ``session/resume``
    of a lifetime that already held its state was running: written unchanged, not folded."""
    forgotten_requests: int = 0
    """Remembered requests dropped unanswered to stay within :data:`PENDING_REQUESTS`."""


@final
class LifetimeTracker:
    """Follows one agent connection's messages and plans the lifetime work around them."""

    __slots__ = ("_pending", "_replays", "_tokens", "forwards_titles", "statistics")

    def __init__(self) -> None:
        # Requests whose response matters: id -> (method, session id, replay token or the
        # title a session/set_title asks for, or None).
        self._pending: dict[RequestId, _Pending] = {}
        # Loads and resumes running, by token: (session id, whether its lifetime already held
        # the state: replayed updates then pass through; otherwise the replay builds it,
        # whether the request replays at all).
        self._replays: dict[int, tuple[str, bool, bool]] = {}
        self._tokens = 0
        self.forwards_titles = False
        """``session/set_title`` reaches the agent (a proxy in front of an agent that
        advertises it): its successful response is planned as
        :attr:`LifetimeStep.ADOPT_TITLE`. Off where the connection answers it itself."""
        self.statistics = TrackerStatistics()

    def inbound(
        self,
        message: Mapping[str, object],
        existed: Callable[[str], bool],
        *,
        protocol_version: int = 1,
    ) -> ReplayStart | None:
        """Note a message from the client; for a ``session/load`` or ``session/resume``, what
        must happen before the agent handles it (:class:`ReplayStart`), else ``None``.

        ``existed`` says whether a session's lifetime exists before this message: open in the
        owner, or kept by its store. ``protocol_version`` is the connection's: whether what
        the handler sends may be replay is :func:`~agent_meta.core._replay.replay_of`'s answer
        (under v2 a ``session/resume`` without a ``replayFrom`` cursor replays nothing, so what
        its handler sends is live: :attr:`ReplayStart.replays` is false).
        """
        method = message.get("method")
        if not isinstance(method, str) or not self._tracks(method):
            return None
        request_id = message.get("id")
        if "id" not in message or not is_request_id(request_id):
            return None  # a notification, or an id the agent will refuse
        params = message.get("params")
        session_id = session_of(params)
        if method not in _REPLAYING_METHODS or session_id is None:
            self._remember(request_id, (method, session_id, _requested_title(method, params)))
            return None
        self._tokens += 1
        token = self._tokens
        self._remember(request_id, (method, session_id, token))
        # A load or resume of the same session still running decides: its lifetime is the one
        # this request finds (opened by it with nothing known, or one that held the state).
        held = self._held_state(session_id)
        replays = replay_of(method, params, protocol_version=protocol_version).may_replay
        if held is None:
            held = existed(session_id)
        self._replays[token] = (session_id, held, replays)
        return ReplayStart(session_id, token, replays, held)

    def outbound(
        self,
        message: Mapping[str, object],
        has_lifetime: Callable[[str], bool],
        *,
        replaying: int | None = None,
        offset_timestamps: bool = False,
    ) -> OutboundPlan:
        """Plan one message the agent sends; ``has_lifetime`` says whether a session's lifetime
        is open in the owner. ``replaying`` is the :attr:`ReplayStart.token` of the
        ``session/load`` or ``session/resume`` whose handler sent the message (``None``: some
        other work of the agent); only what that handler sends, while it runs, is replay.
        ``offset_timestamps``: the owner renders a version whose ``updatedAt`` must be RFC 3339
        with an offset (v2); an update with another ``updatedAt`` is still absorbed, without
        that field (:attr:`InfoUpdate.dropped`), so the agent's call never fails for it."""
        method = message.get("method")
        if isinstance(method, str):
            return self._plan_outgoing(method, message, has_lifetime, replaying, offset_timestamps)
        request_id = message.get("id")
        if "id" not in message or not is_request_id(request_id):
            return _WRITE_AS_IS
        request = self._pending.pop(request_id, None)
        if request is None:
            return _WRITE_AS_IS
        method, session_id, requested = request
        if method == SET_TITLE:
            return _adopted_title(session_id, requested, message)
        return self._plan_answer(request, message)

    def answering(self, message: Mapping[str, object]) -> str | None:
        """The method of the remembered request that ``message`` answers successfully (a
        ``result``), without planning anything: call it before :meth:`outbound` to rewrite
        the result (``initialize``, ``session/list``). ``None`` for anything else."""
        if "method" in message or "result" not in message or "error" in message:
            return None
        request_id = message.get("id")
        if not is_request_id(request_id):
            return None
        request = self._pending.get(request_id)
        return None if request is None else request[0]

    # -- internals -------------------------------------------------------------------------

    def _plan_answer(self, request: _Pending, message: Mapping[str, object]) -> OutboundPlan:
        """Plan the response (or error) to a remembered request."""
        method, session_id, extra = request
        token = extra if isinstance(extra, int) else None
        replay = None if token is None else self._replays.pop(token, None)
        if "result" in message and "error" not in message:
            plan = _plan_response(method, session_id, message["result"])
            if plan.step is LifetimeStep.RESYNC and session_id is not None:
                self._settle(session_id)  # other loads of it now find a lifetime that holds it
            if plan.step is not None or replay is None:
                return plan
        # An error, or a load or resume answered with no object (no success either).
        if replay is not None and not replay[1] and self._held_state(replay[0]) is None:
            # The lifetime it opened with nothing known goes again.
            return OutboundPlan(step=LifetimeStep.DISCARD, session_id=replay[0])
        return _WRITE_AS_IS

    def _tracks(self, method: str) -> bool:
        """Whether a request of ``method`` is remembered until its response."""
        if method == SET_TITLE:
            return self.forwards_titles  # else the connection answers it: no agent response
        return method in _TRACKED_METHODS

    def _remember(self, request_id: RequestId, request: _Pending) -> None:
        self._pending[request_id] = request
        if len(self._pending) > PENDING_REQUESTS:
            _, _, token = self._pending.pop(next(iter(self._pending)))
            if isinstance(token, int):
                self._replays.pop(token, None)
            self.statistics.forgotten_requests += 1

    def _held_state(self, session_id: str) -> bool | None:
        """Whether the lifetime held its state when the first load or resume of
        ``session_id`` still running arrived; ``None`` when none is running."""
        for replaying, held, _ in self._replays.values():
            if replaying == session_id:
                return held
        return None

    def _settle(self, session_id: str) -> None:
        """A load or resume of ``session_id`` succeeded: its lifetime holds the state now."""
        for token, (replaying, _, replays) in self._replays.items():
            if replaying == session_id:
                self._replays[token] = (replaying, True, replays)

    def _plan_outgoing(
        self,
        method: str,
        message: Mapping[str, object],
        has_lifetime: Callable[[str], bool],
        replaying: int | None,
        offset_timestamps: bool,
    ) -> OutboundPlan:
        params = message.get("params")
        session_id = session_of(params)
        if "id" in message:
            return OutboundPlan(session_id=session_id, is_request=True)
        if method != "session/update" or session_id is None:
            return OutboundPlan(session_id=session_id)
        assert isinstance(params, dict)  # session_of found a session id in it
        update = params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") != "session_info_update":
            return OutboundPlan(session_id=session_id)
        info = info_update_of(params, update, offset_timestamps=offset_timestamps)
        if info is None or not has_lifetime(session_id):
            self.statistics.passed_through_updates += 1
            return OutboundPlan(session_id=session_id)
        replay = None if replaying is None else self._replays.get(replaying)
        if replay == (session_id, True, True):
            self.statistics.replayed_updates += 1
            return OutboundPlan(session_id=session_id)
        if info.dropped:
            self.statistics.dropped_fields += len(info.dropped)
        return OutboundPlan(session_id=session_id, update=info)


_Pending: TypeAlias = tuple[str, str | None, int | str | None]

_RENDERED_VERSIONS: Final = frozenset(version for version, _ in WIRE_MODES)
_REPLAYING_METHODS: Final = frozenset({"session/load", "session/resume"})
_TRACKED_METHODS: Final = frozenset(
    {"initialize", "session/new", "session/fork", "session/close", "session/list"}
    | _REPLAYING_METHODS
)


def _requested_title(method: str, params: object) -> str | None:
    """The title a forwarded ``session/set_title`` asks for (kept with the request)."""
    if method != SET_TITLE or not isinstance(params, dict):
        return None
    title = params.get("title")
    return title if isinstance(title, str) else None


def _adopted_title(
    session_id: str | None, requested: object, message: Mapping[str, object]
) -> OutboundPlan:
    """The plan for the agent's answer to a forwarded ``session/set_title``: on success, the
    title it stored (the TypeScript SDK shape's ``{title}``), else the one asked for (the
    RFD's empty result: stored as given)."""
    result = message.get("result")
    if session_id is None or "error" in message or not isinstance(result, dict):
        return _WRITE_AS_IS
    stored = result.get("title")
    title = stored if isinstance(stored, str) else requested
    if not isinstance(title, str):
        return _WRITE_AS_IS
    return OutboundPlan(step=LifetimeStep.ADOPT_TITLE, session_id=session_id, title=title)


def _plan_response(method: str, session_id: str | None, result: object) -> OutboundPlan:
    if method == "initialize":
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if type(version) is int and version in _RENDERED_VERSIONS:
            return OutboundPlan(protocol_version=version)
        return _WRITE_AS_IS
    if method in ("session/new", "session/fork"):
        created = result.get("sessionId") if isinstance(result, dict) else None
        if isinstance(created, str):
            return OutboundPlan(step=LifetimeStep.OPEN, session_id=created)
        return _WRITE_AS_IS
    if session_id is None or not isinstance(result, dict):
        return _WRITE_AS_IS  # every session response is an object; a null one is no success
    if method in _REPLAYING_METHODS:
        return OutboundPlan(step=LifetimeStep.RESYNC, session_id=session_id)
    if method == "session/close":
        return OutboundPlan(step=LifetimeStep.CLOSE, session_id=session_id)
    return _WRITE_AS_IS  # session/list: rewritten before it is planned (see answering())


def replaying_session(message: Mapping[str, object]) -> str | None:
    """The session a ``session/load`` or ``session/resume`` request names (the one whose
    lifetime opens before its handler runs), else ``None``."""
    if message.get("method") not in _REPLAYING_METHODS:
        return None
    if "id" not in message or not is_request_id(message.get("id")):
        return None
    return session_of(message.get("params"))


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """Whether ``value`` is a JSON-RPC request id: a string, an integer or ``null`` (a
    ``session/load`` with ``"id": null`` is served like any other)."""
    return value is None or isinstance(value, str) or (type(value) is int)


def info_update_of(
    params: Mapping[str, object], update: Mapping[str, object], *, offset_timestamps: bool
) -> InfoUpdate | None:
    """The publication a ``session_info_update`` (``params`` of its notification, and their
    ``update``) stands for, or ``None`` when it carries fields the owner would not reproduce
    (it then passes through unchanged). Its values are as received: the owner checks them."""
    if not update.keys() <= _INFO_UPDATE_FIELDS or not params.keys() <= _NOTIFICATION_FIELDS:
        return None
    notification_meta = params.get("_meta")
    if notification_meta is not None and not isinstance(notification_meta, dict):
        return None
    updated_at = update.get("updatedAt", OMITTED)
    dropped: tuple[str, ...] = ()
    if offset_timestamps and isinstance(updated_at, str) and not is_rfc3339(updated_at):
        updated_at = OMITTED  # a v2 client drops it anyway; the rest of the update stands
        dropped = ("updatedAt",)
    return InfoUpdate(
        title=update.get("title", OMITTED),
        updated_at=updated_at,
        meta=update.get("_meta", OMITTED),
        notification_meta=notification_meta,
        dropped=dropped,
    )
