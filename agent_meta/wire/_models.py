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
:func:`~agent_meta.wire._convert.encode_session_update` is the slow, obviously-correct reference its
tests compare with. Decoding is :mod:`agent_meta.wire._decode`; the converters to and from the
pure core are :mod:`agent_meta.wire._convert`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticSerializationError

try:
    from pydantic import MISSING as MISSING
except ImportError:  # pragma: no cover - pydantic 2.12 / 2.13 only ship the experimental path
    from pydantic.experimental.missing_sentinel import MISSING as MISSING

from ..core._errors import MetaValueError
from ..core._json import json_copy, json_object_copy
from ..core._timestamps import is_rfc3339

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MESSAGE_TYPES",
    "MISSING",
    "JsonRpcErrorObject",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "RequestId",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionNotification",
    "SessionNotificationV1",
    "WireArray",
    "WireModel",
    "encode_frame",
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
"""Any single JSON-RPC message, as :func:`~agent_meta.wire.decode` returns it."""

MESSAGE_TYPES = (JsonRpcRequest, JsonRpcNotification, JsonRpcSuccessResponse, JsonRpcErrorResponse)


# --------------------------------------------------------------------------- encoding


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
