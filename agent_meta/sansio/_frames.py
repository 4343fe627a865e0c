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
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "NULL",
    "encode_json",
    "fragment",
    "info_frame",
    "notification_frame",
    "object_text",
    "response_frame",
    "session_prefix",
]

_encode_str: Final = json.encoder.encode_basestring_ascii
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
    else _c_make_encoder(None, _unencodable, _encode_str, None, ":", ",", False, False, False)
)


def encode_json(value: object) -> str:
    """Compact, ASCII-only JSON text of an already validated value (as ``json.dumps`` writes it).

    Plain strings and integers, the common cases, skip the encoder machinery altogether.
    """
    kind = type(value)
    if kind is str:
        return _encode_str(value)  # type: ignore[arg-type]  # exact type checked above
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
    *,
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


def notification_frame(method: str, params_text: str | None) -> bytes:
    """A JSON-RPC notification; ``params_text`` is JSON text or ``None`` to omit params."""
    head = '{"jsonrpc":"2.0","method":' + encode_json(method)
    if params_text is None:
        return (head + "}\n").encode("ascii")
    return (head + ',"params":' + params_text + "}\n").encode("ascii")


def response_frame(id_text: str, *, result: str | None, error: str | None) -> bytes:
    """A JSON-RPC response: exactly one of ``result`` / ``error`` is JSON text."""
    if error is not None:
        return ('{"jsonrpc":"2.0","id":' + id_text + ',"error":' + error + "}\n").encode("ascii")
    assert result is not None
    return ('{"jsonrpc":"2.0","id":' + id_text + ',"result":' + result + "}\n").encode("ascii")
