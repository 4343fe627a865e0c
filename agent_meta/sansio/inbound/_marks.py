"""What the handlers of the requests that open lifetimes send, kept apart (pure).

A connection whose messages an agent's own stack builds (the official SDK) tells the
:class:`~agent_meta.sansio.inbound._tracker.LifetimeTracker` which request's handler sent each
message: every ``session/load``, ``session/resume``, ``session/new`` and ``session/fork`` gets a
token as it arrives, the driver marks the handler (and the tasks it starts) with it, and passes it
back with what they send, until that request is answered. :class:`HandlerMarks` keeps what
each token's handler has sent that the lifetime cannot take yet:

- an :class:`Opening` (``session/new``, ``session/fork``): the ``session_info_update`` messages its
  handler sent for a session with no lifetime yet. They reach the client as they are, and the
  lifetime the response opens starts knowing them (nothing a client was sent is missing from
  the owner's state);
- a :class:`Window` (``session/load``, ``session/resume``): the replay. What its handler sends
  is judged by :class:`~agent_meta.core._replay.ReplayWindow` ("replay is replay"): the
  agent's current info is a publication; the rest is history. History never touches the
  lifetime's state. When the lifetime already held its state it is only written; when the
  request opened the lifetime with nothing known, the window folds its history into a scratch
  state of its own, and at its successful response that scratch goes *beneath* what the
  lifetime learned meanwhile (:func:`underlay`), before the resync. So two loads of one
  session replaying at once never fold into one state, whichever answers first.

Every update kept is validated as a publication first (an invalid one is counted, and only
written). Memory: one fold per session an opening's handler names (at most
:data:`OPENING_SESSIONS`), one per building window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from ...core._errors import AgentMetaError
from ...core._replay import ReplayWindow
from ...core._sentinel import OMITTED
from ...core._timestamps import is_rfc3339
from .._encode import encode_update

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ...core._session_info import SessionInfo

__all__ = [
    "OPENING_SESSIONS",
    "HandlerMarks",
    "InfoFold",
    "InfoUpdate",
    "Opening",
    "Window",
    "info_update_of",
    "underlay",
]

OPENING_SESSIONS: Final = 16
"""Sessions without a lifetime whose updates one ``session/new`` or ``session/fork`` handler
may have kept (the session it creates is one; a handler naming more passes the rest through)."""


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


_INFO_UPDATE_FIELDS: Final = frozenset({"sessionUpdate", "title", "updatedAt", "_meta"})
_NOTIFICATION_FIELDS: Final = frozenset({"sessionId", "update", "_meta"})


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


@final
class InfoFold:
    """Session info folded from nothing known: what a client that knew nothing holds after
    these updates (the shallow patch rule; a ``_meta`` of no keys is none)."""

    __slots__ = ("meta", "title", "updated_at")

    def __init__(self) -> None:
        self.title: object = OMITTED
        self.updated_at: object = OMITTED
        self.meta: dict[str, object] = {}

    def add(self, update: InfoUpdate) -> bool:
        """Fold ``update`` in; ``False`` (nothing folded) when the owner would refuse it as a
        publication (a value nested too deep, say)."""
        try:
            # The tracker has already left out what the version forbids (InfoUpdate.dropped).
            encode_update(
                title=update.title,
                updated_at=update.updated_at,
                meta=update.meta,
                offset_timestamps=False,
            )
        except AgentMetaError:
            return False
        if update.title is not OMITTED:
            self.title = update.title
        if update.updated_at is not OMITTED:
            self.updated_at = update.updated_at
        meta = update.meta
        if meta is None:
            self.meta = {}
        elif isinstance(meta, dict):
            for key, value in meta.items():
                if value is None:
                    self.meta.pop(key, None)
                else:
                    self.meta[key] = value
        return True

    def as_update(self) -> InfoUpdate | None:
        """The fold as one update to make known (``None``: nothing in it)."""
        if self.title is OMITTED and self.updated_at is OMITTED and not self.meta:
            return None
        return InfoUpdate(self.title, self.updated_at, dict(self.meta) if self.meta else OMITTED)


@final
class Opening:
    """A ``session/new`` or ``session/fork`` still unanswered: what its handler sent for
    sessions with no lifetime, by session id."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept: dict[str, InfoFold] = {}

    def keep(self, session_id: str, update: InfoUpdate) -> bool:
        """Keep ``update`` for the lifetime of ``session_id``, should the response open it;
        ``False`` when it is not kept (invalid, or too many sessions)."""
        fold = self.kept.get(session_id)
        if fold is None:
            if len(self.kept) >= OPENING_SESSIONS:
                return False
            fold = self.kept[session_id] = InfoFold()
        return fold.add(update)


