"""What the session lifetimes need around each message of an agent connection.

Every connection hands its :class:`~agent_meta.owner._policy.LifetimePolicy` whole messages:
every request it receives, every response, notification and request it sends. agent_meta's
trio connection does (``trio_connection/_dispatch.py``), the official-SDK adapter does at the
SDK's message seam (``sdk/_adapter.py``), and so does ``agent-meta own``'s relay in front of a
child agent. :class:`LifetimeTracker`, the policy's pure part, reads those messages and
decides, without any agent code, what the session lifetimes need (R4, R5, R6, R10):

- ``initialize``'s response sets the protocol version the owner renders for (R10), when it
  is one the owner can render;
- :meth:`LifetimeTracker.inbound` gives every ``session/load``, ``session/resume``,
  ``session/new`` and ``session/fork`` a token; the driver marks the request's handler (and
  the tasks it starts) with it and passes it back with what they send (``handling``), until
  the request is answered (:mod:`agent_meta.sansio.inbound._marks`);
- ``session/load`` and ``session/resume`` open (or keep) the session's lifetime when the
  request arrives; their successful response is preceded by a resync (R4). A lifetime the
  request opened with nothing known is closed again when it fails. While the handler of a
  replaying request runs (every load, and every v1 resume: agents replay on a v1 resume too;
  a v2 resume only with a ``replayFrom`` cursor, as v2 says: ``core/_replay.py``, the one
  answer every part of agent_meta gives), the ``session_info_update`` messages *it* sends are
  replay, except the agent's current info, a newer ``updatedAt`` than anything known or
  replayed (:class:`~agent_meta.core._replay.ReplayWindow`: "replay is replay"), which is a
  publication. Replay never joins the state: a lifetime that held its state before the
  request (open, or kept by the store) only has it written (re-applying old patches would bring
  back removed keys), and the resync then puts the client right; a lifetime the request opened
  with nothing known is built from it, in a scratch state of the request's own that goes
  beneath what was published meanwhile once the request succeeds (the plan's ``seed``, before
  the resync). A live update sent meanwhile by other work of the agent (a background task) is
  absorbed, so the resync carries it;
- ``session/new`` and ``session/fork`` open the lifetime their response names, before that
  response is written; what their handler sent for that session before (a
  ``session_info_update`` the client already has) becomes its known state as it opens (the
  plan's ``seed``);
- ``session/close``'s successful response ends the lifetime before it is written, so nothing
  of the session follows it (R5, R6);
- a ``session_info_update`` for a session with an open lifetime becomes a publication, so its
  fields join the known state (R1); for any other session (but the one a ``session/new`` or
  ``session/fork`` handler is opening) it passes through unchanged and is counted;
- where ``session/set_title`` reaches the agent (a proxy in front of an agent that advertises
  it, :attr:`LifetimeTracker.forwards_titles`), its successful response makes the title the
  client's (R13) before it is written;
- an error response changes no lifetime.

The tracker also says which request a response answers (:meth:`LifetimeTracker.answering`), so
that the connection can rewrite an ``initialize`` or ``session/list`` result first
(:mod:`agent_meta.sansio.inbound._titles`).

Only requests whose response matters are remembered, at most :data:`PENDING_REQUESTS` at a
time. The tracker is pure: the driver asks the owner whether a lifetime is open and carries out
the plan.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias, final

from ...core._jsonrpc import RequestId, is_request_id, session_of
from ...core._replay import replay_of
from ...core._session_info import SessionInfo
from .._modes import WIRE_MODES
from ._marks import HandlerMarks, InfoUpdate, Opening, Window, info_update_of, underlay
from ._titles import SET_TITLE

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "PENDING_REQUESTS",
    "InfoUpdate",
    "LifetimeStep",
    "LifetimeTracker",
    "OpeningStart",
    "OutboundPlan",
    "ReplayStart",
    "TrackerStatistics",
    "info_update_of",
    "replaying_session",
]

PENDING_REQUESTS: Final = 4096
"""Requests awaiting their response that the tracker remembers; the oldest is forgotten first."""


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
    sends, passed back as ``outbound(..., handling=token)``, is that request's replay."""

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
class OpeningStart:
    """A ``session/new`` or ``session/fork`` arrived: mark the handler with ``token``; what it
    sends for the session it creates, before the response opens its lifetime, is kept for that
    lifetime."""

    token: int


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
    seed: InfoUpdate | None = None
    """With ``step``: fields to make known without a frame (``SessionLifetime.seed``), after an
    ``OPEN`` (what the request's handler sent before the lifetime opened, already written) or
    before a ``RESYNC`` (the history a replay built the state from, beneath what is known)."""
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
    seeded_updates: int = 0
    """``session_info_update`` messages written unchanged and kept for a lifetime's known
    state, without a frame of the owner: sent by a ``session/new`` or ``session/fork``
    handler before its response opened the lifetime, or replayed by a load or resume that
    builds the state (kept beneath what is published meanwhile, at its response)."""
    forgotten_requests: int = 0
    """Remembered requests dropped unanswered to stay within :data:`PENDING_REQUESTS`."""


