"""agent_meta: the session-info ``_meta`` owner for Python ACP agents.

The public surface is exactly what this module re-exports (``tests/test_exports.py`` pins it),
grouped by layer, from the bottom up (``docs/architecture.md``):

- core: the pure patch rule, session info and JSON values, and the errors (no I/O, no runtime);
- owner: the options, the handles agents hold, the trio and asyncio drivers (the
  :class:`Owner` protocol both satisfy), transports and stores;
- acp: the agent side of an ACP connection.

The wire models, the decoder and the JSON-RPC error codes are in :mod:`agent_meta.wire` (as the
official SDK keeps its schema in ``acp.schema``); the official-SDK adapter is
:mod:`agent_meta.sdk`, the test kit :mod:`agent_meta.testing`. Everything else is private.

Only the core is imported with the package: ``import agent_meta`` for the patch rule loads no
runtime (trio, asyncio), no pydantic, no sqlite3 and no psycopg. Every other name is imported on
first use (PEP 562), from the module named in ``_LAZY``. Names renamed or moved in 0.2 still
resolve, with a ``DeprecationWarning``, for one release (``_DEPRECATED``; see ``CHANGELOG.md``).
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
from .core._errors import LifetimeTakenOverError as LifetimeTakenOverError
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
from .core._patch import apply_meta_patch as apply_meta_patch
from .core._patch import compose_meta_patches as compose_meta_patches
from .core._patch import fold_meta_patches as fold_meta_patches
from .core._sentinel import OMITTED as OMITTED
from .core._sentinel import Omitted as Omitted
from .core._session_info import SessionInfo as SessionInfo
from .core._session_info import SessionInfoPatch as SessionInfoPatch
from .core._session_info import apply_session_info_patch as apply_session_info_patch
from .core._session_info import compose_session_info_patches as compose_session_info_patches
from .core._timestamps import is_rfc3339 as is_rfc3339

if _typing.TYPE_CHECKING:
    from .core._errors import ConnectionClosedError as ConnectionClosedError
    from .core._jsonrpc import JsonRpcError as JsonRpcError
    from .owner._asyncio import AsyncioMetaOwner as AsyncioMetaOwner
    from .owner._asyncio import open_asyncio_owner as open_asyncio_owner
    from .owner._asyncio_stream import AsyncioStreamTransport as AsyncioStreamTransport
    from .owner._lifetime import DomainHandle as DomainHandle
    from .owner._lifetime import SessionLifetime as SessionLifetime
    from .owner._protocol import Owner as Owner
    from .owner._statistics import OwnerStatistics as OwnerStatistics
    from .owner._threadsafe import ThreadsafeOwner as ThreadsafeOwner
    from .owner._transport import Transport as Transport
    from .owner._trio import MetaOwner as MetaOwner
    from .owner._trio import open_owner as open_owner
    from .owner._trio_stream import StreamTransport as StreamTransport
    from .sansio._options import OwnerOptions as OwnerOptions
    from .sansio._options import RetryPolicy as RetryPolicy
    from .sansio._records import StoredLifetime as StoredLifetime
    from .sansio._state import FailureIncident as FailureIncident
    from .stores._open import open_store as open_store
    from .stores._postgres import PostgresStore as PostgresStore
    from .stores._sqlite import SQLiteStore as SQLiteStore
    from .stores._store import LifetimeStore as LifetimeStore
    from .stores._store import MemoryStore as MemoryStore
    from .trio_connection._agent import Agent as Agent
    from .trio_connection._agent import BaseAgent as BaseAgent
    from .trio_connection._agent import RequestContext as RequestContext
    from .trio_connection._connection import (
        SUPPORTED_PROTOCOL_VERSIONS as SUPPORTED_PROTOCOL_VERSIONS,
    )
    from .trio_connection._connection import AgentConnection as AgentConnection
    from .trio_connection._outbound import ClientRequestError as ClientRequestError
    from .trio_connection._serve import serve_agent as serve_agent
    from .trio_connection._stdio import run_stdio_agent as run_stdio_agent
    from .trio_connection._stdio import serve_stdio as serve_stdio

_LAZY: dict[str, str] = {
    "Agent": ".trio_connection._agent",
    "BaseAgent": ".trio_connection._agent",
    "RequestContext": ".trio_connection._agent",
    "SUPPORTED_PROTOCOL_VERSIONS": ".trio_connection._connection",
    "AgentConnection": ".trio_connection._connection",
    "ClientRequestError": ".trio_connection._outbound",
    "ConnectionClosedError": ".core._errors",
    "serve_agent": ".trio_connection._serve",
    "run_stdio_agent": ".trio_connection._stdio",
    "serve_stdio": ".trio_connection._stdio",
    "AsyncioMetaOwner": ".owner._asyncio",
    "open_asyncio_owner": ".owner._asyncio",
    "AsyncioStreamTransport": ".owner._asyncio_stream",
    "OwnerStatistics": ".owner._statistics",
    "DomainHandle": ".owner._lifetime",
    "SessionLifetime": ".owner._lifetime",
    "open_store": ".stores._open",
    "PostgresStore": ".stores._postgres",
    "Owner": ".owner._protocol",
    "SQLiteStore": ".stores._sqlite",
    "LifetimeStore": ".stores._store",
    "MemoryStore": ".stores._store",
    "ThreadsafeOwner": ".owner._threadsafe",
    "Transport": ".owner._transport",
    "MetaOwner": ".owner._trio",
    "open_owner": ".owner._trio",
    "StreamTransport": ".owner._trio_stream",
    "OwnerOptions": ".sansio._options",
    "RetryPolicy": ".sansio._options",
    "StoredLifetime": ".sansio._records",
    "FailureIncident": ".sansio._state",
    "JsonRpcError": ".core._jsonrpc",
}
"""Names imported on first use, and the module (relative to the package) that holds each."""

_DEPRECATED: dict[str, tuple[str, str]] = {
    # Renamed in 0.2: one word, "patch", for one concept.
    "apply_meta_update": (".core._patch", "apply_meta_patch"),
    "fold_meta_updates": (".core._patch", "fold_meta_patches"),
    "compose_meta_updates": (".core._patch", "compose_meta_patches"),
    "MetaUpdate": (".core._patch", "MetaPatch"),
    # Moved to agent_meta.wire in 0.2.
    **{
        name: (".wire", name)
        for name in (
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
            "WireModel",
            "encode_frame",
            "encode_session_update",
            "negotiate_version",
            "patch_from_update",
            "update_from_patch",
        )
    },
    # One decoder, agent_meta.wire.decode, in 0.2.
    "decode_line": (".wire", "decode"),
    "decode_message": (".wire._decode", "decode_message"),
    "parse_json_line": (".wire._decode", "parse_json_line"),
    "message_from_json": (".wire._decode", "message_from_json"),
}
"""Old public names, for one release: (module, name) of what replaces each."""

__all__ = [
    "OMITTED",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "Agent",
    "AgentConnection",
    "AgentMetaError",
    "AguiConversion",
    "AsyncioMetaOwner",
    "AsyncioStreamTransport",
    "BaseAgent",
    "ClientRequestError",
    "ConnectionClosedError",
    "DomainHandle",
    "FailureIncident",
    "FrameLostError",
    "FrameNotSentError",
    "FrameTooLargeError",
    "JsonObject",
    "JsonRpcError",
    "JsonValue",
    "LifetimeStore",
    "LifetimeTakenOverError",
    "MemoryStore",
    "MetaOwner",
    "MetaPatch",
    "MetaPathError",
    "MetaValueError",
    "Omitted",
    "Owner",
    "OwnerClosedError",
    "OwnerOptions",
    "OwnerStatistics",
    "PostgresStore",
    "RequestContext",
    "RetryPolicy",
    "SQLiteStore",
    "SessionExistsError",
    "SessionInfo",
    "SessionInfoPatch",
    "SessionLifetime",
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
    "__version__",
    "agui_metadata_to_meta_patch",
    "apply_meta_patch",
    "apply_session_info_patch",
    "compose_meta_patches",
    "compose_session_info_patches",
    "fold_meta_patches",
    "is_rfc3339",
    "json_copy",
    "merge_agui_metadata",
    "open_asyncio_owner",
    "open_owner",
    "open_store",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
]


def __getattr__(name: str) -> _typing.Any:
    from importlib import import_module
    from warnings import warn

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(import_module(module, __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    moved = _DEPRECATED.get(name)
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, new_name = moved
    where = "agent_meta.wire" if module.startswith(".wire") else "agent_meta"
    warn(
        f"agent_meta.{name} is deprecated and goes in the next release: use {where}.{new_name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(import_module(module, __name__), new_name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