@final
class Window:
    """A ``session/load`` or ``session/resume`` still unanswered, and what it has replayed.

    ``builds``: the request opened the lifetime with nothing known (and no load or resume of it
    has succeeded since): its history goes to :attr:`scratch`, and :attr:`touched_keys` /
    :attr:`cleared` record what publications changed meanwhile (a key they removed must not
    come back from the history). Otherwise the lifetime holds its state and history is only
    written."""

    __slots__ = ("builds", "cleared", "judge", "replays", "scratch", "session_id", "touched_keys")

    def __init__(self, session_id: str, *, builds: bool, replays: bool) -> None:
        self.session_id = session_id
        self.replays = replays
        """Whether the request replays at all (a v2 resume without ``replayFrom`` does not:
        what its handler sends is live)."""
        self.judge = ReplayWindow()
        self.builds = builds
        self.scratch = InfoFold()
        self.cleared = False
        self.touched_keys: set[str] = set()

    def held(self) -> None:
        """A load or resume of the session succeeded: the lifetime holds its state now."""
        self.builds = False
        self.scratch = InfoFold()
        self.touched_keys = set()

    def published(self, update: InfoUpdate) -> None:
        """A publication on the session's lifetime while the window builds."""
        meta = update.meta
        if meta is None:
            self.cleared = True
        elif isinstance(meta, dict):
            self.touched_keys.update(meta)


def underlay(window: Window, known: SessionInfo) -> InfoUpdate | None:
    """What a window's history adds beneath ``known``, the lifetime's state when the window
    succeeds: the history is older than anything published meanwhile, so only the fields and
    top-level ``_meta`` keys nothing published meanwhile has set, removed or cleared. ``None``
    when it adds nothing."""
    scratch = window.scratch
    title = scratch.title if known.title is OMITTED else OMITTED
    updated_at = scratch.updated_at if known.updated_at is OMITTED else OMITTED
    meta = _meta_beneath(window, known.meta or {})
    if title is OMITTED and updated_at is OMITTED and meta is OMITTED:
        return None
    return InfoUpdate(title, updated_at, meta)


def _meta_beneath(window: Window, held: Mapping[str, object]) -> object:
    """The keys of a window's history that nothing published meanwhile has touched, as a
    patch (``OMITTED``: none)."""
    if window.cleared:
        return OMITTED
    added = {
        key: value
        for key, value in window.scratch.meta.items()
        if key not in held and key not in window.touched_keys
    }
    return added or OMITTED


@final
class HandlerMarks:
    """The requests whose handlers are marked, by token (see the module docstring)."""

    __slots__ = ("_marks", "_tokens", "_windows")

    def __init__(self) -> None:
        self._marks: dict[int, Window | Opening] = {}
        self._windows: dict[str, list[Window]] = {}  # the windows by session, oldest first
        self._tokens = 0

    def start_opening(self) -> int:
        """A ``session/new`` or ``session/fork`` arrived: its token."""
        return self._start(Opening())

    def start_window(self, session_id: str, *, existed: Callable[[], bool], replays: bool) -> int:
        """A ``session/load`` or ``session/resume`` of ``session_id`` arrived (``existed()``:
        its lifetime held its state before): its token. A load or resume of the same session
        still running decides instead (``existed`` is not asked): this request finds the
        lifetime that one found, building its state or holding it."""
        building = self.building(session_id)
        builds = not existed() if building is None else building
        window = Window(session_id, builds=builds, replays=replays)
        self._windows.setdefault(session_id, []).append(window)
        return self._start(window)

    def _start(self, mark: Window | Opening) -> int:
        self._tokens += 1
        self._marks[self._tokens] = mark
        return self._tokens

    def window(self, token: int | None) -> Window | None:
        """The window of ``token``, while its request is unanswered."""
        mark = None if token is None else self._marks.get(token)
        return mark if isinstance(mark, Window) else None

    def opening(self, token: int | None) -> Opening | None:
        """The opening of ``token``, while its request is unanswered."""
        mark = None if token is None else self._marks.get(token)
        return mark if isinstance(mark, Opening) else None

    def end(self, token: int) -> Window | Opening | None:
        """The request of ``token`` was answered (or forgotten): its mark, now gone."""
        mark = self._marks.pop(token, None)
        if isinstance(mark, Window):
            windows = self._windows[mark.session_id]
            windows.remove(mark)
            if not windows:
                del self._windows[mark.session_id]
        return mark

    def building(self, session_id: str) -> bool | None:
        """Whether the loads and resumes of ``session_id`` still running build its state;
        ``None`` when none is running."""
        windows = self._windows.get(session_id)
        return None if windows is None else windows[0].builds

    def published(self, session_id: str, update: InfoUpdate) -> None:
        """A publication on ``session_id``'s lifetime: the windows that build it note it."""
        for window in self._windows.get(session_id, ()):
            if window.builds:
                window.published(update)

    def settle(self, session_id: str) -> None:
        """A load or resume of ``session_id`` succeeded: its lifetime holds the state now."""
        for window in self._windows.get(session_id, ()):
            window.held()
