"""The session-info rules a client can observe, checked frame by frame (sans-IO).

``agent-meta proxy`` and ``agent-meta check`` both feed every line of an ACP connection, in the
order it was read, to one :class:`Watcher`. What the client holds is folded by the client's own
fold, a :class:`~agent_meta.testing.ClientMirror` of the negotiated protocol version (without a
transcript, so a proxy that runs for days keeps only each session's state); the watcher reports
a :class:`Finding` wherever the agent breaks a rule the client can see, and keeps what the
agent itself holds, by the same rule (:func:`~agent_meta.testing._mirror.fold_meta`). It does no
I/O and never raises on bad input: a malformed line is a finding, not an error.
"""

from __future__ import annotations

import collections
import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

from ..core._json import STRICT_JSON
from ..core._jsonrpc import session_of
from ..core._replay import replay_of
from ..core._sentinel import OMITTED
from ..core._timestamps import is_rfc3339
from ..testing._mirror import ClientMirror, MirrorError, fold_meta
from ._current import CurrentInfo, is_state
from ._findings import RULES, Finding, Frame, Meta, Rule, Source, short_meta, v1_misreading

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "RULES",
    "Finding",
    "Frame",
    "Meta",
    "Rule",
    "Source",
    "Watcher",
    "short_meta",
]  # the shared pieces are re-exported from _findings, where they live

_NOT_REPLAY: Final = frozenset(
    {
        "session_info_update",
        "state_update",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "usage_update",
    }
)
"""``session/update`` kinds that report status, not conversation: never part of a replay."""

_RESTORE_METHODS: Final = frozenset({"session/load", "session/resume"})

_WINDOW_EVIDENCE: Final = 200
"""A load or resume window's last frames kept as evidence: an unanswered one stays bounded."""


@dataclasses.dataclass(slots=True)
class _Session:
    """What the watcher keeps of one session beside what the client holds (its mirror's view):
    what the agent holds, and whether the session is fenced.

    ``known`` is the agent's ``_meta`` as its frames show it: its publications folded with the
    client's rule, except the frames of a replay window (history, not publications, but for the
    agent's current info: :class:`~agent_meta.core._replay.ReplayWindow`, the rule the owner
    follows; a resync that completes sets it to what the client then holds) and those of a
    closed lifetime; ``known_updated_at`` is its ``updatedAt`` the same way. A
    ``session/close`` response starts the next lifetime with nothing known.
    """

    as_v2: Meta = None  # v1 only: the same frames folded with the v2 rule, for diagnosis
    known: Meta = None
    known_updated_at: object = OMITTED
    closed_by: int | None = None  # seq of the session/close response while fenced
    # v1: (seq, v1-meaning finding) of frames in a load or resume window, until replaced
    deferred: collections.deque[tuple[int, str]] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=_WINDOW_EVIDENCE)
    )


@dataclasses.dataclass(slots=True)
class _Request:
    """A client request waiting for its response; a load or resume also watches its window."""

    method: str
    session: str | None
    seq: int
    restore: bool = False  # session/load or session/resume: its window is watched
    replay: bool = False
    meta_before: Meta = None
    info_frames: int = 0
    last_replay: int | None = None
    resync_at: int | None = None
    known_at_resync: Meta = None  # what the agent held when its last resync frame came
    current: CurrentInfo = dataclasses.field(default_factory=CurrentInfo)  # replay is replay
    window: collections.deque[int] = dataclasses.field(  # evidence: the window's updates
        default_factory=lambda: collections.deque(maxlen=_WINDOW_EVIDENCE)
    )


