"""The leaves of the sans-IO layer: compact, ASCII-only JSON text of validated values.

What every frame is made of, and nothing else: the JSON text of a value (:func:`encode_json`),
of a ``"key":value`` member (:func:`fragment`) and of an object made of members
(:func:`object_text`), ``null`` (:data:`NULL`), and the fixed start of one session's
``session_info_update`` frames (:func:`session_prefix`). It imports nothing of
:mod:`agent_meta.sansio` (nor of the queue or the inbound decisions), so the update encoder
(:mod:`agent_meta.sansio._encode`), the known state (:mod:`agent_meta.sansio.queue._state`) and
the frames (:mod:`agent_meta.sansio._frames`, :mod:`agent_meta.sansio.queue._info_frames`) all
build on it without a circle.

Frames are ASCII-only (non-ASCII characters are ``\\u`` escaped): byte length equals text
length, so frame limits are exact and cheap, and a lone surrogate in a Python string can never
make a later write fail to encode.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["NULL", "encode_json", "encode_str", "fragment", "object_text", "session_prefix"]

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
