"""Pins the public surface of ``agent_meta``.

A name added to or removed from a public module's ``__all__`` must also be added to or removed
from its list below (one line), so that every change of the public API is deliberate. The
public modules are ``agent_meta``, ``agent_meta.testing``, ``agent_meta.sdk``,
``agent_meta.agents.reference_agent`` and ``agent_meta.agents.sdk_agent``; every other module is
private.
"""

from __future__ import annotations

import importlib.resources
import inspect
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

import agent_meta

PUBLIC_NAMES = [
    # core: the patch rule, JSON values, session info, AG-UI, errors
    "__version__",
    "AgentMetaError",
    "agui_metadata_to_meta_patch",
    "AguiConversion",
    "apply_meta_patch",
    "apply_session_info_patch",
    "compose_meta_patches",
    "compose_session_info_patches",
    "fold_meta_patches",
    "FrameLostError",
    "FrameNotSentError",
    "FrameTooLargeError",
    "is_rfc3339",
    "json_copy",
    "JsonObject",
    "JsonValue",
    "merge_agui_metadata",
    "LifetimeTakenOverError",
    "MetaPathError",
    "MetaPatch",
    "MetaValueError",
    "OMITTED",
    "Omitted",
    "OwnerClosedError",
    "SessionExistsError",
    "SessionInfo",
    "SessionInfoPatch",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "TransportBrokenError",
    "UnknownSessionError",
    # owner: options, handles, the trio and asyncio drivers, transports, stores
    "AsyncioMetaOwner",
    "AsyncioStreamTransport",
    "DomainHandle",
    "FailureIncident",
    "LifetimeStore",
    "MemoryStore",
    "MetaOwner",
    "open_asyncio_owner",
    "open_owner",
    "Owner",
    "OwnerOptions",
    "OwnerStatistics",
    "RetryPolicy",
    "SessionLifetime",
    "SQLiteStore",
    "PostgresStore",
    "open_store",
    "StoredLifetime",
    "StreamTransport",
    "ThreadsafeOwner",
    "Transport",
    # acp: the agent side of a connection
    "Agent",
    "AgentConnection",
    "BaseAgent",
    "ClientRequestError",
    "ConnectionClosedError",
    "JsonRpcError",
    "RequestContext",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
    "SUPPORTED_PROTOCOL_VERSIONS",
]

WIRE_NAMES = [
    "BatchEntry",
    "decode",
    "encode_frame",
    "encode_session_update",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
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
    "METHOD_NOT_FOUND",
    "negotiate_version",
    "optional_str",
    "PARSE_ERROR",
    "patch_from_update",
    "Replay",
    "replay_of",
    "REQUEST_CANCELLED",
    "RequestId",
    "require_object_list",
    "require_str",
    "RESOURCE_NOT_FOUND",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "SessionNotification",
    "SessionNotificationV1",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "update_from_patch",
    "WireModel",
]

TESTING_NAMES = [
    "ClientMirror",
    "FailingTransport",
    "FailMode",
    "GatedTransport",
    "Message",
    "MirrorError",
    "PipeRecorder",
    "RecordingTransport",
    "SlowTransport",
]

SDK_NAMES = [
    "SUPPORTED_SDK_RANGE",
    "AdapterStatistics",
    "MessageSource",
    "SdkAdapter",
    "SdkRelease",
    "UnsupportedSdkError",
    "adapter_of",
    "create_asgi_app",
    "on_connection",
    "open_stdio_adapter",
    "open_stream_adapter",
    "run_agent",
    "run_v2_agent",
    "serve_router",
]

REFERENCE_AGENT_NAMES = ["AGENT_NAME", "COMMANDS", "CommandError", "ReferenceAgent", "parse_line"]

SDK_AGENT_NAMES = ["SdkReferenceAgent", "serve_sdk_agent"]

PUBLIC_MODULES = {
    "agent_meta": PUBLIC_NAMES,
    "agent_meta.wire": WIRE_NAMES,
    "agent_meta.testing": TESTING_NAMES,
    "agent_meta.sdk": SDK_NAMES,
    "agent_meta.agents.reference_agent": REFERENCE_AGENT_NAMES,
    "agent_meta.agents.sdk_agent": SDK_AGENT_NAMES,
}
"""Every public module and its pinned names; every other module is private."""

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


