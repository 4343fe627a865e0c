"""What an owner in front of a child agent decides about its session info around load and resume.

``agent-meta own`` runs an agent it did not write as its child. The SDK adapter can tell a
load's replay from live updates by the handler that sends them; in front of a child process
only the order of the frames tells. :class:`ReplayWindows` reads that order, per session:

- **The window.** From a ``session/load`` or ``session/resume`` request to its response, the
  child's ``session_info_update`` frames of that session are its history replayed: they reach
  the client as sent and are not publications (:attr:`Verdict.REPLAY`), except the child's
  current info, an ``updatedAt`` newer than everything known or replayed: a publication
  (:attr:`Verdict.LIVE`). That is the owner's rule "replay is replay", decided once by
  :class:`~agent_meta.core._replay.ReplayWindow`, which the SDK's lifetime tracker
  (:mod:`agent_meta.sansio.inbound._marks`) and the client-side watcher ask too; a clear
  (``_meta: null``) stays replay here whatever its ``updatedAt`` (below). A v2
  ``session/resume`` without ``replayFrom`` replays nothing, so what the child sends in it is its
  live state (:attr:`Verdict.LIVE`), but for a clear (``_meta: null``): forwarded as sent too,
  it is state only with the snapshot that follows it (below).
- **The child's own resync.** A child may end its replay with a resync of its own: ``_meta:
  null``, then its current state (codex-acp does on v2). The last clear of a window counts as
  one when a snapshot (a ``_meta`` object) follows it and nothing but session info and status
  updates come after it before the response; what it and the frames after it carry is then
  the child's state. A clear alone is not taken as the child's state (a restarted child that
  holds none says so): the owner's state stands, and its resync puts the client right.
- **The response** (:meth:`ReplayWindows.answered`). The lifetime takes the child's state
  (:attr:`Settlement.seed`): a lifetime that held nothing before the request is built from
  everything the window carried (folded with the child's rule); one that held its state takes
  only the child's own resync, if there was one (stale replay never overwrites it). Then
  :attr:`Settlement.missing` says what the client still lacks to hold exactly that state:
  nothing, a patch of values the owner holds (v2), or the owner's full resync (R4; always on
  v1, where a title or ``_meta`` cannot be cleared and the full object is the way).
- **The tail.** History that keeps coming after a replaying window's response, before the
  client asks anything more of the session, is the rest of the replay; a ``session_info_update``
  after such history is stale (:attr:`Verdict.STALE`): not state, not forwarded, unless it is
  the child's current info by the same rule as in the window (an ``updatedAt`` newer than
  everything known or replayed): then it is a publication, and the tail ends.

The child's rule for ``_meta`` is the shallow patch by top-level key on both versions (a v1
child that sends partial objects is patching), or, with ``replace_meta`` (a v1 child known to
send whole objects), each object replacing the whole ``_meta``; v2 always patches.

Why this is not the SDK tracker's window (:class:`~agent_meta.sansio.inbound._marks.Window`): both
ask
:class:`~agent_meta.core._replay.ReplayWindow` what is current info, but the rest is decided
differently, for a reason. The tracker knows which request's handler sent a frame, and every
publication of its agent went through the owner it serves: an agent's own resync can only
repeat what that owner holds, so it is replay, and a replay that builds a state goes *beneath*
what was published meanwhile. In front of a child process only the order of frames tells, and
the child is the only source of its session's state (a child restored from its own disk holds
what no owner saw): its own resync states that whole, so it is taken as the child's state, and
a window that builds the lifetime takes the fold of all it carried.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Final, final

from ...core._patch import patch_in_place, replacement_patch
from ...core._replay import ReplayWindow
from ...core._sentinel import OMITTED, Omitted
from ...core._session_info import SessionInfo, SessionInfoPatch, apply_session_info_patch

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...core._json import JsonObject

__all__ = [
    "STATUS_UPDATES",
    "Missing",
    "ReplayWindows",
    "Settlement",
    "Verdict",
]

STATUS_UPDATES: Final = frozenset(
    {
        "state_update",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "usage_update",
    }
)
"""``session/update`` kinds that report status, not conversation: never history. Every other
kind (a message, a chunk, a tool call, a plan, an unknown kind) counts as history."""


class Verdict(enum.Enum):
    """What becomes of one ``session_info_update`` of the child."""

    LIVE = "live"
    """The child's current state: a publication into the session's lifetime."""
    REPLAY = "replay"
    """History in a load or resume window: forwarded as sent, not folded."""
    STALE = "stale"
    """History replayed after the window's response: neither state nor forwarded (counted)."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Missing:
    """What the client lacks, at a load or resume response, to hold the owner's state."""

    resync: bool = False
    """Send the owner's full resync (R4): ``_meta: null`` then the snapshot on v2, the whole
    object on v1."""
    patch: SessionInfoPatch | None = None
    """Otherwise (v2), publish this patch of values the owner already holds; ``None`` with
    ``resync`` false: the client holds them all."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Settlement:
    """A load or resume answered successfully: seed the lifetime, then send what is missing."""

    seed: SessionInfoPatch | None
    """The change that makes the lifetime's known state the child's (applied without a frame),
    or ``None``: the state stands as it is."""
    missing: Missing


_UNKNOWN: Final = object()
"""A field of the client's view that this window never defined: the client may hold anything
(a reconnecting client keeps what it had)."""


@final
class _Fold:
    """Session info folded from frames, each field unknown until a frame defines it."""

    __slots__ = ("meta", "title", "updated_at")

    def __init__(self) -> None:
        self.title: object = _UNKNOWN
        self.updated_at: object = _UNKNOWN
        self.meta: JsonObject | object = _UNKNOWN

    def apply(self, patch: SessionInfoPatch, *, replace_meta: bool, partial_defines: bool) -> None:
        """Fold ``patch``. ``replace_meta``: an object replaces the whole ``_meta``;
        ``partial_defines``: a patch object over an unknown ``_meta`` makes it known (the fold
        of what the child holds, from nothing), else it stays unknown (what the client holds
        is only known once a clear or a whole object defines it)."""
        if patch.title is not OMITTED:
            self.title = patch.title
        if patch.updated_at is not OMITTED:
            self.updated_at = patch.updated_at
        meta = patch.meta
        if meta is OMITTED:
            return
        if meta is None:
            self.meta = {}
        elif replace_meta:
            self.meta = {key: value for key, value in meta.items() if value is not None}
        elif isinstance(self.meta, dict):
            patch_in_place(self.meta, meta)
        elif partial_defines:
            self.meta = {key: value for key, value in meta.items() if value is not None}

    def as_patch(self) -> SessionInfoPatch:
        """The fields this fold defines, as a patch (``_meta`` a whole object)."""
        meta = self.meta
        return SessionInfoPatch(
            title=_known_text(self.title),
            updated_at=_known_text(self.updated_at),
            meta=meta if isinstance(meta, dict) else OMITTED,
        )


def _known_text(value: object) -> str | None | Omitted:
    if value is _UNKNOWN:
        return OMITTED
    assert value is None or isinstance(value, str)
    return value


@final
class _Window:
    """One session's load or resume requests still unanswered, and what they carried."""

    __slots__ = ("child", "held", "judge", "pending", "replays", "resync", "snapshot", "view")

    def __init__(self, *, held: bool, replays: bool) -> None:
        self.held = held
        self.replays = replays
        self.pending = 0
        self.judge = ReplayWindow()  # replay is replay: the child's current info
        self.child = _Fold()  # everything the window carried, by the child's rule
        self.resync: _Fold | None = None  # from the child's last clear on, while it stands
        self.snapshot = False  # a _meta object followed that clear
        self.view = _Fold()  # what the client holds, by the client's rule


