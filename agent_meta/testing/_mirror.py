"""An independent client-side reducer: what an ACP client holds after the frames it received.

:class:`ClientMirror` deliberately shares no code with the library's patch core
(``apply_meta_patch`` and friends). It re-implements the receiver's rule in a few lines, so a
bug in the core shows up as a difference between what the owner thinks it sent and what the
mirror folded, instead of being folded away by the same bug on both sides.

It is stricter than real clients on purpose: input a real client would silently reinterpret
(a ``_meta`` that is a list or a string, which the Python SDK turns into a clear; ``NaN``;
duplicate object keys; a second JSON value on one line) raises :class:`MirrorError`, so the
test fails at the frame that is wrong.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from ..core._sentinel import OMITTED, Omitted
from ..core._session_info import SessionInfo

__all__ = ["ClientMirror", "Message", "MirrorError"]

Message: TypeAlias = dict[str, Any]
"""One parsed JSON-RPC message, exactly as it was on the wire (``_meta: null`` kept as ``None``,
an omitted ``_meta`` absent)."""

_SESSION_INFO_UPDATE: Final = "session_info_update"


class MirrorError(AssertionError):
    """A received frame is not something a correct agent may send.

    It subclasses :class:`AssertionError` so that pytest reports it as a failed check. The
    message quotes the offending frame.
    """


@dataclasses.dataclass(slots=True)
class _SessionView:
    """What the client holds for one session, plus the frames that built it."""

    title: str | Omitted | None = OMITTED
    updated_at: str | Omitted | None = OMITTED
    meta: dict[str, Any] | None = None
    frames: list[Message] = dataclasses.field(default_factory=list)
    notification_meta: list[dict[str, Any] | None] = dataclasses.field(default_factory=list)


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
        raise MirrorError(f"an empty batch array is never sent: {_describe(frame)}")
    return [check_message(item, frame) for item in parsed]


def _parse_json(frame: bytes | str) -> Any:
    if isinstance(frame, bytes):
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MirrorError(f"frame is not UTF-8 ({exc}): {_describe(frame)}") from None
    elif isinstance(frame, str):
        text = frame
    else:
        raise MirrorError(f"a frame is bytes, str or dict, not {type(frame).__name__}")
    if text.endswith("\n"):
        text = text[:-1]
    if "\n" in text:
        raise MirrorError(f"frame holds more than one line (use feed_bytes): {_describe(frame)}")
    if not text.strip():
        raise MirrorError("empty frame")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except ValueError as exc:
        raise MirrorError(f"frame is not valid JSON ({exc}): {_describe(frame)}") from None


def check_message(message: object, frame: object) -> Message:
    """Check the JSON-RPC 2.0 envelope of an already parsed message."""
    if not isinstance(message, dict):
        raise MirrorError(f"frame is not a JSON object: {_describe(frame)}")
    if message.get("jsonrpc") != "2.0":
        raise MirrorError(f'frame lacks "jsonrpc": "2.0": {_describe(frame)}')
    return message


class ClientMirror:
    """Folds received frames the way an ACP client of ``protocol_version`` applies them.

    Feed it every frame the client received, in order (:meth:`feed` for whole frames,
    :meth:`feed_bytes` for raw stream chunks). Every message is kept in :attr:`messages`;
    ``session/update`` notifications whose ``update.sessionUpdate`` is
    ``"session_info_update"`` are also folded into per-session state:

    * **v2** (the metadata-patches rule): ``_meta`` omitted leaves the metadata unchanged,
      ``null`` clears it, an object patches it by top-level key (a key set to ``null`` is
      removed, any other value replaces that key whole, nulls nested inside values are data).
    * **v1** (what a v1 receiver that just stores the field does): a ``_meta`` object replaces
      the stored metadata whole, nulls inside included; ``_meta: null`` or an omitted
      ``_meta`` leaves it unchanged.

    In both, ``title`` and ``updatedAt`` are three-state (omitted / ``null`` / string), and
    metadata with no keys is no metadata (``None``). The notification-level ``params._meta`` is
    recorded per session (:meth:`notification_meta`) and never folded into the state.

    Example::

        mirror = ClientMirror(protocol_version=2)
        mirror.feed(
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
            b'"update":{"sessionUpdate":"session_info_update","_meta":{"a":1}}}}\\n'
        )
        assert mirror.meta("s") == {"a": 1}
    """

    def __init__(self, protocol_version: int = 2) -> None:
        if protocol_version not in (1, 2):
            raise ValueError(f"protocol_version must be 1 or 2, not {protocol_version!r}")
        self._protocol_version = protocol_version
        self._sessions: dict[str, _SessionView] = {}
        self._buffer = b""
        self.messages: list[Message] = []
        """Every message fed, parsed, in the order received (responses and requests too)."""

    @property
    def protocol_version(self) -> int:
        """The protocol whose receiver rule this mirror applies (1 or 2)."""
        return self._protocol_version

    @property
    def partial(self) -> bytes:
        """Bytes of an unfinished last line that :meth:`feed_bytes` is holding back."""
        return self._buffer

    @property
    def session_ids(self) -> list[str]:
        """Sessions that received at least one ``session_info_update``, in first-seen order."""
        return list(self._sessions)

    def feed(self, frame: bytes | str | Mapping[str, Any]) -> Message:
        """Apply one whole frame and return the parsed message.

        ``frame`` is one NDJSON line (``bytes`` or ``str``, trailing newline optional) or an
        already parsed message (it is deep-copied). Raises :class:`MirrorError` if the frame is
        not a valid JSON-RPC message or carries a malformed session-info update; the state is
        then unchanged.
        """
        if isinstance(frame, Mapping):
            message = check_message(copy.deepcopy(dict(frame)), frame)
        else:
            message = parse_frame(frame)
        self._apply(message)
        self.messages.append(message)
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
            self.messages.append(message)
        return messages

    def info(self, session_id: str) -> SessionInfo:
        """What the client holds for ``session_id`` (an empty :class:`SessionInfo` if nothing)."""
        view = self._sessions.get(session_id)
        if view is None:
            return SessionInfo()
        return SessionInfo(title=view.title, updated_at=view.updated_at, meta=view.meta)

    def meta(self, session_id: str) -> dict[str, Any] | None:
        """A copy of the metadata the client holds for ``session_id``; ``None`` when none."""
        view = self._sessions.get(session_id)
        if view is None or view.meta is None:
            return None
        return copy.deepcopy(view.meta)

    def notification_meta(self, session_id: str) -> list[dict[str, Any] | None]:
        """The ``params._meta`` of each ``session_info_update`` of the session that had one.

        In order received; notifications without ``params._meta`` add nothing. These values
        are per-notification data and never part of :meth:`info`.
        """
        view = self._sessions.get(session_id)
        return [] if view is None else copy.deepcopy(view.notification_meta)

    def frames_for(self, session_id: str) -> list[Message]:
        """The ``session_info_update`` notifications received for ``session_id``, in order.

        Each item is the whole parsed message (``params.update`` holds the update).
        """
        view = self._sessions.get(session_id)
        return [] if view is None else copy.deepcopy(view.frames)

    def reset(self, session_id: str) -> None:
        """Forget everything about ``session_id`` (as a freshly started client would).

        :attr:`messages` is kept; it is the transcript, not client state.
        """
        self._sessions.pop(session_id, None)

    def _apply(self, message: Message) -> None:
        if message.get("method") != "session/update" or "id" in message:
            return
        params = message.get("params")
        if not isinstance(params, dict):
            raise MirrorError(f"session/update params are not an object: {_describe(message)}")
        update = params.get("update")
        if not isinstance(update, dict):
            raise MirrorError(f"session/update has no update object: {_describe(message)}")
        if update.get("sessionUpdate") != _SESSION_INFO_UPDATE:
            return
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise MirrorError(f"session/update has no string sessionId: {_describe(message)}")
        title = self._text(update, "title", message)
        updated_at = self._text(update, "updatedAt", message)
        meta = self._meta_field(update, message)
        has_notification_meta = "_meta" in params
        notification_meta = params.get("_meta")
        if notification_meta is not None and not isinstance(notification_meta, dict):
            raise MirrorError(f"params._meta is not an object or null: {_describe(message)}")

        view = self._sessions.setdefault(session_id, _SessionView())
        if title is not OMITTED:
            view.title = title
        if updated_at is not OMITTED:
            view.updated_at = updated_at
        view.meta = self._fold(view.meta, meta)
        view.frames.append(message)
        if has_notification_meta:
            view.notification_meta.append(copy.deepcopy(notification_meta))

    @staticmethod
    def _text(update: dict[str, Any], key: str, message: Message) -> str | Omitted | None:
        if key not in update:
            return OMITTED
        value = update[key]
        if value is not None and not isinstance(value, str):
            raise MirrorError(f"{key} is not a string or null: {_describe(message)}")
        return value

    @staticmethod
    def _meta_field(update: dict[str, Any], message: Message) -> dict[str, Any] | Omitted | None:
        if "_meta" not in update:
            return OMITTED
        value = update["_meta"]
        if value is not None and not isinstance(value, dict):
            # A real Python client would quietly turn this into a clear (salvage_on_error).
            raise MirrorError(
                f"update._meta is a {type(value).__name__}, not an object or null: "
                f"{_describe(message)}"
            )
        return value

    def _fold(
        self, stored: dict[str, Any] | None, incoming: dict[str, Any] | Omitted | None
    ) -> dict[str, Any] | None:
        if incoming is OMITTED:
            return stored
        if self._protocol_version == 1:
            # v1 has no clear: null is "no value supplied"; an object is the whole new value.
            if incoming is None:
                return stored
            return copy.deepcopy(incoming) or None
        if incoming is None:
            return None
        merged = dict(stored) if stored is not None else {}
        for key, value in incoming.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = copy.deepcopy(value)
        return merged or None
