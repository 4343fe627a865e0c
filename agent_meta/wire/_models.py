"""Wire models (pydantic v2): ``session_info_update``, ``session/update`` params, JSON-RPC.

Three-state fields (omitted / ``null`` / value) use pydantic's ``MISSING`` sentinel, so a plain
``model_dump_json()`` keeps ``"_meta": null`` and leaves an omitted ``_meta`` out, and model
equality tells the two apart. Nothing here dumps with ``exclude_none`` or ``exclude_defaults``:
either would turn a clear into "no update". ``MISSING`` is imported from pydantic in this module
only (its home moved in pydantic 2.14; everything else imports it from here), and it never leaks
into the pure core: :func:`patch_from_update` / :func:`update_from_patch` map it to and from
:data:`~agent_meta.OMITTED`.

Models are frozen, reject unknown fields (``extra="forbid"``), accept both Python names and wire
(camelCase) names, and serialize by wire name. ``_meta`` fields are named ``field_meta`` in
Python (``_meta`` cannot be a pydantic field name).

The owner renders its frames with its own encoder (no pydantic on its hot path);
:func:`encode_session_update` is the slow, obviously-correct reference its tests compare with.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, TypeAlias, overload

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticSerializationError

try:
    from pydantic import MISSING as MISSING
except ImportError:  # pragma: no cover - pydantic 2.12 / 2.13 only ship the experimental path
    from pydantic.experimental.missing_sentinel import MISSING as MISSING

from ..core._errors import AgentMetaError, MetaValueError
from ..core._json import json_copy, json_object_copy
from ..core._sentinel import OMITTED
from ..core._session_info import SessionInfoPatch
from ..core._timestamps import is_rfc3339

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MISSING",
    "BatchEntry",
    "InvalidMessageError",
    "JsonRpcErrorObject",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "MessageDecodeError",
    "MessageParseError",
    "RequestId",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionNotification",
    "SessionNotificationV1",
    "WireArray",
    "WireModel",
    "decode_line",
    "decode_message",
    "encode_frame",
    "encode_session_update",
    "message_from_json",
    "parse_json_line",
    "patch_from_update",
    "update_from_patch",
]


# --------------------------------------------------------------------------- field types


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    # A JSON copy: rejects NaN, non-str keys, sets, cycles (pydantic's lax dict check would let
    # them through and the dump would then lose or crash on them), and detaches caller objects.
    return json_object_copy(value, path="object")


def _json_value(value: Any) -> Any:
    return json_copy(value, path="data")


def _json_array(value: list[Any]) -> list[Any]:
    copied = json_copy(value, path="params")
    assert isinstance(copied, list)
    return copied


def _rfc3339(value: Any) -> Any:
    # Checked after the union (not on its str branch) so that a bad value gives one error.
    if isinstance(value, str) and not is_rfc3339(value):
        raise ValueError(
            "updatedAt must be an RFC 3339 date-time with a UTC offset, such as "
            "2026-01-01T00:00:00Z (protocol v2 clients silently drop anything else)"
        )
    return value


def _null_is_missing(value: object) -> object:
    return MISSING if value is None else value


WireObject: TypeAlias = Annotated[dict[str, Any], AfterValidator(_json_object)]
"""A JSON object, validated and copied with :func:`agent_meta.json_copy`."""

WireArray: TypeAlias = Annotated[list[Any], AfterValidator(_json_array)]
"""A JSON array (by-position ``params``: valid JSON-RPC, which ACP methods do not accept)."""

INT64_MIN: int = -(2**63)
INT64_MAX: int = 2**63 - 1

RequestId: TypeAlias = Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX)] | StrictStr
"""A JSON-RPC request id: an int64 or a string (no floats, no booleans), as ACP types it."""

_UpdatedAtV2: TypeAlias = Annotated[str | MISSING | None, AfterValidator(_rfc3339)]


def _meta_field() -> Any:
    # validation_alias/serialization_alias rather than alias=: type checkers would otherwise
    # only accept ``_meta=`` in __init__, which is not a valid keyword for a pydantic field.
    return Field(default=MISSING, validation_alias="_meta", serialization_alias="_meta")


class WireModel(BaseModel):
    """Base of every wire model: frozen, strict about unknown fields, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )


# --------------------------------------------------------------------------- session/update


class SessionInfoUpdate(WireModel):
    """A protocol v2 ``session_info_update``: every field is ``MISSING``, ``None`` or a value.

    ``updated_at`` must be RFC 3339 with an offset. ``field_meta`` is the shallow ``_meta``
    patch: ``MISSING`` leaves stored metadata alone, ``None`` clears it, and an object patches
    it key by key (a key set to ``None`` removes that key).
    """

    session_update: Literal["session_info_update"] = "session_info_update"
    title: str | MISSING | None = MISSING
    updated_at: _UpdatedAtV2 = MISSING
    field_meta: WireObject | MISSING | None = _meta_field()