@final
class LifetimeTracker:
    """Follows one agent connection's messages and plans the lifetime work around them."""

    __slots__ = ("_marks", "_pending", "forwards_titles", "statistics")

    def __init__(self) -> None:
        # Requests whose response matters: id -> (method, session id, handler token or the
        # title a session/set_title asks for, or None).
        self._pending: dict[RequestId, _Pending] = {}
        # What the marked handlers sent (loads, resumes, new and fork), by token.
        self._marks = HandlerMarks()
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
    ) -> ReplayStart | OpeningStart | None:
        """Note a message from the client; for a ``session/load`` or ``session/resume``, what
        must happen before the agent handles it (:class:`ReplayStart`), for a ``session/new``
        or ``session/fork`` the token to mark its handler with (:class:`OpeningStart`), else
        ``None``.

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
        if method in _OPENING_METHODS:
            token = self._marks.start_opening()
            self._remember(request_id, (method, session_id, token))
            return OpeningStart(token)
        if method not in _REPLAYING_METHODS or session_id is None:
            self._remember(request_id, (method, session_id, _requested_title(method, params)))
            return None
        replays = replay_of(method, params, protocol_version=protocol_version).may_replay
        token = self._marks.start_window(
            session_id, existed=lambda: existed(session_id), replays=replays
        )
        self._remember(request_id, (method, session_id, token))
        window = self._marks.window(token)
        held = window is not None and not window.builds
        return ReplayStart(session_id, token, replays, held)

    def outbound(
        self,
        message: Mapping[str, object],
        has_lifetime: Callable[[str], bool],
        *,
        handling: int | None = None,
        offset_timestamps: bool = False,
        known: Callable[[str], SessionInfo] | None = None,
    ) -> OutboundPlan:
        """Plan one message the agent sends; ``has_lifetime`` says whether a session's lifetime
        is open in the owner, ``known`` what its known state is (a snapshot; ``None``: nothing
        is known of any). ``handling`` is the token (:attr:`ReplayStart.token`,
        :attr:`OpeningStart.token`) of the request whose handler sent the message (``None``:
        some other work of the agent); only what that handler sends, while it runs, is that
        request's. ``offset_timestamps``: the owner renders a version whose ``updatedAt`` must
        be RFC 3339 with an offset (v2); an update with another ``updatedAt`` is still
        absorbed, without that field (:attr:`InfoUpdate.dropped`), so the agent's call never
        fails for it."""
        state = _unknown if known is None else known
        method = message.get("method")
        if isinstance(method, str):
            return self._plan_outgoing(
                method, message, has_lifetime, handling, offset_timestamps, state
            )
        request_id = message.get("id")
        if "id" not in message or not is_request_id(request_id):
            return _WRITE_AS_IS
        request = self._pending.pop(request_id, None)
        if request is None:
            return _WRITE_AS_IS
        method, session_id, requested = request
        if method == SET_TITLE:
            return _adopted_title(session_id, requested, message)
        return self._plan_answer(request, message, state)

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

    def _plan_answer(
        self,
        request: _Pending,
        message: Mapping[str, object],
        known: Callable[[str], SessionInfo],
    ) -> OutboundPlan:
        """Plan the response (or error) to a remembered request."""
        method, session_id, extra = request
        token = extra if isinstance(extra, int) else None
        mark = None if token is None else self._marks.end(token)
        if "result" in message and "error" not in message:
            plan = self._seeded(_plan_response(method, session_id, message["result"]), mark, known)
            if plan.step is not None or not isinstance(mark, Window):
                return plan
        # An error, or a load or resume answered with no object (no success either).
        if (
            isinstance(mark, Window)
            and mark.builds
            and self._marks.building(mark.session_id) is None
        ):
            # The lifetime it opened with nothing known goes again.
            return OutboundPlan(step=LifetimeStep.DISCARD, session_id=mark.session_id)
        return _WRITE_AS_IS

    def _seeded(
        self,
        plan: OutboundPlan,
        mark: Window | Opening | None,
        known: Callable[[str], SessionInfo],
    ) -> OutboundPlan:
        """A successful response's plan with what its handler left for the lifetime: what a
        new session's handler sent before the lifetime opened, the state a replay built."""
        session_id = plan.session_id
        seed = None
        if plan.step is LifetimeStep.OPEN and isinstance(mark, Opening) and session_id:
            fold = mark.kept.get(session_id)
            seed = None if fold is None else fold.as_update()
        elif plan.step is LifetimeStep.RESYNC and session_id is not None:
            if isinstance(mark, Window) and mark.builds:
                seed = underlay(mark, known(session_id))
            self._marks.settle(session_id)  # other loads of it find a lifetime that holds it
        return plan if seed is None else dataclasses.replace(plan, seed=seed)

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
                self._marks.end(token)
            self.statistics.forgotten_requests += 1

    def _plan_outgoing(
        self,
        method: str,
        message: Mapping[str, object],
        has_lifetime: Callable[[str], bool],
        handling: int | None,
        offset_timestamps: bool,
        known: Callable[[str], SessionInfo],
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
        if info is None:
            self.statistics.passed_through_updates += 1
            return OutboundPlan(session_id=session_id)
        return self._plan_info(session_id, info, has_lifetime, handling, known)

    def _plan_info(
        self,
        session_id: str,
        info: InfoUpdate,
        has_lifetime: Callable[[str], bool],
        handling: int | None,
        known: Callable[[str], SessionInfo],
    ) -> OutboundPlan:
        """Plan a ``session_info_update`` the owner can reproduce: a publication, history, or
        (no lifetime yet) an update written as it is, perhaps kept for the lifetime to come."""
        if not has_lifetime(session_id):
            opening = self._marks.opening(handling)
            if opening is not None and opening.keep(session_id, info):
                self.statistics.seeded_updates += 1  # the lifetime its response opens knows it
            else:
                self.statistics.passed_through_updates += 1
            return OutboundPlan(session_id=session_id)
        window = self._marks.window(handling)
        if window is not None and window.session_id == session_id and window.replays:
            current = window.judge.is_current(info.updated_at, lambda: known(session_id).updated_at)
            if not current:
                return self._replayed(window, info)
        self._marks.published(session_id, info)
        if info.dropped:
            self.statistics.dropped_fields += len(info.dropped)
        return OutboundPlan(session_id=session_id, update=info)

    def _replayed(self, window: Window, info: InfoUpdate) -> OutboundPlan:
        """History a load or resume replays: written as it is, kept in the window's scratch
        state when the window builds the lifetime's state."""
        if window.builds and window.scratch.add(info):
            self.statistics.seeded_updates += 1
        else:
            self.statistics.replayed_updates += 1
        return OutboundPlan(session_id=window.session_id)


_Pending: TypeAlias = tuple[str, str | None, int | str | None]

_RENDERED_VERSIONS: Final = frozenset(version for version, _ in WIRE_MODES)
_REPLAYING_METHODS: Final = frozenset({"session/load", "session/resume"})
_OPENING_METHODS: Final = frozenset({"session/new", "session/fork"})
_TRACKED_METHODS: Final = frozenset(
    {"initialize", "session/close", "session/list"} | _OPENING_METHODS | _REPLAYING_METHODS
)
_NOTHING_KNOWN: Final = SessionInfo()


def _unknown(_session_id: str) -> SessionInfo:
    """The known state when the driver tells none: nothing."""
    return _NOTHING_KNOWN


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
