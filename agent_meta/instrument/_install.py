"""``agent-meta run``, inside the agent: the SDK's ``run_agent`` replaced as the agent imports it.

``agent-meta run -- AGENT_CMD`` starts the agent with a ``sitecustomize`` module of ours first
on its ``PYTHONPATH`` (the way ``opentelemetry-instrument`` does). It calls :func:`install`,
which waits for the agent to import the SDK's entry points and puts ours in their place before
the agent's own modules can bind the names:

- ``acp.run_agent`` (and ``acp.core.run_agent``) as ``acp`` is imported;
- ``acp.experimental.v2.run_agent`` as ``acp.experimental.v2.agent`` is (SDK 1.0, ACP v2);
- ``AgentProtocolRouter.run`` as ``acp.experimental.negotiation`` is (SDK 1.0).

Nothing of agent_meta beyond this module is imported until the agent starts serving.

The agent talks to its supervisor (the ``agent-meta run`` process) through a status pipe, one
JSON object per line (:func:`report`): ``booted`` as this module installs itself,
``instrumented`` once the SDK's ``run_agent`` is replaced, ``owned`` once the adapter is under
the connection,
``refused`` when it cannot be (an SDK release outside the range, an agent that brings its own
streams), ``unwritten`` when the client stopped reading and accepted frames were left. The
supervisor decides the exit status from them; see :mod:`agent_meta.instrument._supervise`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Final, final

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

__all__ = [
    "ENVIRONMENT",
    "RunConfig",
    "install",
    "instrumented_router_run",
    "instrumented_run_agent",
    "instrumented_run_v2_agent",
    "report",
]

ENVIRONMENT: Final = "AGENT_META_RUN"
"""The environment variable that carries :class:`RunConfig` (as JSON) into the agent."""

_SDK_MODULES: Final = ("acp", "acp.core")
_V2_MODULE: Final = "acp.experimental.v2.agent"
_ROUTER_MODULE: Final = "acp.experimental.negotiation"
_WATCHED: Final = ("acp", _V2_MODULE, _ROUTER_MODULE)


@final
@dataclasses.dataclass(frozen=True, slots=True)
class RunConfig:
    """What ``agent-meta run`` hands the agent's process."""

    stdout_fd: int
    """The client's stdout: the adapter writes here (the agent's own fd 1 is watched)."""
    status_fd: int
    """Where :func:`report` writes."""
    pythonpath: str | None
    """``PYTHONPATH`` as it was before ``agent-meta run`` put its ``sitecustomize`` first
    (restored at once, so that the agent's own Python subprocesses are left alone)."""
    store: str | None = None
    """The store keeping lifetimes across restarts (``--store``: a SQLite path, ``sqlite:///``
    or ``postgresql://`` URL)."""
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """``OwnerOptions`` fields (``failure_path``, ``v1_meta_mode``, ``coalesce``,
    ``drain_timeout``)."""
    max_line_bytes: int | None = None
    imports: list[str] = dataclasses.field(default_factory=list)
    """Modules imported into the agent once it is instrumented (``--import``): extensions that
    reach each connection's adapter through :func:`agent_meta.sdk.on_connection`."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        fields = json.loads(text)
        return cls(**fields)


_config: RunConfig | None = None


def report(event: str, **details: object) -> None:
    """Tell the supervisor ``event`` (one JSON line on the status pipe). Does nothing outside
    ``agent-meta run``; a supervisor that is gone is ignored."""
    if _config is None:
        return
    line = json.dumps({"event": event, **details}) + "\n"
    with contextlib.suppress(OSError):  # the supervisor is gone: nobody to tell
        os.write(_config.status_fd, line.encode())


def install(config: RunConfig) -> None:
    """Instrument this process: replace the SDK's ``run_agent`` as soon as ``acp`` is imported
    (at once if it already is). Restores ``PYTHONPATH`` and keeps the two descriptors from
    the agent's own subprocesses."""
    global _config
    _config = config
    for fd in (config.stdout_fd, config.status_fd):
        os.set_inheritable(fd, False)
    report("booted")  # the supervisor can tell an agent that never ran this (python -I)
    if config.pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = config.pythonpath
    waiting = []
    for name in _WATCHED:
        module = sys.modules.get(name)
        if module is None:
            waiting.append(name)
        else:
            _instrument(module)
    if waiting:
        sys.meta_path.insert(0, _SdkFinder(waiting))
    for name in config.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:
            report("refused", reason=f"--import {name}: {type(exc).__name__}: {exc}")
            raise