class SessionInfoUpdateV1(WireModel):
    """A protocol v1 ``session_info_update``.

    ``updated_at`` is any string (v1 says "ISO 8601" and clients keep whatever they get). The
    model keeps ``_meta: null`` distinct from an omitted ``_meta`` so that what is sent is what
    was built, but note that v1 *receivers* read ``null`` as "absent": v1 cannot express a clear.
    """

    session_update: Literal["session_info_update"] = "session_info_update"
    title: str | MISSING | None = MISSING
    updated_at: str | MISSING | None = MISSING
    field_meta: WireObject | MISSING | None = _meta_field()


_NotificationMeta: TypeAlias = Annotated[WireObject | MISSING, BeforeValidator(_null_is_missing)]


class SessionNotification(WireModel):
    """The ``params`` of a protocol v2 ``session/update`` carrying a ``session_info_update``.

    ``field_meta`` here is the notification-level ``params._meta`` (trace context and other
    per-notification data), not a patch: it is an object or ``MISSING``. ACP types it as a plain
    optional object, so a ``null`` on input means the same as omitted and is read as ``MISSING``
    (it is never written back as ``null``).
    """

    session_id: StrictStr
    update: SessionInfoUpdate
    field_meta: _NotificationMeta = _meta_field()


class SessionNotificationV1(WireModel):
    """Like :class:`SessionNotification`, for protocol v1 (the update is a v1 update)."""

    session_id: StrictStr
    update: SessionInfoUpdateV1
    field_meta: _NotificationMeta = _meta_field()


# --------------------------------------------------------------------------- JSON-RPC 2.0


class JsonRpcRequest(WireModel):
    """A JSON-RPC request. ``params`` is a JSON object, an array (valid JSON-RPC; ACP methods
    answer it with ``-32602``) or ``MISSING``. ``id`` may be ``None``: ACP v1 allows it, v2
    does not, and only the connection knows the version."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None
    method: StrictStr
    params: WireObject | WireArray | MISSING = MISSING


class JsonRpcNotification(WireModel):
    """A JSON-RPC notification (a request without ``id``; it gets no response)."""

    jsonrpc: Literal["2.0"] = "2.0"
    method: StrictStr
    params: WireObject | WireArray | MISSING = MISSING


class JsonRpcSuccessResponse(WireModel):
    """A JSON-RPC success response. ``result`` is any JSON value (JSON-RPC 2.0 section 5);
    ACP results are objects, or ``None`` (v1 ``session/load``), and judging one is the job of
    whoever asked."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: Annotated[Any, AfterValidator(_json_value)]


class JsonRpcErrorObject(WireModel):
    """The ``error`` member of an error response; ``data`` is any JSON value or ``MISSING``."""

    code: StrictInt
    message: StrictStr
    data: Annotated[Any, AfterValidator(_json_value)] | MISSING = MISSING


