"""agent_meta: the session-info ``_meta`` owner for Python ACP agents.

The public surface is exactly what this module re-exports (``tests/test_exports.py`` pins it),
grouped by layer, from the bottom up (``docs/architecture.md``):

- core: the pure patch rule and JSON values (no I/O, no runtime);
- wire: the pydantic models of ACP messages and JSON-RPC envelopes;
- owner: the options, the handles agents hold, the trio and asyncio drivers, transports and
  stores;
- acp: the agent side of an ACP connection.

Everything in the subpackages that is not re-exported here is private.

Only the core is imported with the package: ``import agent_meta`` for the patch rule loads no
runtime (trio, asyncio), no pydantic and no sqlite3. Every other name is imported on first
use (PEP 562), from the module named in ``_LAZY``.
"""

import typing as _typing

from ._version import __version__ as __version__
from .core._agui import AguiConversion as AguiConversion
from .core._agui import agui_metadata_to_meta_patch as agui_metadata_to_meta_patch
from .core._agui import merge_agui_metadata as merge_agui_metadata
from .core._errors import AgentMetaError as AgentMetaError
from .core._errors import FrameLostError as FrameLostError
from .core._errors import FrameNotSentError as FrameNotSentError
from .core._errors import FrameTooLargeError as FrameTooLargeError
from .core._errors import MetaPathError as MetaPathError
from .core._errors import MetaValueError as MetaValueError
from .core._errors import OwnerClosedError as OwnerClosedError
from .core._errors import SessionExistsError as SessionExistsError
from .core._errors import StoreCorruptError as StoreCorruptError
from .core._errors import StoreError as StoreError
from .core._errors import StoreLockedError as StoreLockedError
from .core._errors import StoreSchemaError as StoreSchemaError
from .core._errors import TransportBrokenError as TransportBrokenError
from .core._errors import UnknownSessionError as UnknownSessionError
from .core._json import JsonObject as JsonObject
from .core._json import JsonValue as JsonValue
from .core._json import json_copy as json_copy
from .core._patch import MetaPatch as MetaPatch
from .core._patch import MetaUpdate as MetaUpdate
from .core._patch import apply_meta_update as apply_meta_update
from .core._patch import compose_meta_updates as compose_meta_updates
from .core._patch import fold_meta_updates as fold_meta_updates
from .core._sentinel import OMITTED as OMITTED
from .core._sentinel import Omitted as Omitted
from .core._session_info import SessionInfo as SessionInfo
from .core._session_info import SessionInfoPatch as SessionInfoPatch
from .core._session_info import apply_session_info_patch as apply_session_info_patch
from .core._session_info import compose_session_info_patches as compose_session_info_patches
from .core._timestamps import is_rfc3339 as is_rfc3339

if _typing.TYPE_CHECKING:
    from .acp._agent import Agent as Agent
    from .acp._agent import BaseAgent as BaseAgent
    from .acp._agent import RequestContext as RequestContext
    from .acp._connection import SUPPORTED_PROTOCOL_VERSIONS as SUPPORTED_PROTOCOL_VERSIONS
    from .acp._connection import AgentConnection as AgentConnection
    from .acp._outbound import ClientRequestError as ClientRequestError
    from .acp._outbound import ConnectionClosedError as ConnectionClosedError
    from .acp._serve import serve_agent as serve_agent
    from .acp._stdio import run_stdio_agent as run_stdio_agent
    from .acp._stdio import serve_stdio as serve_stdio
    from .owner._asyncio import AsyncioMetaOwner as AsyncioMetaOwner
    from .owner._asyncio import open_asyncio_owner as open_asyncio_owner
    from .owner._asyncio_stream import AsyncioStreamTransport as AsyncioStreamTransport
    from .owner._base import OwnerStatistics as OwnerStatistics
    from .owner._lifetime import DomainHandle as DomainHandle
    from .owner._lifetime import SessionLifetime as SessionLifetime
    from .owner._sqlite import SQLiteStore as SQLiteStore
    from .owner._store import LifetimeStore as LifetimeStore
    from .owner._store import MemoryStore as MemoryStore
    from .owner._threadsafe import ThreadsafeOwner as ThreadsafeOwner
    from .owner._transport import Transport as Transport
    from .owner._trio import MetaOwner as MetaOwner
    from .owner._trio import open_owner as open_owner
    from .owner._trio_stream import StreamTransport as StreamTransport
    from .sansio._options import OwnerOptions as OwnerOptions
    from .sansio._options import RetryPolicy as RetryPolicy
    from .sansio._records import StoredLifetime as StoredLifetime
    from .sansio._state import FailureIncident as FailureIncident
    from .wire._jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
    from .wire._jsonrpc import INVALID_PARAMS as INVALID_PARAMS
    from .wire._jsonrpc import INVALID_REQUEST as INVALID_REQUEST
    from .wire._jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
    from .wire._jsonrpc import PARSE_ERROR as PARSE_ERROR
    from .wire._jsonrpc import REQUEST_CANCELLED as REQUEST_CANCELLED
    from .wire._jsonrpc import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
    from .wire._jsonrpc import UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION
    from .wire._jsonrpc import JsonRpcError as JsonRpcError
    from .wire._jsonrpc import negotiate_version as negotiate_version
    from .wire._models import BatchEntry as BatchEntry
    from .wire._models import InvalidMessageError as InvalidMessageError
    from .wire._models import JsonRpcErrorObject as JsonRpcErrorObject
    from .wire._models import JsonRpcErrorResponse as JsonRpcErrorResponse
    from .wire._models import JsonRpcMessage as JsonRpcMessage
    from .wire._models import JsonRpcNotification as JsonRpcNotification
    from .wire._models import JsonRpcRequest as JsonRpcRequest
    from .wire._models import JsonRpcSuccessResponse as JsonRpcSuccessResponse
    from .wire._models import MessageDecodeError as MessageDecodeError
    from .wire._models import MessageParseError as MessageParseError
    from .wire._models import RequestId as RequestId
    from .wire._models import SessionInfoUpdate as SessionInfoUpdate
    from .wire._models import SessionInfoUpdateV1 as SessionInfoUpdateV1
    from .wire._models import SessionNotification as SessionNotification
    from .wire._models import SessionNotificationV1 as SessionNotificationV1
    from .wire._models import WireModel as WireModel
    from .wire._models import decode_line as decode_line
    from .wire._models import decode_message as decode_message
    from .wire._models import encode_frame as encode_frame
    from .wire._models import encode_session_update as encode_session_update
    from .wire._models import message_from_json as message_from_json
    from .wire._models import parse_json_line as parse_json_line
    from .wire._models import patch_from_update as patch_from_update
    from .wire._models import update_from_patch as update_from_patch

