"""Converting between the wire models and the pure core (``MISSING`` and ``OMITTED``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from ..core._sentinel import OMITTED
from ..core._session_info import SessionInfoPatch
from ._models import (
    MISSING,
    JsonRpcNotification,
    SessionInfoUpdate,
    SessionInfoUpdateV1,
    SessionNotification,
    SessionNotificationV1,
    encode_frame,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["encode_session_update", "patch_from_update", "update_from_patch"]


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
