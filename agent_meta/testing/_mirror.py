"""What an ACP client holds after the frames it received: the one client-side fold.

:class:`ClientMirror` folds each ``session_info_update`` a client receives, per session, by the
v1 or the v2 rule, into what that client then holds (``title``, ``updatedAt``, ``_meta``). The
tests, the demo and the client-side tools (the watcher of ``agent-meta proxy`` and ``check``)
all fold with it.

It deliberately shares no code with the library's patch core (``apply_meta_patch`` and
friends): its rule is the few lines of :func:`fold_meta`, so a bug in the core shows up as a
difference between what the owner thinks it sent and what the mirror folded, instead of being
folded away by the same bug on both sides (``tests/test_testing_mirror.py`` holds the two to
the same results).

It is stricter than real clients on purpose: input a real client would silently reinterpret
(a ``_meta`` that is a list or a string, which the Python SDK turns into a clear; ``NaN``;
duplicate object keys; a second JSON value on one line) raises :class:`MirrorError`, so the
test fails at the frame that is wrong, and the watcher reports it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from ..core._sentinel import OMITTED, Omitted
from ..core._session_info import SessionInfo

__all__ = [
    "ClientMirror",
    "Message",
    "MirrorError",
    "SessionView",
    "check_message",
    "fold_meta",
    "parse_frame",
    "parse_frames",
]

Message: TypeAlias = dict[str, Any]
"""One parsed JSON-RPC message, exactly as it was on the wire (``_meta: null`` kept as ``None``,
an omitted ``_meta`` absent)."""

_SESSION_INFO_UPDATE: Final = "session_info_update"


class MirrorError(AssertionError):
    """A received frame is not something a correct agent may send.

    It subclasses :class:`AssertionError` so that pytest reports it as a failed check. The
    message quotes the offending frame; :attr:`reason` is the message without it.
    """

    def __init__(self, reason: str, frame: object = None) -> None:
        super().__init__(reason if frame is None else f"{reason}: {_describe(frame)}")
        self.reason = reason


def fold_meta(
    stored: dict[str, Any] | None, incoming: dict[str, Any] | Omitted | None, protocol_version: int
) -> dict[str, Any] | None:
    """What a client of ``protocol_version`` holds after one update's ``_meta``.

    ``incoming`` is ``OMITTED`` when the update has no ``_meta``, which changes nothing.

    * **v2** (the metadata-patches rule): ``null`` clears; an object patches by top-level key
      (a key set to ``null`` is removed, any other value replaces that key whole, nulls nested
      inside values are data).
    * **v1** (what a v1 receiver that just stores the field does): an object replaces the
      stored metadata whole, nulls inside included; ``null`` means "no value supplied".

    Metadata with no keys is no metadata (``None``). Cheap enough to fold every frame of a
    long connection: on v2 ``stored`` is changed in place (on v1 it never is: an object gives
    a new dict), and the values of ``incoming`` are kept, not copied.
    """
    if incoming is OMITTED:
        return stored
    if protocol_version == 1:
        return stored if incoming is None else dict(incoming) or None
    if incoming is None:
        return None
    merged = {} if stored is None else stored
    for key, value in incoming.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged or None


@dataclasses.dataclass(slots=True)
class SessionView:
    """What a client holds for one session.

    ``title`` and ``updated_at`` are ``OMITTED`` until an update sends them, then ``None`` or a
    string; ``meta`` is ``None`` when there is no metadata, never ``{}``.
    """

    title: str | Omitted | None = OMITTED
    updated_at: str | Omitted | None = OMITTED
    meta: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True)
class _Transcript:
    """What a mirror was fed, as it was fed: every message, and per session the
    ``session_info_update`` notifications and their ``params._meta``."""

    messages: list[Message] = dataclasses.field(default_factory=list)
    frames: dict[str, list[Message]] = dataclasses.field(default_factory=dict)
    notification_meta: dict[str, list[dict[str, Any] | None]] = dataclasses.field(
        default_factory=dict
    )

    def forget(self, session_id: str) -> None:
        self.frames.pop(session_id, None)
        self.notification_meta.pop(session_id, None)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate object key {key!r}")
        result[key] = value
    return result


def _describe(frame: object, limit: int = 300) -> str:
    if isinstance(frame, bytes):
        text = frame.decode("utf-8", "replace")
    elif isinstance(frame, str):
        text = frame
    else:
        try:
            text = json.dumps(frame, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(frame)
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "..."


def _json_kind(value: object) -> str:
    """How an error names the JSON type of ``value`` ("an object", "a number" ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "unknown")


def parse_frame(frame: bytes | str) -> Message:
    """Parse one NDJSON line (trailing newline optional) into a JSON-RPC message object.

    Raises :class:`MirrorError` for anything that is not exactly one JSON-RPC 2.0 object.
    """
    parsed = _parse_json(frame)
    return check_message(parsed, frame)


