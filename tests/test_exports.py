"""Pins the public surface of ``agent_meta``.

A name added to or removed from ``agent_meta.__all__`` must also be added to or removed from
``PUBLIC_NAMES`` below (one line), so that every change of the public API is deliberate.
"""

from __future__ import annotations

import importlib.resources
import tomllib
import types
from pathlib import Path

import agent_meta

PUBLIC_NAMES = [
    # _connection
    "Agent",
    "AgentConnection",
    "BaseAgent",
    "RequestContext",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
    "SUPPORTED_PROTOCOL_VERSIONS",
    # _jsonrpc
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "JsonRpcError",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    # _agui
    "agui_metadata_to_meta_patch",
    "AguiConversion",
    "merge_agui_metadata",
    # _errors
    "AgentMetaError",
    "FrameTooLargeError",
    "MetaPathError",
    "MetaValueError",
    "OwnerClosedError",
    "SessionExistsError",
    "TransportBrokenError",
    "UnknownSessionError",
    # _json
    "json_copy",
    "JsonObject",
    "JsonValue",
    # _lifetime
    "DomainHandle",
    "SessionLifetime",
    # _owner
    "default_retry",
    "MetaOwner",
    "open_owner",
    "OwnerStatistics",
    # _patch
    "apply_meta_update",
    "compose_meta_updates",
    "fold_meta_updates",
    "MetaPatch",
    "MetaUpdate",
    # _sentinel
    "OMITTED",
    "Omitted",
    # _session_info
    "apply_session_info_patch",
    "compose_session_info_patches",
    "SessionInfo",
    "SessionInfoPatch",
    # _state
    "FailureIncident",
    # _store, _store_sqlite
    "LifetimeStore",
    "MemoryStore",
    "SQLiteStore",
    "StoreCorruptError",
    "StoredLifetime",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    # _timestamps
    "is_rfc3339",
    # _transport
    "FrameLostError",
    "FrameNotSentError",
    "StreamTransport",
    "Transport",
    # _version
    "__version__",
    # _wire
    "decode_message",
    "encode_frame",
    "encode_session_update",
    "InvalidMessageError",
    "JsonRpcErrorObject",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "message_from_json",
    "MessageDecodeError",
    "MessageParseError",
    "parse_json_line",
    "patch_from_update",
    "RequestId",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionNotification",
    "SessionNotificationV1",
    "update_from_patch",
    "WireModel",
]

ROOT = Path(__file__).resolve().parent.parent


def test_all_is_exactly_the_pinned_list() -> None:
    exported, pinned = set(agent_meta.__all__), set(PUBLIC_NAMES)
    assert (sorted(exported - pinned), sorted(pinned - exported)) == ([], []), (
        "(exported but not pinned, pinned but not exported): update PUBLIC_NAMES or __all__"
    )
    assert len(PUBLIC_NAMES) == len(pinned), "PUBLIC_NAMES lists a name twice"


def test_all_has_no_duplicates() -> None:
    assert len(set(agent_meta.__all__)) == len(agent_meta.__all__)


def test_every_exported_name_exists() -> None:
    missing = [name for name in agent_meta.__all__ if not hasattr(agent_meta, name)]
    assert missing == []


def test_no_public_name_is_left_out_of_all() -> None:
    unlisted = [
        name
        for name, value in vars(agent_meta).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # subpackages such as agent_meta.testing
        and name not in agent_meta.__all__
    ]
    assert unlisted == []


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from agent_meta import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == sorted(agent_meta.__all__)


def test_version_matches_the_project_metadata() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert agent_meta.__version__ == pyproject["project"]["version"]


def test_py_typed_marker_is_shipped() -> None:
    marker = importlib.resources.files("agent_meta").joinpath("py.typed")
    assert marker.is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["agent_meta"]