@final
class _SdkFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when a module with an SDK entry point is found by the other
    finders, its loader is wrapped so that the entry point is replaced once the module has
    run."""

    def __init__(self, waiting: list[str]) -> None:
        self._waiting = waiting

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._waiting:
            return None
        self._waiting.remove(fullname)  # once: a module is imported a single time
        if not self._waiting:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _InstrumentingLoader(spec.loader)
        return spec


@final
class _InstrumentingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _instrument(module)


def _instrument(module: ModuleType) -> None:
    """Put our entry point in place of the one ``module`` defines, or report why not."""
    from ..sdk._release import UnsupportedSdkError, installed_release
    from ..sdk._run import ORIGINAL_ATTRIBUTE

    if module.__name__ == _V2_MODULE:
        setattr(instrumented_run_v2_agent, ORIGINAL_ATTRIBUTE, module.run_agent)
        module.run_agent = instrumented_run_v2_agent  # type: ignore[attr-defined]
        return
    if module.__name__ == _ROUTER_MODULE:
        router = module.AgentProtocolRouter
        setattr(instrumented_router_run, ORIGINAL_ATTRIBUTE, router.run)
        router.run = instrumented_router_run
        return
    try:
        release = installed_release()
    except UnsupportedSdkError as exc:
        report("refused", reason=str(exc))
        return
    original = module.run_agent
    setattr(instrumented_run_agent, ORIGINAL_ATTRIBUTE, original)
    for name in _SDK_MODULES:
        found = sys.modules.get(name)
        if found is not None and getattr(found, "run_agent", None) is original:
            setattr(found, "run_agent", instrumented_run_agent)  # noqa: B010
    report("instrumented", sdk=release.version, seam=release.seam)


async def instrumented_run_agent(
    agent: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``acp.run_agent``: :func:`agent_meta.sdk.run_agent` over the
    client's stdio, with the options ``agent-meta run`` was given. An agent that passes
    streams of its own is refused (they would bypass the client's stdout)."""
    from ..sdk._run import run_agent

    _refuse_streams("run_agent", input_stream, output_stream)
    await _serve(run_agent, agent, kwargs)


async def instrumented_run_v2_agent(
    agent: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``acp.experimental.v2.run_agent``:
    :func:`agent_meta.sdk.run_v2_agent`, as :func:`instrumented_run_agent`."""
    from ..sdk._run import run_v2_agent

    _refuse_streams("run_agent", input_stream, output_stream)
    await _serve(run_v2_agent, agent, kwargs)


async def instrumented_router_run(
    router: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``AgentProtocolRouter.run``: :func:`agent_meta.sdk.serve_router`,
    as :func:`instrumented_run_agent`."""
    from ..sdk._run import serve_router

    _refuse_streams("AgentProtocolRouter.run", input_stream, output_stream)
    await _serve(serve_router, router, kwargs)


def _refuse_streams(entry: str, input_stream: Any, output_stream: Any) -> None:
    if input_stream is not None or output_stream is not None:
        report("refused", reason=f"the agent passes its own streams to {entry}")
        raise RuntimeError(f"agent-meta run: the agent passes its own streams to {entry}")


async def _serve(run: Any, agent: Any, kwargs: dict[str, Any]) -> None:
    """``run(agent, ...)`` over the client's stdio with ``agent-meta run``'s options."""
    from ..core._errors import TransportBrokenError
    from ..sansio._options import OwnerOptions

    config = _config
    assert config is not None, "install() runs before the agent can start serving"
    options = OwnerOptions(protocol_version=1, **_option_fields(config.options))
    if config.max_line_bytes is not None:
        kwargs.setdefault("stdio_buffer_limit_bytes", config.max_line_bytes)
    try:
        if config.store is None:
            report("owned")
            await run(agent, options=options, stdout=config.stdout_fd, **kwargs)
            return
        from ..stores._open import open_store

        async with open_store(config.store) as store:
            report("owned")
            await run(agent, options=options, store=store, stdout=config.stdout_fd, **kwargs)
    except TransportBrokenError as exc:
        report("unwritten", reason=str(exc))  # the supervisor exits 1 and says so


def _option_fields(options: dict[str, Any]) -> dict[str, Any]:
    fields = dict(options)
    if "failure_path" in fields:
        fields["failure_path"] = tuple(fields["failure_path"])
    return fields