_LAZY: dict[str, str] = {
    "Agent": ".acp._agent",
    "BaseAgent": ".acp._agent",
    "RequestContext": ".acp._agent",
    "SUPPORTED_PROTOCOL_VERSIONS": ".acp._connection",
    "AgentConnection": ".acp._connection",
    "run_stdio_agent": ".acp._stdio",
    "serve_agent": ".acp._serve",
    "serve_stdio": ".acp._stdio",
    "ClientRequestError": ".acp._outbound",
    "ConnectionClosedError": ".acp._outbound",
    "AsyncioMetaOwner": ".owner._asyncio",
    "open_asyncio_owner": ".owner._asyncio",
    "AsyncioStreamTransport": ".owner._asyncio_stream",
    "OwnerStatistics": ".owner._base",
    "DomainHandle": ".owner._lifetime",
    "SessionLifetime": ".owner._lifetime",
    "SQLiteStore": ".owner._sqlite",
    "LifetimeStore": ".owner._store",
    "MemoryStore": ".owner._store",
    "ThreadsafeOwner": ".owner._threadsafe",
    "Transport": ".owner._transport",
    "MetaOwner": ".owner._trio",
    "open_owner": ".owner._trio",
    "StreamTransport": ".owner._trio_stream",
    "OwnerOptions": ".sansio._options",
    "RetryPolicy": ".sansio._options",
    "StoredLifetime": ".sansio._records",
    "FailureIncident": ".sansio._state",
    "INTERNAL_ERROR": ".wire._jsonrpc",
    "INVALID_PARAMS": ".wire._jsonrpc",
    "INVALID_REQUEST": ".wire._jsonrpc",
    "METHOD_NOT_FOUND": ".wire._jsonrpc",
    "PARSE_ERROR": ".wire._jsonrpc",
    "REQUEST_CANCELLED": ".wire._jsonrpc",
    "RESOURCE_NOT_FOUND": ".wire._jsonrpc",
    "UNSUPPORTED_PROTOCOL_VERSION": ".wire._jsonrpc",
    "JsonRpcError": ".wire._jsonrpc",
    "negotiate_version": ".wire._jsonrpc",
    "BatchEntry": ".wire._models",
    "InvalidMessageError": ".wire._models",
    "JsonRpcErrorObject": ".wire._models",
    "JsonRpcErrorResponse": ".wire._models",
    "JsonRpcMessage": ".wire._models",
    "JsonRpcNotification": ".wire._models",
    "JsonRpcRequest": ".wire._models",
    "JsonRpcSuccessResponse": ".wire._models",
    "MessageDecodeError": ".wire._models",
    "MessageParseError": ".wire._models",
    "RequestId": ".wire._models",
    "SessionInfoUpdate": ".wire._models",
    "SessionInfoUpdateV1": ".wire._models",
    "SessionNotification": ".wire._models",
    "SessionNotificationV1": ".wire._models",
    "WireModel": ".wire._models",
    "decode_line": ".wire._models",
    "decode_message": ".wire._models",
    "encode_frame": ".wire._models",
    "encode_session_update": ".wire._models",
    "message_from_json": ".wire._models",
    "parse_json_line": ".wire._models",
    "patch_from_update": ".wire._models",
    "update_from_patch": ".wire._models",
}
"""Names imported on first use, and the module (relative to the package) that holds each."""

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
    "UNSUPPORTED_PROTOCOL_VERSION",
    "Agent",
    "AgentConnection",
    "AgentMetaError",
    "AguiConversion",
    "AsyncioMetaOwner",
    "AsyncioStreamTransport",
    "BaseAgent",
    "BatchEntry",
    "ClientRequestError",
    "ConnectionClosedError",
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
    "OwnerOptions",
    "OwnerStatistics",
    "RequestContext",
    "RequestId",
    "RetryPolicy",
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
    "ThreadsafeOwner",
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
    "decode_line",
    "decode_message",
    "encode_frame",
    "encode_session_update",
    "fold_meta_updates",
    "is_rfc3339",
    "json_copy",
    "merge_agui_metadata",
    "message_from_json",
    "negotiate_version",
    "open_asyncio_owner",
    "open_owner",
    "parse_json_line",
    "patch_from_update",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
    "update_from_patch",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
