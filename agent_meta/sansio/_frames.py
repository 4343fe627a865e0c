"""JSON-RPC frames other than session info, validated (R12): one compact, ASCII-only
message per line.

Notifications, requests and responses an agent sends through its owner (``send_*``), the
inbound gate's answers, and a batch's answers joined into one array. Their JSON text is
:mod:`agent_meta.sansio._json_text`'s; the session info frames are the send queue's
(:mod:`agent_meta.sansio.queue._info_frames`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..core._errors import MetaValueError
from ..core._json import json_copy, json_object_copy
from ._json_text import NULL, encode_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "build_notification",
    "build_request",
    "build_response",
    "build_response_batch",
    "join_response_frames",
    "notification_frame_text",
    "response_frame",
]


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