class JsonRpcErrorResponse(WireModel):
    """A JSON-RPC error response. ``id`` is ``None`` when the request's id could not be read."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None
    error: JsonRpcErrorObject


JsonRpcMessage: TypeAlias = (
    JsonRpcRequest | JsonRpcNotification | JsonRpcSuccessResponse | JsonRpcErrorResponse
)
"""Any single JSON-RPC message, as :func:`decode_message` returns it."""

_MESSAGE_TYPES = (JsonRpcRequest, JsonRpcNotification, JsonRpcSuccessResponse, JsonRpcErrorResponse)


# --------------------------------------------------------------------------- errors


class MessageDecodeError(AgentMetaError, ValueError):
    """An inbound line is not a JSON-RPC message; ``code`` is the JSON-RPC error code to answer.

    ``request_id`` is the message's ``id`` when one could still be read (an int64 or a string),
    else ``None``; JSON-RPC says to answer with ``id: null`` when the id cannot be determined.
    """

    code: ClassVar[int]

    def __init__(self, message: str, *, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class MessageParseError(MessageDecodeError):
    """The line is not JSON (or not UTF-8): answer ``-32700 Parse error``. A line that is JSON
    except for a number no double can hold (``1e400``) keeps its readable ``request_id``."""

    code: ClassVar[int] = -32700


class InvalidMessageError(MessageDecodeError):
    """The line is JSON but not a valid JSON-RPC message: answer ``-32600 Invalid Request``.
    ``__cause__`` holds the pydantic ``ValidationError`` when there is one.

    ``is_response``: the message has the shape of a response (an object with no ``method`` but
    an ``id``, a ``result`` or an ``error``). JSON-RPC never answers a response, so a receiver
    must not answer this one either; ``request_id`` is then the id of the request it claims to
    answer, when readable (in a batch too).
    """

    code: ClassVar[int] = -32600

    def __init__(
        self, message: str, *, request_id: int | str | None = None, is_response: bool = False
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.is_response = is_response


# --------------------------------------------------------------------------- encode / decode


def encode_frame(model: WireModel) -> bytes:
    """Encode one message as one NDJSON line: compact UTF-8 JSON by wire name, then ``b"\\n"``.

    Newlines inside strings are escaped by JSON, so the only newline is the final one. A string
    that cannot be UTF-8 (a lone surrogate) raises :class:`~agent_meta.MetaValueError`.
    """
    try:
        text = model.model_dump_json(by_alias=True)
    except PydanticSerializationError as exc:
        raise MetaValueError(f"cannot encode the frame as UTF-8 JSON: {exc}") from exc
    return text.encode("utf-8") + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OverflowError(f"{text} overflows a JSON number")
    return value


STRICT_JSON: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
"""JSON as the wire allows it: no ``NaN`` or ``Infinity``, no number a double cannot hold (a
``ValueError``). Built once: ``json.loads`` with options builds a decoder per call."""


def parse_json_line(line: bytes | str) -> Any:
    """Parse one NDJSON line (surrounding whitespace and the newline allowed) into JSON data.

    Raises :class:`MessageParseError` for invalid UTF-8, invalid JSON, ``NaN`` / ``Infinity``
    and numbers too large for a float.
    """
    try:
        text = line.decode("utf-8") if isinstance(line, bytes | bytearray) else line
    except ValueError as exc:
        raise MessageParseError(f"not a JSON message: {exc}") from None
    try:
        return STRICT_JSON.decode(text)
    except _OverflowError as exc:
        raise MessageParseError(
            f"not a JSON message: {exc}", request_id=_id_despite_overflow(text)
        ) from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise MessageParseError(f"not a JSON message: {exc}") from None
    except RecursionError:
        raise MessageParseError("not a JSON message: nested too deeply to parse") from None


class _OverflowError(ValueError):
    """A JSON number that no double can hold."""


def _id_despite_overflow(text: str) -> int | str | None:
    """The ``id`` of an otherwise valid message holding a number too large for a double."""
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=lambda _: 0.0)
    except (ValueError, RecursionError):
        return None
    return _readable_id(data) if isinstance(data, dict) else None


def _readable_id(data: Mapping[str, Any]) -> int | str | None:
    value = data.get("id")
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return value if type(value) is str else None


def message_from_json(data: Any) -> JsonRpcMessage:
    """Turn parsed JSON into the matching envelope, or raise :class:`InvalidMessageError`.

    A message with ``method`` is a request (with ``id``) or a notification (without); otherwise
    ``error`` makes an error response and ``result`` a success response. Batches (JSON arrays)
    are not messages: split them and call this per element.
    """
    if isinstance(data, list):
        raise InvalidMessageError("a batch (JSON array) is not a single message: see decode_line")
    if not isinstance(data, dict):
        raise InvalidMessageError(f"a JSON-RPC message is an object, not {type(data).__name__}")
    model: type[WireModel]
    request_id = _readable_id(data)
    response = "method" not in data and not {"id", "result", "error"}.isdisjoint(data)
    if "method" in data:
        model = JsonRpcRequest if "id" in data else JsonRpcNotification
    elif "error" in data:
        model = JsonRpcErrorResponse
    elif "result" in data:
        model = JsonRpcSuccessResponse
    else:
        raise InvalidMessageError(
            "a JSON-RPC message needs a method, a result or an error",
            request_id=request_id,
            is_response=response,
        )
    if data.get("jsonrpc") != "2.0":
        raise InvalidMessageError(
            '"jsonrpc" must be "2.0"', request_id=request_id, is_response=response
        )
    try:
        message = model.model_validate(data)
    except ValidationError as exc:
        raise InvalidMessageError(
            f"invalid {model.__name__}: {exc}", request_id=request_id, is_response=response
        ) from exc
    assert isinstance(message, _MESSAGE_TYPES)
    return message


BatchEntry: TypeAlias = "JsonRpcMessage | InvalidMessageError"
"""One entry of a batch: a message, or the error its entry earns (answered with ``id: null``)."""


def decode_line(line: bytes | str) -> JsonRpcMessage | list[BatchEntry]:
    """Decode one NDJSON line: a single message, or a JSON-RPC batch (a non-empty array).

    Each batch entry is decoded on its own; an invalid entry becomes its
    :class:`InvalidMessageError` (with ``request_id`` ``None``, as the batch rules say, unless
    it :attr:`~InvalidMessageError.is_response`) and does not spoil the others. An empty array
    raises :class:`InvalidMessageError`; a line that is not JSON raises
    :class:`MessageParseError`.
    """
    data = parse_json_line(line)
    if not isinstance(data, list):
        return message_from_json(data)
    if not data:
        raise InvalidMessageError("an empty batch is not a valid request")
    entries: list[BatchEntry] = []
    for item in data:
        if isinstance(item, list):
            entries.append(InvalidMessageError("a batch entry cannot be a batch"))
            continue
        try:
            entries.append(message_from_json(item))
        except InvalidMessageError as exc:
            if not exc.is_response:
                exc.request_id = None
            entries.append(exc)
    return entries


def decode_message(line: bytes | str) -> JsonRpcMessage:
    """Decode one NDJSON line into a JSON-RPC envelope.

    Raises :class:`MessageParseError` (``-32700``) when the line is not JSON and
    :class:`InvalidMessageError` (``-32600``) when it is JSON but not one valid JSON-RPC 2.0
    message. Both are :class:`MessageDecodeError` with the code to answer in ``code``.
    """
    return message_from_json(parse_json_line(line))


# --------------------------------------------------------------------------- core converters


def _to_core(value: Any) -> Any:
    return OMITTED if value is MISSING else value


def _to_wire(value: Any) -> Any:
    return MISSING if value is OMITTED else value


def patch_from_update(update: SessionInfoUpdate | SessionInfoUpdateV1) -> SessionInfoPatch:
    """Return the core patch of an update: ``MISSING`` becomes ``OMITTED``, ``None`` stays.

    The mapping is mechanical for both versions; a v1 ``_meta: null`` becomes ``None`` too, and
    whoever interprets v1 traffic decides whether to read it as "absent" (as v1 clients do).
    """
    return SessionInfoPatch(
        title=_to_core(update.title),
        updated_at=_to_core(update.updated_at),
        meta=_to_core(update.field_meta),
    )


@overload
def update_from_patch(
    patch: SessionInfoPatch, protocol_version: Literal[2]
) -> SessionInfoUpdate: ...
@overload
def update_from_patch(
    patch: SessionInfoPatch, protocol_version: Literal[1]
) -> SessionInfoUpdateV1: ...
@overload
def update_from_patch(
    patch: SessionInfoPatch, protocol_version: int
) -> SessionInfoUpdate | SessionInfoUpdateV1: ...
def update_from_patch(
    patch: SessionInfoPatch, protocol_version: int
) -> SessionInfoUpdate | SessionInfoUpdateV1:
    """Return the wire update for a core patch (``OMITTED`` becomes ``MISSING``).

    The patch goes out exactly as given, for either version (the v1 merged mode is the owner's
    job, not the encoder's). For v2 an ``updated_at`` that is not RFC 3339 with an offset
    raises a pydantic ``ValidationError``; any other version than 1 or 2 raises ``ValueError``.
    """
    model: type[SessionInfoUpdate | SessionInfoUpdateV1]
    if protocol_version == 2:
        model = SessionInfoUpdate
    elif protocol_version == 1:
        model = SessionInfoUpdateV1
    else:
        raise ValueError(f"unsupported ACP protocol version {protocol_version!r} (expected 1 or 2)")
    return model(
        title=_to_wire(patch.title),
        updated_at=_to_wire(patch.updated_at),
        field_meta=_to_wire(patch.meta),
    )


def encode_session_update(
    session_id: str,
    patch: SessionInfoPatch,
    protocol_version: int,
    notification_meta: Mapping[str, object] | None = None,
) -> bytes:
    """Return the whole ``session/update`` notification carrying ``patch``, as one NDJSON line.

    ``notification_meta`` becomes ``params._meta`` (omitted when ``None``). This is the
    reference encoder: slow and plain, for tests to compare faster encoders against.
    """
    update = update_from_patch(patch, protocol_version)
    meta: Any = MISSING if notification_meta is None else notification_meta
    params: SessionNotification | SessionNotificationV1
    if isinstance(update, SessionInfoUpdate):
        params = SessionNotification(session_id=session_id, update=update, field_meta=meta)
    else:
        params = SessionNotificationV1(session_id=session_id, update=update, field_meta=meta)
    frame = JsonRpcNotification(method="session/update", params=params.model_dump(mode="json"))
    return encode_frame(frame)
