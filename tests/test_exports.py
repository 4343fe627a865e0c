"""Pins the public surface of ``agent_meta``.

A name added to or removed from a public module's ``__all__`` must also be added to or removed
from its list below (one line), so that every change of the public API is deliberate. The
public modules are ``agent_meta``, ``agent_meta.wire``, ``agent_meta.testing`` and
``agent_meta.sdk``; every other module is
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
    "__version__",
    "Agent",
    "AgentConnection",
    "AgentMetaError",
    "agui_metadata_to_meta_patch",
    "AguiConversion",
    "apply_meta_patch",
    "apply_session_info_patch",
    "AsyncioMetaOwner",
    "BaseAgent",
    "ClientRequestError",
    "compose_meta_patches",
    "ConnectionClosedError",
    "DomainHandle",
    "ErrorCode",
    "FailureIncident",
    "FrameLostError",
    "FrameNotSentError",
    "FrameTooLargeError",
    "json_copy",
    "JsonObject",
    "JsonRpcError",
    "JsonValue",
    "LifetimeStore",
    "LifetimeTakenOverError",
    "MemoryStore",
    "merge_agui_metadata",
    "MetaOwner",
    "MetaPatch",
    "MetaPathError",
    "MetaValueError",
    "OMITTED",
    "Omitted",
    "open_asyncio_owner",
    "open_owner",
    "open_store",
    "Owner",
    "OwnerClosedError",
    "OwnerOptions",
    "OwnerStatistics",
    "PostgresStore",
    "RequestContext",
    "RetryPolicy",
    "run_stdio_agent",
    "serve_agent",
    "serve_stdio",
    "SessionExistsError",
    "SessionInfo",
    "SessionInfoPatch",
    "SessionLifetime",
    "SQLiteStore",
    "StoredLifetime",
    "StoreError",
    "ThreadsafeOwner",
    "Transport",
    "TransportBrokenError",
    "UnknownSessionError",
]

WIRE_NAMES = [
    "decode",
    "encode_frame",
    "JsonRpcErrorResponse",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "MessageDecodeError",
    "patch_from_update",
    "Replay",
    "replay_of",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
]

TESTING_NAMES = [
    "ClientMirror",
    "FailingTransport",
    "FailMode",
    "GatedTransport",
    "MirrorError",
    "PipeRecorder",
    "RecordingTransport",
    "SlowTransport",
]

SDK_NAMES = [
    "adapter_of",
    "AdapterStatistics",
    "create_asgi_app",
    "on_connection",
    "open_stdio_adapter",
    "open_stream_adapter",
    "run_agent",
    "run_v2_agent",
    "SdkAdapter",
    "serve_router",
    "SUPPORTED_SDK_RANGE",
    "UnsupportedSdkError",
]

PUBLIC_MODULES = {
    "agent_meta": PUBLIC_NAMES,
    "agent_meta.wire": WIRE_NAMES,
    "agent_meta.testing": TESTING_NAMES,
    "agent_meta.sdk": SDK_NAMES,
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
        "sansio.inbound",
        "sansio.queue",
        "wire",
        "stores",
        "owner",
        "trio_connection",
        "agents",
        "agents.reference_agent",
        "agents.sdk_agent",
        "cli",
        "demo",
        "instrument",
        "own",
        "attach",
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
    """docs/api.md gives every public name of every public module a place, once."""
    listed = [
        line.strip().removeprefix("- ")
        for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("        - ")
    ]
    public = [name for names in PUBLIC_MODULES.values() for name in names]
    assert sorted(listed) == sorted(set(public) - {"__version__"})


def test_the_public_surface_stays_small() -> None:
    """At most 90 public names in all namespaces together (issue 25): a name added here is one
    a user must learn, so one that only the products need stays private."""
    assert sum(len(names) for names in PUBLIC_MODULES.values()) <= 90


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
