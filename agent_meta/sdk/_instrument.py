"""``agent-meta run``, inside the agent: the SDK's ``run_agent`` replaced as the agent imports it.

``agent-meta run -- AGENT_CMD`` starts the agent with a ``sitecustomize`` module of ours first
on its ``PYTHONPATH`` (the way ``opentelemetry-instrument`` does). It calls :func:`install`,
which waits for the agent to import ``acp`` and then puts :func:`instrumented_run_agent` in
place of ``acp.run_agent`` (and ``acp.core.run_agent``), before the agent's own modules can
bind the name. Nothing of agent_meta beyond this module is imported until the agent starts
serving.

The agent talks to its supervisor (the ``agent-meta run`` process) through a status pipe, one
JSON object per line (:func:`report`): ``owned`` once the adapter is under the connection,
``refused`` when it cannot be (an SDK release outside the range, an agent that brings its own
streams), ``unwritten`` when the client stopped reading and accepted frames were left. The
supervisor decides the exit status from them; see :mod:`agent_meta.apps._supervise`.
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

__all__ = ["ENVIRONMENT", "RunConfig", "install", "instrumented_run_agent", "report"]

ENVIRONMENT: Final = "AGENT_META_RUN"
"""The environment variable that carries :class:`RunConfig` (as JSON) into the agent."""

_SDK_MODULES: Final = ("acp", "acp.core")


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
    """A SQLite file keeping lifetimes across restarts (``--store``)."""
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
    if config.pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = config.pythonpath
    if "acp" in sys.modules:
        _instrument(sys.modules["acp"])
    else:
        sys.meta_path.insert(0, _SdkFinder())
    for name in config.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:
            report("refused", reason=f"--import {name}: {type(exc).__name__}: {exc}")
            raise


@final
class _SdkFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``acp`` is found by the other finders, its loader is wrapped
    so that the SDK is instrumented once the package has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "acp":
            return None
        sys.meta_path.remove(self)  # once: the package is imported a single time
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


def _instrument(acp: ModuleType) -> None:
    """Put :func:`instrumented_run_agent` in place of the SDK's, or report why not."""
    from ._release import UnsupportedSdkError, installed_release

    try:
        release = installed_release()
    except UnsupportedSdkError as exc:
        report("refused", reason=str(exc))
        return
    from ._run import ORIGINAL_ATTRIBUTE

    original = acp.run_agent
    setattr(instrumented_run_agent, ORIGINAL_ATTRIBUTE, original)
    for name in _SDK_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "run_agent", None) is original:
            setattr(module, "run_agent", instrumented_run_agent)  # noqa: B010
    report("instrumented", sdk=release.version, seam=release.seam)


async def instrumented_run_agent(
    agent: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``acp.run_agent``: :func:`agent_meta.sdk.run_agent` over the
    client's stdio, with the options ``agent-meta run`` was given. An agent that passes
    streams of its own is refused (they would bypass the client's stdout)."""
    from ..core._errors import TransportBrokenError
    from ..sansio._options import OwnerOptions
    from ._run import run_agent

    config = _config
    assert config is not None, "install() runs before the agent can call run_agent"
    if input_stream is not None or output_stream is not None:
        report("refused", reason="the agent passes its own streams to run_agent")
        raise RuntimeError("agent-meta run: the agent passes its own streams to run_agent")
    options = OwnerOptions(protocol_version=1, **_option_fields(config.options))
    if config.max_line_bytes is not None:
        kwargs.setdefault("stdio_buffer_limit_bytes", config.max_line_bytes)
    try:
        if config.store is None:
            report("owned")
            await run_agent(agent, options=options, stdout=config.stdout_fd, **kwargs)
            return
        from ..owner._sqlite import SQLiteStore

        async with await SQLiteStore.open(config.store) as store:
            report("owned")
            await run_agent(agent, options=options, store=store, stdout=config.stdout_fd, **kwargs)
    except TransportBrokenError as exc:
        report("unwritten", reason=str(exc))  # the supervisor exits 1 and says so


def _option_fields(options: dict[str, Any]) -> dict[str, Any]:
    fields = dict(options)
    if "failure_path" in fields:
        fields["failure_path"] = tuple(fields["failure_path"])
    return fields