def parse_frames(frame: bytes | str) -> list[Message]:
    """Parse one NDJSON line that holds one JSON-RPC message, or a non-empty array of them (the
    answer to a JSON-RPC batch). Raises :class:`MirrorError` for anything else."""
    parsed = _parse_json(frame)
    if not isinstance(parsed, list):
        return [check_message(parsed, frame)]
    if not parsed:
        raise MirrorError("an empty batch array is never sent", frame)
    return [check_message(item, frame) for item in parsed]


def _parse_json(frame: bytes | str) -> Any:
    if isinstance(frame, bytes):
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MirrorError(f"frame is not UTF-8 ({exc})", frame) from None
    elif isinstance(frame, str):
        text = frame
    else:
        raise MirrorError(f"a frame is bytes, str or dict, not {type(frame).__name__}")
    if text.endswith("\n"):
        text = text[:-1]
    if "\n" in text:
        raise MirrorError("frame holds more than one line (use feed_bytes)", frame)
    if not text.strip():
        raise MirrorError("empty frame")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except ValueError as exc:
        raise MirrorError(f"frame is not valid JSON ({exc})", frame) from None


def check_message(message: object, frame: object) -> Message:
    """Check the JSON-RPC 2.0 envelope of an already parsed message."""
    if not isinstance(message, dict):
        raise MirrorError("frame is not a JSON object", frame)
    if message.get("jsonrpc") != "2.0":
        raise MirrorError('frame lacks "jsonrpc": "2.0"', frame)
    return message