@pytest.mark.parametrize("module_name", sorted(PUBLIC_MODULES))
def test_each_public_module_exports_exactly_its_pinned_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(PUBLIC_MODULES[module_name])
    assert all(hasattr(module, name) for name in module.__all__)


def test_every_other_module_is_private() -> None:
    """Below the root, only the pinned public modules and the layer packages themselves have
    names without a leading underscore; the layer packages export nothing."""
    package = ROOT / "agent_meta"
    layers = {
        "core",
        "sansio",
        "wire",
        "stores",
        "owner",
        "trio_connection",
        "agents",
        "cli",
        "demo",
        "instrument",
        "tools",
    }
    public = {name.removeprefix("agent_meta.") for name in PUBLIC_MODULES} - {"agent_meta"}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        names = [part for part in parts if part != "__init__"]
        dotted = ".".join(names)
        if not dotted or dotted in public or any(name.startswith("_") for name in names):
            continue  # the root, a pinned module, or private (itself or a package it is in)
        if parts[-1] == "__init__" and dotted in layers:
            layer = importlib.import_module(f"agent_meta.{dotted}")
            assert getattr(layer, "__all__", []) == [], dotted
            continue
        if any(dotted.startswith(f"{name}.") for name in public):
            continue
        raise AssertionError(
            f"agent_meta/{path.relative_to(package)} is neither private nor pinned"
        )


def test_the_api_reference_lists_every_public_name_once() -> None:
    """docs/api.md lists the root's names by layer; none may be missing or listed twice."""
    listed = [
        line.strip().removeprefix("- ")
        for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("        - ")
    ]
    assert sorted(listed) == sorted(set(PUBLIC_NAMES) - {"__version__"})


DEPRECATED = {
    "apply_meta_update": ("agent_meta", "apply_meta_patch"),
    "fold_meta_updates": ("agent_meta", "fold_meta_patches"),
    "compose_meta_updates": ("agent_meta", "compose_meta_patches"),
    "MetaUpdate": ("agent_meta", "MetaPatch"),
    "decode_line": ("agent_meta.wire", "decode"),
    "SessionInfoUpdate": ("agent_meta.wire", "SessionInfoUpdate"),
    "REQUEST_CANCELLED": ("agent_meta.wire", "REQUEST_CANCELLED"),
    "encode_frame": ("agent_meta.wire", "encode_frame"),
}


@pytest.mark.parametrize(("old", "new"), sorted(DEPRECATED.items()))
def test_a_renamed_or_moved_name_still_resolves_with_a_warning(
    old: str, new: tuple[str, str]
) -> None:
    module, name = new
    with pytest.warns(DeprecationWarning, match=f"use {module}.{name}"):
        found = getattr(agent_meta, old)
    assert found is getattr(importlib.import_module(module), name)
    assert old not in agent_meta.__all__


def test_every_deprecated_alias_names_something_that_exists() -> None:
    for old, (module, name) in agent_meta._DEPRECATED.items():
        target = importlib.import_module(module, "agent_meta")
        assert hasattr(target, name), (old, module, name)


def test_a_name_that_never_existed_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = agent_meta.no_such_name


@pytest.mark.parametrize("module_name", sorted(PUBLIC_MODULES))
def test_every_public_class_and_function_has_a_docstring(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [
        name
        for name in module.__all__
        if (inspect.isclass(obj := getattr(module, name)) or inspect.isroutine(obj))
        and not (obj.__doc__ or "").strip()
    ]
    assert missing == []


def test_importing_the_core_loads_no_runtime_no_pydantic_no_sqlite_and_no_psycopg() -> None:
    code = (
        "import sys, agent_meta; agent_meta.apply_meta_patch({}, {'a': 1}); "
        "print(sorted(m for m in ('trio', 'asyncio', 'pydantic', 'sqlite3', 'tenacity', "
        "'psycopg', 'psycopg_pool') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]", done.stdout