@final
class ReplayWindows:
    """The load and resume windows of one connection to a child agent, and their tails."""

    __slots__ = (
        "_requests",
        "_tail_judges",
        "_tails",
        "_windows",
        "protocol_version",
        "replace_meta",
    )

    def __init__(self, *, replace_meta: bool = False) -> None:
        self.replace_meta = replace_meta
        """``--child-meta replace``: on v1, each ``_meta`` object of the child is its whole
        metadata (v2 always patches)."""
        self.protocol_version = 1
        """The negotiated version (the driver sets it when ``initialize`` is answered)."""
        self._windows: dict[str, _Window] = {}
        # The loads and resumes sent to the child and not answered: request id -> session.
        self._requests: dict[object, str] = {}
        # Sessions whose replaying window was answered: whether history came since, and the
        # window's judge (an update newer than all it saw is current info even in the tail).
        self._tails: dict[str, bool] = {}
        self._tail_judges: dict[str, ReplayWindow] = {}

    @property
    def replaces(self) -> bool:
        """Whether the child's ``_meta`` objects replace the whole ``_meta`` (``replace_meta``
        on v1); otherwise they are shallow patches."""
        return self.replace_meta and self.protocol_version < 2

    def watching(self, session_id: str) -> bool:
        """Whether a ``session_info_update`` of ``session_id`` needs :meth:`info`'s verdict
        (a window or a tail is open); otherwise it is live."""
        return session_id in self._windows or session_id in self._tails

    def in_window(self, session_id: str) -> bool:
        """Whether a load or resume of ``session_id`` is unanswered."""
        return session_id in self._windows

    # -- the client's requests -----------------------------------------------------------
    def opened(self, session_id: str, request_id: object, *, held: bool, replays: bool) -> None:
        """A ``session/load`` or ``session/resume`` of ``session_id`` (``request_id``) goes to
        the child. ``held``: its lifetime held its state before (open, or kept by the store);
        ``replays``: the request replays history (every v1 load and resume; a v2 resume with
        ``replayFrom``). A second one while the first is unanswered joins its window."""
        self._end_tail(session_id)
        window = self._windows.get(session_id)
        if window is None:
            window = self._windows[session_id] = _Window(held=held, replays=replays)
        window.replays = window.replays or replays
        window.pending += 1
        self._requests[request_id] = session_id

    def answering(self, request_id: object) -> str | None:
        """The session of the load or resume a response of the child answers, if it answers one
        (then call :meth:`answered`)."""
        return self._requests.pop(request_id, None)

    def asked(self, session_id: str) -> None:
        """The client sent another request about ``session_id``: a replay's tail ends."""
        self._end_tail(session_id)

    # -- the child's frames ----------------------------------------------------------------
    def info(
        self,
        session_id: str,
        patch: SessionInfoPatch,
        known_updated_at: Callable[[], object] = lambda: OMITTED,
    ) -> Verdict:
        """One valid ``session_info_update`` of ``session_id`` from the child;
        ``known_updated_at()``: the lifetime's known ``updatedAt`` now (asked only when the
        verdict depends on it; the default knows none, so nothing in a window is current)."""
        window = self._windows.get(session_id)
        if window is None:
            if not self._tails.get(session_id):
                return Verdict.LIVE
            judge = self._tail_judges.get(session_id)
            clear = self.protocol_version >= 2 and patch.meta is None
            if (
                judge is not None
                and not clear
                and judge.is_current(patch.updated_at, known_updated_at)
            ):
                self._end_tail(session_id)  # the child is live again: its current info
                return Verdict.LIVE
            return Verdict.STALE
        window.child.apply(patch, replace_meta=self.replaces, partial_defines=True)
        clear = self.protocol_version >= 2 and patch.meta is None
        if clear:
            window.resync = _Fold()  # the child's own resync may begin here
            window.snapshot = False
        if window.resync is not None:
            window.resync.apply(patch, replace_meta=self.replaces, partial_defines=True)
            window.snapshot = window.snapshot or isinstance(patch.meta, dict)
        window.view.apply(patch, replace_meta=self.protocol_version < 2, partial_defines=False)
        if not window.replays:
            return Verdict.REPLAY if clear else Verdict.LIVE
        current = window.judge.is_current(patch.updated_at, known_updated_at)
        if current and not clear:
            return Verdict.LIVE  # the child's current info: a publication
        return Verdict.REPLAY  # a clear is state only with the snapshot that follows it

    def other(self, session_id: str, kind: object) -> None:
        """Another ``session/update`` of ``session_id`` (``kind``: its ``sessionUpdate``)."""
        if kind in STATUS_UPDATES:
            return
        window = self._windows.get(session_id)
        if window is not None:
            window.resync = None  # history after the clear: the clear was history too
        elif session_id in self._tails:
            self._tails[session_id] = True

    # -- responses ---------------------------------------------------------------------------
    def answered(self, session_id: str, *, success: bool, known: SessionInfo) -> Settlement | None:
        """The child answered a load or resume of ``session_id`` (see :meth:`answering`);
        ``known`` is the lifetime's state now. On success, how to settle it
        (:class:`Settlement`), else ``None``."""
        window = self._windows.get(session_id)
        if window is None:
            return None
        window.pending -= 1
        if window.pending <= 0:
            del self._windows[session_id]
            if success and window.replays:
                self._tails[session_id] = False
                self._tail_judges[session_id] = window.judge
        if not success:
            return None
        seed = self._seed(window, known)
        after = known if seed is None else apply_session_info_patch(known, seed)
        missing = self._missing(window.view, after)
        if window.pending > 0:  # another load or resume of it is still running
            window.held = True  # the lifetime holds the state now
            window.resync = None
            window.view = _Fold()  # judged afresh at its own response
        return Settlement(seed, missing)

    def closed(self, session_id: str) -> None:
        """The session's lifetime ended: forget its window and tail (a load or resume of it
        still unanswered finds none)."""
        self._windows.pop(session_id, None)
        self._end_tail(session_id)

    def _end_tail(self, session_id: str) -> None:
        self._tails.pop(session_id, None)
        self._tail_judges.pop(session_id, None)

    def _seed(self, window: _Window, known: SessionInfo) -> SessionInfoPatch | None:
        if window.replays and not window.held:
            state = window.child  # nothing known before: the replay is all there is
        elif window.resync is not None and window.snapshot:
            state = window.resync  # the child's own resync
        else:
            return None  # history over a held state, or live publications made already
        child = state.as_patch()
        meta = child.meta
        if isinstance(meta, dict):
            meta = replacement_patch(known.meta, meta) or OMITTED
        seed = SessionInfoPatch(
            title=_differs(known.title, child.title),
            updated_at=_differs(known.updated_at, child.updated_at),
            meta=meta,
        )
        if seed == SessionInfoPatch():
            return None
        return seed

    def _missing(self, view: _Fold, known: SessionInfo) -> Missing:
        if self.protocol_version < 2 or not isinstance(view.meta, dict):
            return Missing(resync=True)
        meta = replacement_patch(view.meta or None, known.meta)
        title = _differs(view.title, known.title)
        updated_at = _differs(view.updated_at, known.updated_at)
        patch = SessionInfoPatch(title=title, updated_at=updated_at, meta=meta or OMITTED)
        if patch == SessionInfoPatch():
            return Missing()
        return Missing(patch=patch)


def _differs(held: object, wanted: str | None | Omitted) -> str | None | Omitted:
    """The value that makes a field ``held`` (by the client, or the lifetime) the ``wanted``
    one, or ``OMITTED``: nothing is wanted (unknown: nothing to restore), or it is held."""
    if wanted is OMITTED or held == wanted:
        return OMITTED
    return wanted
