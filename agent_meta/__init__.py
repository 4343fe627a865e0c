"""agent_meta: the session-info ``_meta`` owner for Python ACP agents.

The public surface is exactly what this module re-exports (``tests/test_exports.py`` pins it).
"""

from ._agui import AguiConversion as AguiConversion
from ._agui import agui_metadata_to_meta_patch as agui_metadata_to_meta_patch
from ._agui import merge_agui_metadata as merge_agui_metadata
from ._connection import SUPPORTED_PROTOCOL_VERSIONS as SUPPORTED_PROTOCOL_VERSIONS
from ._connection import Agent as Agent
from ._connection import AgentConnection as AgentConnection
from ._connection import BaseAgent as BaseAgent
from ._connection import RequestContext as RequestContext
from ._connection import run_stdio_agent as run_stdio_agent
from ._connection import serve_agent as serve_agent
from ._connection import serve_stdio as serve_stdio
from ._errors import AgentMetaError as AgentMetaError
from ._errors import FrameTooLargeError as FrameTooLargeError
from ._errors import MetaPathError as MetaPathError
from ._errors import MetaValueError as MetaValueError
from ._errors import OwnerClosedError as OwnerClosedError
from ._errors import SessionExistsError as SessionExistsError
from ._errors import TransportBrokenError as TransportBrokenError
from ._errors import UnknownSessionError as UnknownSessionError
from ._json import JsonObject as JsonObject
from ._json import JsonValue as JsonValue
from ._json import json_copy as json_copy
from ._jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
from ._jsonrpc import INVALID_PARAMS as INVALID_PARAMS
from ._jsonrpc import INVALID_REQUEST as INVALID_REQUEST
from ._jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from ._jsonrpc import PARSE_ERROR as PARSE_ERROR
from ._jsonrpc import REQUEST_CANCELLED as REQUEST_CANCELLED
from ._jsonrpc import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
from ._jsonrpc import JsonRpcError as JsonRpcError
from ._lifetime import DomainHandle as DomainHandle
from ._lifetime import SessionLifetime as SessionLifetime
from ._owner import MetaOwner as MetaOwner
from ._owner import OwnerStatistics as OwnerStatistics
from ._owner import default_retry as default_retry
from ._owner import open_owner as open_owner
from ._patch import MetaPatch as MetaPatch
from ._patch import MetaUpdate as MetaUpdate
from ._patch import apply_meta_update as apply_meta_update
from ._patch import compose_meta_updates as compose_meta_updates
from ._patch import fold_meta_updates as fold_meta_updates
from ._sentinel import OMITTED as OMITTED
from ._sentinel import Omitted as Omitted
from ._session_info import SessionInfo as SessionInfo
from ._session_info import SessionInfoPatch as SessionInfoPatch
from ._session_info import apply_session_info_patch as apply_session_info_patch
from ._session_info import compose_session_info_patches as compose_session_info_patches
from ._state import FailureIncident as FailureIncident
from ._store import LifetimeStore as LifetimeStore
from ._store import MemoryStore as MemoryStore
from ._store import StoreCorruptError as StoreCorruptError
from ._store import StoredLifetime as StoredLifetime
from ._store import StoreError as StoreError
from ._store import StoreLockedError as StoreLockedError
from ._store import StoreSchemaError as StoreSchemaError
from ._store_sqlite import SQLiteStore as SQLiteStore
from ._timestamps import is_rfc3339 as is_rfc3339
from ._transport import FrameLostError as FrameLostError
from ._transport import FrameNotSentError as FrameNotSentError
from ._transport import StreamTransport as StreamTransport
from ._transport import Transport as Transport
from ._version import __version__ as __version__
from ._wire import InvalidMessageError as InvalidMessageError
from ._wire import JsonRpcErrorObject as JsonRpcErrorObject
from ._wire import JsonRpcErrorResponse as JsonRpcErrorResponse
from ._wire import JsonRpcMessage as JsonRpcMessage
from ._wire import JsonRpcNotification as JsonRpcNotification
from ._wire import JsonRpcRequest as JsonRpcRequest
from ._wire import JsonRpcSuccessResponse as JsonRpcSuccessResponse
from ._wire import MessageDecodeError as MessageDecodeError
from ._wire import MessageParseError as MessageParseError
from ._wire import RequestId as RequestId
from ._wire import SessionInfoUpdate as SessionInfoUpdate
from ._wire import SessionInfoUpdateV1 as SessionInfoUpdateV1
from ._wire import SessionNotification as SessionNotification
from ._wire import SessionNotificationV1 as SessionNotificationV1
from ._wire import WireModel as WireModel
from ._wire import decode_message as decode_message
from ._wire import encode_frame as encode_frame
from ._wire import encode_session_update as encode_session_update
from ._wire import message_from_json as message_from_json
from ._wire import parse_json_line as parse_json_line
from ._wire import patch_from_update as patch_from_update
from ._wire import update_from_patch as update_from_patch

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "OMITTED",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "Agent",
    "AgentConnection",
    "AgentMetaError",
    "AguiConversion",
    "BaseAgent",
    "DomainHandle",
    "FailureIncident",
    "FrameLostError",
    "FrameNotSentError",
    "FrameTooLargeError",
    "InvalidMessageError",
    "JsonObject",
    "JsonRpcError",
    "JsonRpcErrorObject",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "JsonValue",
    "LifetimeStore",
    "MemoryStore",
    "MessageDecodeError",
    "MessageParseError",
    "MetaOwner",
    "MetaPatch",
    "MetaPathError",
    "MetaUpdate",
    "MetaValueError",
    "Omitted",
    "OwnerClosedError",
    "OwnerStatistics",
    "RequestContext",
    "RequestId",
    "SQLiteStore",
    "SessionExistsError",
    "SessionInfo",
    "SessionInfoPatch",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionLifetime",
    "SessionNotification",
    "SessionNotificationV1",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "StoredLifetime",
    "StreamTransport",
    "Transport",
    "TransportBrokenError",
    "UnknownSessionError",
    "WireModel",
    "__version__",
    "agui_metadata_to_meta_patch",
    "apply_meta_update",
    "apply_session_info_patch",
    "compose_meta_updates",
    "compose_session_info_patches",
    "decode_message",
    "default_retry",
    "encode_frame",
    "encode_session_update",
    "fold_meta_updates",
    "is_rfc3339",
    "json_copy",
    "merge_agui_metadata",
    "message_from_json",
    "open_owner",
    "parse_json_line",
    "patch_from_update",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
    "update_from_patch",
]
