"""Encoding frames: one compact, ASCII-only JSON-RPC message per line.

The owner renders ``session/update`` frames by joining pre-encoded fragments instead of dumping
a model per frame: each metadata value is encoded once, when it is published, and the same text
is reused for every frame and resync that carries it. ``tests/test_frames.py`` checks that these
frames parse to exactly what the pydantic wire models produce.

Frames are ASCII-only (non-ASCII characters are ``\\u`` escaped): byte length equals text
length, so frame limits are exact and cheap, and a lone surrogate in a Python string can never
make a later write fail to encode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ..core._errors import MetaValueError
from ..core._json import json_copy, json_object_copy

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._encode import EncodedUpdate
    from ._modes import WireMode
    from .queue._state import LifetimeState

__all__ = [
    "NULL",
    "build_notification",
    "build_request",
    "build_response",
    "build_response_batch",
    "clear_frame",
    "encode_json",
    "encode_str",
    "fragment",
    "info_frame",
    "info_frames",
    "join_response_frames",
    "notification_frame_text",
    "object_text",
    "patch_text",
    "publication_frame",
    "response_frame",
    "session_prefix",
    "snapshot_frame",
]

encode_str: Final = json.encoder.encode_basestring_ascii
"""The JSON text of an exact ``str`` (ASCII-only, as every frame is)."""
_encode_any: Final = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, separators=(",", ":")
).encode
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def _unencodable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder behind ``json.dumps``, built once. ``JSONEncoder.encode`` builds a new one on
# every call, which costs more than encoding a small patch. No cycle markers: values reaching
# here were validated by ``json_copy`` (a cycle would end in RecursionError, not a loop).
_encode_chunks: Final = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, _unencodable, encode_str, None, ":", ",", False, False, False)
)


def encode_json(value: object) -> str:
    """Compact, ASCII-only JSON text of an already validated value (as ``json.dumps`` writes it).

    Plain strings and integers, the common cases, skip the encoder machinery altogether.
    """
    kind = type(value)
    if kind is str:
        return encode_str(value)  # type: ignore[arg-type]  # exact type checked above
    if kind is int:
        return int.__repr__(value)
    if _encode_chunks is None:  # pragma: no cover - CPython always has the C encoder
        return _encode_any(value)
    return "".join(_encode_chunks(value, 0))


NULL: Final = "null"

_INFO_PREFIX: Final = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
_INFO_UPDATE: Final = ',"update":{"sessionUpdate":"session_info_update"'


def fragment(key: str, value_text: str) -> str:
    """The ``"key":value`` member text of a JSON object."""
    return encode_json(key) + ":" + value_text


def object_text(fragments: Iterable[str]) -> str:
    """A JSON object from member fragments."""
    return "{" + ",".join(fragments) + "}"


def session_prefix(session_id: str) -> str:
    """The fixed start of every ``session_info_update`` frame of one session."""
    return _INFO_PREFIX + encode_json(session_id) + _INFO_UPDATE


def info_frame(
    prefix: str,
    title: str | None,
    updated_at: str | None,
    meta: str | None,
    notification_meta: str | None,
) -> bytes:
    """One ``session_info_update`` frame; each argument is JSON text, or ``None`` to omit it."""
    text = prefix
    if title is not None:
        text += ',"title":' + title
    if updated_at is not None:
        text += ',"updatedAt":' + updated_at
    if meta is not None:
        text += ',"_meta":' + meta
    if notification_meta is not None:
        text += '},"_meta":' + notification_meta + "}}\n"
    else:
        text += "}}}\n"
    return text.encode("ascii")


def notification_frame_text(method_text: str, params_text: str | None) -> bytes:
    """A JSON-RPC notification from JSON texts; ``params_text`` ``None`` omits params."""
    head = '{"jsonrpc":"2.0","method":' + method_text
    if params_text is None:
        return (head + "}\n").encode("ascii")
    return (head + ',"params":' + params_text + "}\n").encode("ascii")


def response_frame(id_text: str, *, result: str | None, error: str | None) -> bytes:
    """A JSON-RPC response: exactly one of ``result`` / ``error`` is JSON text."""
    if error is not None:
        return ('{"jsonrpc":"2.0","id":' + id_text + ',"error":' + error + "}\n").encode("ascii")
    assert result is not None
    return ('{"jsonrpc":"2.0","id":' + id_text + ',"result":' + result + "}\n").encode("ascii")


# -- session info frames, by wire mode (R10) ---------------------------------------------------


def patch_text(patch: Mapping[str, str | None]) -> str:
    """A patch object's text: each member's fragment, ``"key":null`` for a removal."""
    members = patch.values()
    if None not in members:  # no removal: the fragments are the members
        return "{" + ",".join(members) + "}"  # type: ignore[arg-type]  # no None, checked
    texts = [frag if frag is not None else fragment(key, NULL) for key, frag in patch.items()]
    return "{" + ",".join(texts) + "}"


def info_frames(
    mode: WireMode,
    state: LifetimeState,
    title: str | None,
    updated_at: str | None,
    cleared: bool,
    patch: Mapping[str, str | None] | None,
    notification_meta: str | None,
) -> list[bytes]:
    """The frames of a publication (or merged publications), in normal form.

    Called after the known state has the publication folded in: in a full-object mode every
    frame carries the whole known ``_meta``, as v1 cannot express a clear or a removal.
    A clear followed by members is two frames: ``_meta: null``, then the object (R3).
    """
    prefix = state.prefix
    if mode.full_object:  # a snapshot: what the agent holds now, with this frame's trace
        whole = state.meta_text() or "{}"
        return [info_frame(prefix, state.title, state.updated_at, whole, notification_meta)]
    if not cleared:
        meta = None if patch is None else patch_text(patch)
        return [info_frame(prefix, title, updated_at, meta, notification_meta)]
    frames = [info_frame(prefix, title, updated_at, NULL, notification_meta)]
    if patch:
        frames.append(info_frame(prefix, None, None, patch_text(patch), None))
    return frames


def publication_frame(mode: WireMode, state: LifetimeState, update: EncodedUpdate) -> bytes:
    """The frame of one publication that is one frame (anything but a clear followed by
    members, outside a full-object mode), after it is folded into ``state``: the frame
    :func:`info_frames` renders for it, the common one (a patch, a title) built directly."""
    patch = update.meta_patch
    if mode.full_object or update.meta_clear:
        frames = info_frames(
            mode,
            state,
            update.title,
            update.updated_at,
            update.meta_clear,
            patch,
            update.notification_meta,
        )
        return frames[0]
    meta = None if patch is None else patch_text(patch)
    return info_frame(state.prefix, update.title, update.updated_at, meta, update.notification_meta)


def clear_frame(state: LifetimeState) -> bytes:
    """The first frame of a v2 resync: ``_meta: null`` (R4)."""
    return info_frame(state.prefix, None, None, NULL, None)


def snapshot_frame(mode: WireMode, state: LifetimeState) -> bytes:
    """The known state of a lifetime as one frame: the second frame of a v2 resync, or the
    whole v1 resync (``{}`` when nothing is known, as v1 cannot express a clear)."""
    meta = state.meta_text()
    if mode.full_object and meta is None:
        meta = "{}"
    return info_frame(state.prefix, state.title, state.updated_at, meta, None)


# -- other frames, validated (R12) ------------------------------------------------------------


def _method_text(method: object) -> str:
    if type(method) is not str and not isinstance(method, str):
        raise MetaValueError(f"must be a str, not a {type(method).__name__}", path="method")
    return encode_json(str.__str__(method))


def _params_text(params: object) -> str | None:
    if params is None:
        return None
    return encode_json(json_object_copy(params, path="params"))


INT64: Final = range(-(2**63), 2**63)
"""ACP request ids that are numbers are int64 (both schema versions)."""
INT32: Final = range(-(2**31), 2**31)
"""ACP error codes are int32."""


def _id_text(request_id: object, *, allow_null: bool) -> str:
    if request_id is None and allow_null:
        return NULL
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        allowed = "an int, a str or None" if allow_null else "an int or a str"
        raise MetaValueError(f"must be {allowed}, not {request_id!r}", path="request_id")
    if isinstance(request_id, int) and request_id not in INT64:
        raise MetaValueError(f"{request_id} is outside int64, as ACP ids are", path="request_id")
    return encode_json(json_copy(request_id, path="request_id"))


def build_notification(method: object, params: object = None) -> bytes:
    """A JSON-RPC notification frame; ``params`` is a JSON object or ``None`` (omitted).

    Raises :class:`~agent_meta.MetaValueError` for a method that is not a str or params that
    are not a JSON object; nothing is built then.
    """
    return notification_frame_text(_method_text(method), _params_text(params))


def build_request(request_id: object, method: object, params: object = None) -> bytes:
    """A JSON-RPC request frame (an agent-to-client request); validated like a notification,
    and ``request_id`` must be an int or a str."""
    head = '{"jsonrpc":"2.0","id":' + _id_text(request_id, allow_null=False)
    head += ',"method":' + _method_text(method)
    params_text = _params_text(params)
    if params_text is not None:
        head += ',"params":' + params_text
    return (head + "}\n").encode("ascii")


def build_response(request_id: object, *, result: object = None, error: object = None) -> bytes:
    """A JSON-RPC response frame: ``error`` (``{"code": int, "message": str, "data"?: ...}``)
    when given, else ``result`` (any JSON value; ``None`` is ``null``).

    ``request_id`` is an int, a str or ``None`` (the answer to a request whose id could not be
    read). Raises :class:`~agent_meta.MetaValueError` for anything else; nothing is built then.
    """
    id_text = _id_text(request_id, allow_null=True)
    if error is not None and result is not None:
        raise MetaValueError("give either result or error, not both", path="error")
    if error is None:
        return response_frame(
            id_text, result=encode_json(json_copy(result, path="result")), error=None
        )
    err = json_object_copy(error, path="error")
    code = err.get("code")
    if type(code) is not int or code not in INT32:
        raise MetaValueError(f"'code' must be an int32, not {code!r}", path="error")
    if type(err.get("message")) is not str:
        raise MetaValueError("needs a str 'message'", path="error")
    extra = set(err) - {"code", "message", "data"}
    if extra:
        raise MetaValueError(f"unknown members {sorted(extra)!r}", path="error")
    return response_frame(id_text, result=None, error=encode_json(err))


def build_response_batch(responses: Sequence[Mapping[str, object]]) -> bytes:
    """One line holding a JSON array of responses (the answer to a JSON-RPC batch).

    Each item is ``{"id": ..., "result": ...}`` or ``{"id": ..., "error": {...}}``, validated
    like ``send_response``'s arguments.
    """
    if not responses:
        raise MetaValueError("a batch response holds at least one response", path="responses")
    frames = []
    for index, item in enumerate(responses):
        if not isinstance(item, Mapping) or "id" not in item:
            raise MetaValueError("must be a mapping with an 'id'", path=f"responses[{index}]")
        frames.append(
            build_response(item["id"], result=item.get("result"), error=item.get("error"))
        )
    return join_response_frames(frames)


def join_response_frames(frames: Sequence[bytes]) -> bytes:
    """One line holding the responses of ``frames`` (each a response frame, as
    :func:`build_response` makes them) as one JSON array."""
    return b"[" + b",".join(frame[:-1] for frame in frames) + b"]\n"
