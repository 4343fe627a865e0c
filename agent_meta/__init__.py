"""agent_meta: the session-info ``_meta`` owner for ACP agents.

The public surface is exactly what this module re-exports (``tests/test_exports.py`` pins it;
``docs/api.md`` lists it), from the bottom up (``docs/architecture.md``):

- core: the pure patch rule, session info and JSON values, the JSON-RPC error codes, and the
  errors (no I/O, no runtime);
- owner: the options, the trio and asyncio drivers (the :class:`Owner` protocol both satisfy),
  the handles agents hold, the transport seam, and the stores;
- the trio connection: the agent side of an ACP connection, for agents written on agent_meta.

The wire models and the decoder are in :mod:`agent_meta.wire`; the official-SDK adapter is
:mod:`agent_meta.sdk`, the test kit :mod:`agent_meta.testing`. Everything else is private.

Only the core is imported with the package: ``import agent_meta`` for the patch rule loads no
runtime (trio, asyncio), no pydantic, no sqlite3 and no psycopg. Every other name is imported on
first use (PEP 562), from the module named in ``_LAZY``.
"""

import typing as _typing

from ._version import __version__ as __version__
from .core._agui import AguiConversion as AguiConversion
from .core._agui import agui_metadata_to_meta_patch as agui_metadata_to_meta_patch
from .core._agui import merge_agui_metadata as merge_agui_metadata
from .core._errors import AgentMetaError as AgentMetaError
from .core._errors import ConnectionClosedError as ConnectionClosedError
from .core._errors import FrameLostError as FrameLostError
from .core._errors import FrameNotSentError as FrameNotSentError
from .core._errors import FrameTooLargeError as FrameTooLargeError
from .core._errors import LifetimeTakenOverError as LifetimeTakenOverError
from .core._errors import MetaPathError as MetaPathError
from .core._errors import MetaValueError as MetaValueError
from .core._errors import OwnerClosedError as OwnerClosedError
from .core._errors import SessionExistsError as SessionExistsError
from .core._errors import StoreError as StoreError
from .core._errors import TransportBrokenError as TransportBrokenError
from .core._errors import UnknownSessionError as UnknownSessionError
from .core._json import JsonObject as JsonObject
from .core._json import JsonValue as JsonValue
from .core._json import json_copy as json_copy
from .core._jsonrpc import ErrorCode as ErrorCode
from .core._jsonrpc import JsonRpcError as JsonRpcError
from .core._patch import MetaPatch as MetaPatch
from .core._patch import apply_meta_patch as apply_meta_patch
from .core._patch import compose_meta_patches as compose_meta_patches
from .core._sentinel import OMITTED as OMITTED
from .core._sentinel import Omitted as Omitted
from .core._session_info import SessionInfo as SessionInfo
from .core._session_info import SessionInfoPatch as SessionInfoPatch
from .core._session_info import apply_session_info_patch as apply_session_info_patch

if _typing.TYPE_CHECKING:
    from .owner._asyncio import AsyncioMetaOwner as AsyncioMetaOwner
    from .owner._asyncio import open_asyncio_owner as open_asyncio_owner
    from .owner._lifetime import DomainHandle as DomainHandle
    from .owner._lifetime import SessionLifetime as SessionLifetime
    from .owner._protocol import Owner as Owner
    from .owner._statistics import OwnerStatistics as OwnerStatistics
    from .owner._threadsafe import ThreadsafeOwner as ThreadsafeOwner
    from .owner._transport import Transport as Transport
    from .owner._trio import MetaOwner as MetaOwner
    from .owner._trio import open_owner as open_owner
    from .sansio._options import OwnerOptions as OwnerOptions
    from .sansio._options import RetryPolicy as RetryPolicy
    from .sansio.queue._records import StoredLifetime as StoredLifetime
    from .sansio.queue._state import FailureIncident as FailureIncident
    from .stores._open import open_store as open_store
    from .stores._postgres import PostgresStore as PostgresStore
    from .stores._sqlite import SQLiteStore as SQLiteStore
    from .stores._store import LifetimeStore as LifetimeStore
    from .stores._store import MemoryStore as MemoryStore
    from .trio_connection._agent import Agent as Agent
    from .trio_connection._agent import BaseAgent as BaseAgent
    from .trio_connection._agent import RequestContext as RequestContext
    from .trio_connection._connection import AgentConnection as AgentConnection
    from .trio_connection._outbound import ClientRequestError as ClientRequestError
    from .trio_connection._serve import serve_agent as serve_agent
    from .trio_connection._stdio import run_stdio_agent as run_stdio_agent
    from .trio_connection._stdio import serve_stdio as serve_stdio

_LAZY: dict[str, str] = {
    "OwnerOptions": ".sansio._options",
    "RetryPolicy": ".sansio._options",
    "OwnerStatistics": ".owner._statistics",
    "open_owner": ".owner._trio",
    "MetaOwner": ".owner._trio",
    "open_asyncio_owner": ".owner._asyncio",
    "AsyncioMetaOwner": ".owner._asyncio",
    "Owner": ".owner._protocol",
    "ThreadsafeOwner": ".owner._threadsafe",
    "SessionLifetime": ".owner._lifetime",
    "DomainHandle": ".owner._lifetime",
    "FailureIncident": ".sansio.queue._state",
    "Transport": ".owner._transport",
    "LifetimeStore": ".stores._store",
    "StoredLifetime": ".sansio.queue._records",
    "MemoryStore": ".stores._store",
    "SQLiteStore": ".stores._sqlite",
    "PostgresStore": ".stores._postgres",
    "open_store": ".stores._open",
    "Agent": ".trio_connection._agent",
    "BaseAgent": ".trio_connection._agent",
    "RequestContext": ".trio_connection._agent",
    "AgentConnection": ".trio_connection._connection",
    "serve_agent": ".trio_connection._serve",
    "serve_stdio": ".trio_connection._stdio",
    "run_stdio_agent": ".trio_connection._stdio",
    "ClientRequestError": ".trio_connection._outbound",
}
"""Names imported on first use, and the module (relative to the package) that holds each."""

__all__ = [
    "OMITTED",
    "Agent",
    "AgentConnection",
    "AgentMetaError",
    "AguiConversion",
    "AsyncioMetaOwner",
    "BaseAgent",
    "ClientRequestError",
    "ConnectionClosedError",
    "DomainHandle",
    "ErrorCode",
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
    "StoreError",
    "StoredLifetime",
    "ThreadsafeOwner",
    "Transport",
    "TransportBrokenError",
    "UnknownSessionError",
    "__version__",
    "agui_metadata_to_meta_patch",
    "apply_meta_patch",
    "apply_session_info_patch",
    "compose_meta_patches",
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
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