class Watcher:
    """Folds one ACP connection's frames and checks the rules a client can observe.

    Call :meth:`observe` with every line, from both sides, in the order they were read. The
    protocol version is taken from the ``initialize`` response (v1 until then). Findings are
    attached to the frame that shows them; :attr:`failed` counts them and :attr:`exercised`
    counts how often a frame put a rule to the test, per rule id. The watcher keeps no frames,
    so a proxy that runs for days holds only the state of each session.
    """

    def __init__(self) -> None:
        self.protocol_version = 1
        self._client = ClientMirror(1, transcript=False)
        self.failed: Counter[str] = Counter()
        self.exercised: Counter[str] = Counter()
        self._seq = 0
        self._sessions: dict[str, _Session] = {}
        self._requests: dict[Any, _Request] = {}
        self._windows: dict[str, list[_Request]] = {}

    # ----------------------------------------------------------------------- reading state

    @property
    def session_ids(self) -> list[str]:
        """Every session that received a ``session_info_update``, in first-seen order."""
        return self._client.session_ids

    def meta(self, session: str) -> Meta:
        """A copy of the ``_meta`` the client holds for ``session`` (``None``: none)."""
        view = self._client.view(session)
        return None if view is None or view.meta is None else dict(view.meta)

    def meta_as_v2(self, session: str) -> Meta:
        """On v1: the ``_meta`` the same frames give under the v2 patch rule (else :meth:`meta`)."""
        if self.protocol_version != 1:
            return self.meta(session)
        watched = self._sessions.get(session)
        return None if watched is None or watched.as_v2 is None else dict(watched.as_v2)

    def state(self, session: str) -> dict[str, Any]:
        """What the client holds: ``title``, ``updatedAt`` (when ever set) and ``_meta``.

        The values are the client mirror's own; serialize them before the next :meth:`observe`.
        """
        view = self._client.view(session)
        if view is None:
            return {"_meta": None}
        state: dict[str, Any] = {}
        if view.title is not OMITTED:
            state["title"] = view.title
        if view.updated_at is not OMITTED:
            state["updatedAt"] = view.updated_at
        state["_meta"] = view.meta
        return state

    def fail(
        self, frame: Frame, rule: str, message: str, *evidence: int, session: str | None = None
    ) -> Finding:
        """Record a finding of ``rule`` at ``frame`` (``check`` adds its ``state`` findings here).

        ``evidence`` are other frames that show it; ``session`` defaults to the frame's.
        """
        frames = tuple(sorted({*evidence, frame.seq}))
        finding = Finding(rule, message, session or frame.session, frames)
        frame.findings = (*frame.findings, finding)
        self.failed[rule] += 1
        return finding

    # ----------------------------------------------------------------------- observing

    def observe(self, source: Source, line: bytes, t: float = 0.0, *, last: bool = False) -> Frame:
        """Check and fold one line (without its newline) read at ``t`` seconds.

        ``last`` marks a line the stream ended in without a newline. Callers skip blank lines,
        as NDJSON readers do.
        """
        self._seq += 1
        frame = Frame(self._seq, source, t, line)
        self.exercised["json"] += 1
        if last:
            self.fail(frame, "json", f"the stream ended inside a line of {len(line)} bytes")
        try:
            parsed = STRICT_JSON.decode(line.decode("utf-8"))
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError too
            self.fail(frame, "json", f"not JSON: {exc}")
            return frame
        except RecursionError:
            self.fail(frame, "json", "not JSON: nested too deeply to parse")
            return frame
        # A non-empty array is a JSON-RPC batch (or the answer to one): each entry counts.
        for message in parsed if isinstance(parsed, list) and parsed else [parsed]:
            self._route(frame, source, message)
        return frame

    def _route(self, frame: Frame, source: Source, message: object) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.fail(frame, "json", 'not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")')
            return
        frame.message = message
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                if source == "agent":
                    self._agent_response(frame, message)
            else:
                self.fail(frame, "json", "neither a request, a notification nor a response")
        elif not isinstance(message["method"], str):
            self.fail(frame, "json", "method is not a string")
        elif source == "client":
            self._client_call(frame, message)
        else:
            self._agent_call(frame, message)

    def _client_call(self, frame: Frame, message: dict[str, Any]) -> None:
        method: str = message["method"]
        session = session_of(message.get("params"))
        frame.session = session
        if "id" not in message:
            return
        request = _Request(method, session, frame.seq)
        self._requests[_key(message["id"])] = request
        if session is None or method not in _RESTORE_METHODS:
            return
        view = self._sessions.get(session)
        if view is not None:
            view.closed_by = None  # asking for the session again reopens it
        params = message.get("params")
        request.restore = True
        replay = replay_of(method, params, protocol_version=self.protocol_version)
        request.replay = replay.may_replay
        request.meta_before = self.meta(session)
        self._windows.setdefault(session, []).append(request)

    def _agent_call(self, frame: Frame, message: dict[str, Any]) -> None:
        params = message.get("params")
        session = session_of(params)
        frame.session = session
        if session is None:
            if message["method"] == "session/update":
                self.fail(frame, "shape", "session/update without a string params.sessionId")
            return
        watched = self._sessions.get(session)
        if watched is not None and watched.closed_by is not None:
            self.fail(
                frame,
                "fence",
                f"{_what(message)} after the session/close response (frame #{watched.closed_by})",
                watched.closed_by,
            )
        if message["method"] == "session/update" and "id" not in message:
            update = params.get("update") if isinstance(params, dict) else None
            if isinstance(update, dict):
                self._session_update(frame, message, session, update)
            else:
                self.fail(frame, "shape", "session/update without an update object")

    def _session_update(
        self, frame: Frame, message: dict[str, Any], session: str, update: dict[str, Any]
    ) -> None:
        """A ``session/update`` of ``session``: fold session info, and note what a replay
        window sees (see ``resync``)."""
        kind = update.get("sessionUpdate")
        windows = self._windows.get(session, ())
        if kind == "session_info_update":
            watched = self._sessions.get(session)
            if watched is None:
                watched = self._sessions[session] = _Session()
            # What the agent held before this frame, should it be a resync (R4 restores it).
            known = None if not windows or watched.known is None else dict(watched.known)
            resync = self._info_update(frame, session, watched, message, windows)
            for request in windows:
                request.window.append(frame.seq)
                request.info_frames += 1
                if resync:
                    request.resync_at = frame.seq
                    request.known_at_resync = known
        elif kind not in _NOT_REPLAY:
            for request in windows:
                request.window.append(frame.seq)
                request.last_replay = frame.seq

    def _info_update(
        self,
        frame: Frame,
        session: str,
        watched: _Session,
        message: dict[str, Any],
        windows: Sequence[_Request],
    ) -> bool:
        """Fold one ``session_info_update`` into what the client holds (its mirror: a malformed
        one is a ``shape`` finding and folds nothing) and judge it; return whether it is a
        resync (see ``resync``)."""
        self.exercised["shape"] += 1
        before = self._client.view(session)
        held = None if before is None else before.meta  # on v1 a fold leaves it as it was
        try:
            self._client.feed(message)
        except MirrorError as exc:
            self.fail(frame, "shape", f"{exc.reason} (not folded)")
            return False
        update = message["params"]["update"]
        updated_at = update.get("updatedAt")
        if isinstance(updated_at, str) and self.protocol_version >= 2:
            # v2's schema says RFC 3339 (format date-time); v1's says ISO 8601, which allows a
            # local time without an offset, so v1 stamps are not judged.
            self.exercised["updated-at"] += 1
            if not is_rfc3339(updated_at):
                self.fail(
                    frame, "updated-at", f"updatedAt {updated_at!r} is not RFC 3339 with an offset"
                )
        meta = update.get("_meta", OMITTED)
        v2 = self.protocol_version >= 2
        known = lambda: watched.known_updated_at  # noqa: E731 (asked only when needed)
        state = is_state(frame.seq, update, windows, known, self.protocol_version)
        if watched.closed_by is None and state:
            if isinstance(updated_at, str):
                watched.known_updated_at = updated_at
            if meta is not OMITTED:
                watched.known = fold_meta(watched.known, meta, 2 if v2 else 1)
        if meta is OMITTED:
            return False
        if v2:
            return meta is None
        self._v1_meta(frame, watched, held, meta, replay=bool(windows))
        # A v1 resync is one _meta object. A null there is the agent's resync too, made with v2
        # vocabulary: v1-meaning reports it when it leaves the client stale.
        return True

    def _v1_meta(
        self, frame: Frame, watched: _Session, held: Meta, meta: Meta, *, replay: bool
    ) -> None:
        """v1: an object replaces the stored ``_meta`` whole; ``null`` is the same as omitted
        (``held``: what the client stored before). In a load or resume window (``replay``:
        history as the agent sent it) a finding waits until a later object replaces what the
        client stored, or the window ends."""
        self.exercised["v1-meaning"] += 1
        watched.as_v2 = fold_meta(watched.as_v2, meta, 2)
        message = v1_misreading(held, meta)
        if meta is not None:
            watched.deferred.clear()  # what they left the client is replaced whole
        if message is not None and replay:
            watched.deferred.append((frame.seq, message))
        elif message is not None:
            self.fail(frame, "v1-meaning", message)

    def _report_deferred(self, frame: Frame, session: str, request: _Request) -> None:
        """At the end of a session's last load or resume window: what nothing replaced."""
        watched = self._sessions.get(session)
        while watched is not None and watched.deferred and not self._windows[session]:
            seq, message = watched.deferred.popleft()
            where = f"in the {request.method} window (frame #{request.seq})"
            message += f"; {where}, and no later _meta object replaced it before the response"
            self.fail(frame, "v1-meaning", message, seq, session=session)

    def _agent_response(self, frame: Frame, message: dict[str, Any]) -> None:
        request = self._requests.pop(_key(message["id"]), None)
        if request is None:
            return
        ok = "result" in message
        result = message.get("result")
        session = request.session
        if session is None and request.method == "session/new" and isinstance(result, dict):
            session = session_of(result)
        frame.session = session
        if request.method == "initialize" and ok:
            self._negotiated(result)
        if session is not None:
            self._session_response(frame, session, request, ok=ok)

    def _session_response(self, frame: Frame, session: str, request: _Request, *, ok: bool) -> None:
        """The answer to a request of ``session``: a close fences it, a load or resume ends
        its window and is judged (``resync``)."""
        if request.method == "session/close" and ok:
            watched = self._sessions.setdefault(session, _Session())
            watched.closed_by = frame.seq
            watched.known = None  # the lifetime ended: a reopen starts a fresh one (R5)
            watched.known_updated_at = OMITTED
            self.exercised["fence"] += 1
        if request.restore:
            self._windows[session].remove(request)
            self._report_deferred(frame, session, request)
            if ok and not self._check_snapshot(frame, session, request) and request.replay:
                self._check_resync(frame, session, request)
            if ok:
                self._check_current(frame, session, request)

    def _negotiated(self, result: object) -> None:
        """The protocol version an ``initialize`` result names (the rules to fold with)."""
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if type(version) is int and version >= 1:
            self.protocol_version = version
            self._client.protocol_version = min(version, 2)  # a later version folds as v2

    def _check_snapshot(self, frame: Frame, session: str, request: _Request) -> bool:
        """R4: a resync clears, then restores what the agent holds when that is not nothing.

        The last resync frame after the replay counts (v2: ``_meta: null``; v1: any ``_meta``).
        Return whether the snapshot was missing (a finding); else a completed resync makes what
        the client holds the agent's known state.
        """
        watched = self._sessions.get(session)
        resync = request.resync_at
        if watched is None or resync is None:
            return False
        if request.last_replay is not None and resync < request.last_replay:
            return False  # not a resync: _check_resync reports it
        expected = request.known_at_resync
        if expected is not None and not request.replay:  # _check_resync counts a replay
            self.exercised["resync"] += 1
        held = self.meta(session)
        if expected is None or held is not None:
            watched.known = held
            view = self._client.view(session)
            if view is not None and isinstance(view.updated_at, str):
                watched.known_updated_at = view.updated_at
            return False
        watched.known = expected  # the agent still holds it; the client was told otherwise
        snapshot = f"no snapshot of {short_meta(expected)}"
        if self.protocol_version >= 2:
            why = f"_meta: null (#{resync}) came, but {snapshot} followed it"
        else:
            why = (
                f"the v1 resync (#{resync}) cleared it, with {snapshot} (on v1 the resync is "
                "one frame with the complete object)"
            )
        self.fail(
            frame,
            "resync",
            f"after {request.method} (frame #{request.seq}) the client holds no _meta: {why}",
            request.seq,
            *request.window,
        )
        return True

    def _check_current(self, frame: Frame, session: str, request: _Request) -> None:
        """Replay is replay: the client ends a window at least as new as its current info."""
        view, newest = self._client.view(session), request.current.newest
        if newest is not None:  # the window had a session_info_update: the session is watched
            self._sessions[session].known_updated_at = newest[1]
            self.exercised["resync"] += 1
            why = request.current.stale(OMITTED if view is None else view.updated_at)
            if why is not None:
                where = f"after {request.method} (frame #{request.seq}) "
                self.fail(frame, "resync", where + why, request.seq, newest[0])

    def _check_resync(self, frame: Frame, session: str, request: _Request) -> None:
        after = self.meta(session)
        before = request.meta_before
        if before is None and after is None and not request.info_frames:
            return  # nothing held, nothing sent: the agent published no metadata
        self.exercised["resync"] += 1
        resynced = request.resync_at is not None and (
            request.last_replay is None or request.resync_at > request.last_replay
        )
        if after == before or resynced:
            return
        marker = "_meta: null + snapshot" if self.protocol_version >= 2 else "v1 _meta snapshot"
        if request.resync_at is None:
            why = f"no {marker} arrived before the response"
        else:
            why = (
                f"the last {marker} (#{request.resync_at}) came before the end of the replay "
                f"(#{request.last_replay})"
            )
        self.fail(
            frame,
            "resync",
            f"after {request.method} (frame #{request.seq}) the client holds {short_meta(after)}, "
            f"not the {short_meta(before)} it held before: {why}",
            request.seq,
            *request.window,
        )


def _key(request_id: object) -> object:
    """A dict key for a JSON-RPC id that keeps ``1``, ``1.0``, ``true`` and ``"1"`` apart."""
    if isinstance(request_id, str):
        return request_id
    return (type(request_id).__name__, request_id)


def _what(message: dict[str, Any]) -> str:
    method = message["method"]
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if isinstance(update, dict) and isinstance(update.get("sessionUpdate"), str):
        return f"{method} ({update['sessionUpdate']})"
    return str(method)
