"""The ACP wire: pydantic models of ``session/update`` and JSON-RPC, decoding and encoding.

This is agent_meta's counterpart of ``acp.schema``: import it explicitly (``import
agent_meta.wire``; it loads pydantic, ``import agent_meta`` does not). ``_meta: null`` and an
omitted ``_meta`` stay distinct through every model here (see ``docs/wire.md``).

- Models: :class:`SessionInfoUpdate` (v2) and :class:`SessionInfoUpdateV1`, the
  ``session/update`` params :class:`SessionNotification` / :class:`SessionNotificationV1`, and
  the JSON-RPC envelopes.
- :func:`decode`: the one decoder, a line into a message or a batch, with typed errors
  (:class:`MessageParseError`, :class:`InvalidMessageError`) carrying the code to answer.
- :func:`encode_frame`, :func:`encode_session_update`: one message as one NDJSON line.
- :func:`patch_from_update`, :func:`update_from_patch`: to and from the pure core's
  :class:`~agent_meta.SessionInfoPatch`.
- JSON-RPC and ACP error codes, :class:`~agent_meta.JsonRpcError`, :func:`negotiate_version`,
  :func:`replay_of` (whether a ``session/load`` or ``session/resume`` replays: :class:`Replay`),
  and what a handler checks its params with (:func:`require_str`, :func:`optional_str`,
  :func:`require_object_list`: ``-32602`` naming the field).
"""

from ..core._jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
from ..core._jsonrpc import INVALID_PARAMS as INVALID_PARAMS
from ..core._jsonrpc import INVALID_REQUEST as INVALID_REQUEST
from ..core._jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from ..core._jsonrpc import PARSE_ERROR as PARSE_ERROR
from ..core._jsonrpc import REQUEST_CANCELLED as REQUEST_CANCELLED
from ..core._jsonrpc import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
from ..core._jsonrpc import UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION
from ..core._jsonrpc import JsonRpcError as JsonRpcError
from ..core._jsonrpc import negotiate_version as negotiate_version
from ..core._jsonrpc import optional_str as optional_str
from ..core._jsonrpc import require_object_list as require_object_list
from ..core._jsonrpc import require_str as require_str
from ..core._replay import Replay as Replay
from ..core._replay import replay_of as replay_of
from ._convert import encode_session_update as encode_session_update
from ._convert import patch_from_update as patch_from_update
from ._convert import update_from_patch as update_from_patch
from ._decode import BatchEntry as BatchEntry
from ._decode import InvalidMessageError as InvalidMessageError
from ._decode import MessageDecodeError as MessageDecodeError
from ._decode import MessageParseError as MessageParseError
from ._decode import decode as decode
from ._models import JsonRpcErrorObject as JsonRpcErrorObject
from ._models import JsonRpcErrorResponse as JsonRpcErrorResponse
from ._models import JsonRpcMessage as JsonRpcMessage
from ._models import JsonRpcNotification as JsonRpcNotification
from ._models import JsonRpcRequest as JsonRpcRequest
from ._models import JsonRpcSuccessResponse as JsonRpcSuccessResponse
from ._models import RequestId as RequestId
from ._models import SessionInfoUpdate as SessionInfoUpdate
from ._models import SessionInfoUpdateV1 as SessionInfoUpdateV1
from ._models import SessionNotification as SessionNotification
from ._models import SessionNotificationV1 as SessionNotificationV1
from ._models import WireModel as WireModel
from ._models import encode_frame as encode_frame

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "BatchEntry",
    "InvalidMessageError",
    "JsonRpcError",
    "JsonRpcErrorObject",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "MessageDecodeError",
    "MessageParseError",
    "Replay",
    "RequestId",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionNotification",
    "SessionNotificationV1",
    "WireModel",
    "decode",
    "encode_frame",
    "encode_session_update",
    "negotiate_version",
    "optional_str",
    "patch_from_update",
    "replay_of",
    "require_object_list",
    "require_str",
    "update_from_patch",
]