class ClientMirror:
    """Folds received frames the way an ACP client of ``protocol_version`` applies them.

    Feed it every frame the client received, in order (:meth:`feed` for whole frames or parsed
    messages, :meth:`feed_bytes` for raw stream chunks). ``session/update`` notifications whose
    ``update.sessionUpdate`` is ``"session_info_update"`` are folded into per-session state:
    ``_meta`` by the rule of :func:`fold_meta` (v2: a shallow patch; v1: an object replaces the
    whole), ``title`` and ``updatedAt`` three-state (omitted / ``null`` / string). Replayed
    updates (a ``session/load`` or ``session/resume`` window) fold as live ones do: a client
    resets nothing on its own, so whatever stale metadata a replay brings back stays until the
    agent removes it. The notification-level ``params._meta`` is never folded.

    By default the mirror also keeps a transcript for tests to inspect: :attr:`messages`,
    :meth:`frames_for` and :meth:`notification_meta`. The state then never shares an object
    with a message fed or returned. A proxy that folds every frame of a long connection passes
    ``transcript=False``: the mirror keeps only each session's view (read it with
    :meth:`view`), and the values of the messages fed become its own, not copies, so a message
    must not be changed after it is fed.

    Example::

        mirror = ClientMirror(protocol_version=2)
        mirror.feed(
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
            b'"update":{"sessionUpdate":"session_info_update","_meta":{"a":1}}}}\\n'
        )
        assert mirror.meta("s") == {"a": 1}
    """

    def __init__(self, protocol_version: int = 2, *, transcript: bool = True) -> None:
        self._protocol_version = _checked_version(protocol_version)
        self._views: dict[str, SessionView] = {}
        self._transcript = _Transcript() if transcript else None
        self._buffer = b""

    @property
    def protocol_version(self) -> int:
        """The protocol whose receiver rule this mirror applies (1 or 2).

        A proxy sets it once ``initialize`` has negotiated the version; later frames fold by
        the new rule, what the sessions hold stays.
        """
        return self._protocol_version

    @protocol_version.setter
    def protocol_version(self, version: int) -> None:
        self._protocol_version = _checked_version(version)

    @property
    def partial(self) -> bytes:
        """Bytes of an unfinished last line that :meth:`feed_bytes` is holding back."""
        return self._buffer

    @property
    def session_ids(self) -> list[str]:
        """Sessions that received at least one ``session_info_update``, in first-seen order."""
        return list(self._views)

    @property
    def messages(self) -> list[Message]:
        """Every message fed, parsed, in the order received (responses and requests too)."""
        return self._recorded().messages

    def feed(self, frame: bytes | str | Mapping[str, Any]) -> Message:
        """Apply one whole frame and return the parsed message.

        ``frame`` is one NDJSON line (``bytes`` or ``str``, trailing newline optional) or an
        already parsed message (deep-copied, unless the mirror keeps no transcript). Raises
        :class:`MirrorError` if the frame is not a valid JSON-RPC message or carries a
        malformed session-info update; the state is then unchanged.
        """
        if not isinstance(frame, Mapping):
            message = parse_frame(frame)
        elif self._transcript is None:
            message = check_message(frame if isinstance(frame, dict) else dict(frame), frame)
        else:
            message = check_message(copy.deepcopy(dict(frame)), frame)
        self._apply(message)
        return message

    def feed_bytes(self, data: bytes) -> list[Message]:
        """Apply a chunk of the byte stream; return the messages of the lines it completed.

        A last line without its newline is buffered (see :attr:`partial`) until a later chunk
        completes it. Blank lines are skipped, as NDJSON readers do.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"feed_bytes takes bytes, not {type(data).__name__}")
        *lines, self._buffer = (self._buffer + bytes(data)).split(b"\n")
        messages: list[Message] = []
        for line in lines:
            if line.strip():
                messages.extend(self.feed_line(line))
        return messages

    def feed_line(self, line: bytes | str) -> list[Message]:
        """Apply one whole line: one message, or the array of responses that answers a batch
        (each applied in order). Returns the messages it held."""
        messages = parse_frames(line)
        for message in messages:
            self._apply(message)
        return messages

    def view(self, session_id: str) -> SessionView | None:
        """What the client holds for ``session_id`` (``None``: no update yet), as the mirror
        keeps it: not a copy, so reading it costs nothing. Never change it; a later feed does.
        """
        return self._views.get(session_id)

    def info(self, session_id: str) -> SessionInfo:
        """A copy of what the client holds for ``session_id`` (empty if nothing)."""
        view = self._views.get(session_id)
        if view is None:
            return SessionInfo()
        return SessionInfo(title=view.title, updated_at=view.updated_at, meta=view.meta)

    def meta(self, session_id: str) -> dict[str, Any] | None:
        """A copy of the metadata the client holds for ``session_id``; ``None`` when none."""
        view = self._views.get(session_id)
        if view is None or view.meta is None:
            return None
        return copy.deepcopy(view.meta)

    def notification_meta(self, session_id: str) -> list[dict[str, Any] | None]:
        """The ``params._meta`` of each ``session_info_update`` of the session that had one.

        In order received; notifications without ``params._meta`` add nothing. These values
        are per-notification data and never part of :meth:`info`.
        """
        return copy.deepcopy(self._recorded().notification_meta.get(session_id, []))

    def frames_for(self, session_id: str) -> list[Message]:
        """The ``session_info_update`` notifications received for ``session_id``, in order.

        Each item is the whole parsed message (``params.update`` holds the update).
        """
        return copy.deepcopy(self._recorded().frames.get(session_id, []))

    def reset(self, session_id: str) -> None:
        """Forget everything about ``session_id`` (as a freshly started client would).

        :attr:`messages` is kept; it is the transcript, not client state.
        """
        self._views.pop(session_id, None)
        if self._transcript is not None:
            self._transcript.forget(session_id)

    def _recorded(self) -> _Transcript:
        if self._transcript is None:
            raise RuntimeError("this ClientMirror keeps no transcript (transcript=False)")
        return self._transcript

    def _apply(self, message: Message) -> None:
        """Fold ``message`` (checked whole first: a malformed update changes nothing)."""
        transcript = self._transcript
        update = _session_info_update(message)
        if update is None:
            if transcript is not None:
                transcript.messages.append(message)
            return
        params = message["params"]
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise MirrorError("session/update has no string sessionId", message)
        title = _text(update, "title", message)
        updated_at = _text(update, "updatedAt", message)
        meta = update.get("_meta", OMITTED)
        if meta is not OMITTED and meta is not None and not isinstance(meta, dict):
            # A real Python client would quietly turn this into a clear (salvage_on_error).
            raise MirrorError(f"update._meta is {_json_kind(meta)}, not an object or null", message)
        notification_meta = params.get("_meta")
        if notification_meta is not None and not isinstance(notification_meta, dict):
            kind = _json_kind(notification_meta)
            raise MirrorError(f"params._meta is {kind}, not an object or null", message)

        view = self._views.get(session_id)
        if view is None:
            view = self._views[session_id] = SessionView()
        if title is not OMITTED:
            view.title = title
        if updated_at is not OMITTED:
            view.updated_at = updated_at
        if transcript is not None and meta:
            meta = copy.deepcopy(meta)  # the state shares nothing with the transcript
        view.meta = fold_meta(view.meta, meta, self._protocol_version)
        if transcript is not None:
            transcript.messages.append(message)
            transcript.frames.setdefault(session_id, []).append(message)
            if "_meta" in params:
                recorded = transcript.notification_meta.setdefault(session_id, [])
                recorded.append(copy.deepcopy(notification_meta))


def _checked_version(version: int) -> int:
    if version not in (1, 2):
        raise ValueError(f"protocol_version must be 1 or 2, not {version!r}")
    return version


def _session_info_update(message: Message) -> dict[str, Any] | None:
    """The update of a ``session_info_update`` notification, ``None`` for any other message;
    :class:`MirrorError` for a ``session/update`` notification without an update object."""
    if message.get("method") != "session/update" or "id" in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        raise MirrorError("session/update params are not an object", message)
    update = params.get("update")
    if not isinstance(update, dict):
        raise MirrorError("session/update has no update object", message)
    return update if update.get("sessionUpdate") == _SESSION_INFO_UPDATE else None


def _text(update: dict[str, Any], key: str, message: Message) -> str | Omitted | None:
    if key not in update:
        return OMITTED
    value = update[key]
    if value is not None and not isinstance(value, str):
        raise MirrorError(f"{key} is {_json_kind(value)}, not a string or null", message)
    return value
