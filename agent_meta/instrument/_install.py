"""``agent-meta run``, inside the agent: the SDK's ``run_agent`` replaced as the agent imports it.

``agent-meta run -- AGENT_CMD`` starts the agent with a ``sitecustomize`` module of ours first
on its ``PYTHONPATH`` (the way ``opentelemetry-instrument`` does). It calls :func:`install`,
which waits for the agent to import the SDK's entry points and puts ours in their place before
the agent's own modules can bind the names:

- ``acp.run_agent`` (and ``acp.core.run_agent``) as ``acp`` is imported;
- on SDK 0.6, which has no ``run_agent``, ``acp.AgentSideConnection`` (agents build it on their
  stdio themselves) as ``acp`` is imported;
- ``acp.experimental.v2.run_agent`` as ``acp.experimental.v2.agent`` is (SDK 1.0, ACP v2);
- ``AgentProtocolRouter.run`` as ``acp.experimental.negotiation`` is (SDK 1.0).

Nothing of agent_meta beyond this module is imported until the agent starts serving.

The streams an agent passes (``run_agent(agent, writer, reader)``, 0.6's connection) are owned
when they are this process's own stdio: what fd 1 and fd 0 were as the process started,
duplicates included (gptme-acp duplicates both, points fd 1 at stderr and hands the SDK the
duplicates). The adapter then reads the client through the agent's reader (already reading
stdin: a second reader would race it for the bytes) and writes the client's stdout; the agent's
writer (the watched pipe) is never written. Other streams are refused.

The agent talks to its supervisor (the ``agent-meta run`` process) through a status pipe, one
JSON object per line (:func:`report`): ``booted`` as this module installs itself,
``instrumented`` once the SDK's entry point is replaced, ``owned`` once the adapter is under the
connection, ``refused`` when it cannot be (an SDK release outside the range, an agent that
brings streams that are not its stdio), ``unwritten`` when the client stopped reading and
accepted frames were left. The supervisor decides the exit status from them; see
:mod:`agent_meta.instrument._supervise`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import stat
import sys
from typing import TYPE_CHECKING, Any, Final, final

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Sequence
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
_stdio: dict[int, tuple[int, int] | None] = {}
"""What fd 0 and fd 1 were as this process started (device and inode): the client's stdin and
the watched pipe. Taken before the agent's code runs, so that duplicates made later (and fd 1
pointed elsewhere) are still known as this process's stdio."""


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
    _stdio.update({0: _identity(0), 1: _identity(1)})
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
    if not release.runs_agent:
        _instrument_connection()
        report("instrumented", sdk=release.version, seam=release.seam)
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
    client's stdio, with the options ``agent-meta run`` was given. Streams the agent passes are
    served when they are this process's stdio (:func:`_own_stdio`), refused otherwise."""
    from ..sdk._run import run_agent

    reader = _own_stdio("run_agent", input_stream, output_stream)
    await _serve(run_agent, agent, kwargs, reader)


async def instrumented_run_v2_agent(
    agent: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``acp.experimental.v2.run_agent``:
    :func:`agent_meta.sdk.run_v2_agent`, as :func:`instrumented_run_agent`."""
    from ..sdk._run import run_v2_agent

    reader = _own_stdio("run_agent", input_stream, output_stream)
    await _serve(run_v2_agent, agent, kwargs, reader)


async def instrumented_router_run(
    router: Any, input_stream: Any = None, output_stream: Any = None, **kwargs: Any
) -> None:
    """What the agent calls as ``AgentProtocolRouter.run``: :func:`agent_meta.sdk.serve_router`,
    as :func:`instrumented_run_agent`."""
    from ..sdk._run import serve_router

    reader = _own_stdio("AgentProtocolRouter.run", input_stream, output_stream)
    await _serve(serve_router, router, kwargs, reader)


def _instrument_connection() -> None:
    """SDK 0.6: agents build ``AgentSideConnection(factory, writer, reader)`` on their stdio
    and keep the loop alive themselves (the SDK's own examples wait forever). The class is
    replaced, wherever the SDK exports it, by a subclass whose constructor, given this process's
    stdio, returns at once and serves the connection through agent_meta in a task: the adapter
    opens over the agent's reader and the client's stdout, and the SDK's constructor then builds
    this very object over the adapter's seam (so the object the agent holds is the one its
    factory was given, and the one :func:`agent_meta.sdk.adapter_of` knows)."""
    import asyncio

    from acp.agent import connection as module

    from ..sdk._run import ORIGINAL_ATTRIBUTE, run_connection

    original: Any = module.AgentSideConnection

    def __init__(  # noqa: N807  # the SDK's constructor, replaced
        self: Any, to_agent: Any, input_stream: Any, output_stream: Any, **kwargs: Any
    ) -> None:
        reader = _own_stdio("AgentSideConnection", input_stream, output_stream)
        if reader is None:  # no streams: the SDK's own TypeError
            original.__init__(self, to_agent, input_stream, output_stream, **kwargs)
            return

        def build(factory: Any, *streams: Any, **seam: Any) -> Any:
            original.__init__(self, factory, *streams, **seam)
            return self

        async def run(agent: Any, *streams: Any, **options: Any) -> None:
            await run_connection(build, agent, *streams, **options)

        task = asyncio.get_running_loop().create_task(_serve(run, to_agent, kwargs, reader))
        task.add_done_callback(_report_failure)
        self.__agent_meta_serving__ = task  # kept: the loop holds tasks weakly

    owned = type(original.__name__, (original,), {"__init__": __init__})
    owned.__module__ = original.__module__
    owned.__qualname__ = original.__qualname__
    owned.__doc__ = original.__doc__
    setattr(owned, ORIGINAL_ATTRIBUTE, original)
    for name in ("acp", "acp.core", "acp.agent", "acp.agent.connection"):
        found = sys.modules.get(name)
        if found is not None and getattr(found, "AgentSideConnection", None) is original:
            setattr(found, "AgentSideConnection", owned)  # noqa: B010


def _report_failure(task: asyncio.Task[None]) -> None:
    """A connection served in a task (SDK 0.6) that failed: nobody awaits it, so say why and
    have the agent stopped (it would wait forever without a connection)."""
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    report("refused", reason=f"agent_meta's connection failed: {type(exc).__name__}: {exc}")


def _own_stdio(entry: str, input_stream: Any, output_stream: Any) -> asyncio.StreamReader | None:
    """``None`` when the agent passes no streams (stdio is served); the agent's reader when the
    streams it passes are this process's own stdio (see the module docstring). Anything else is
    refused: reported, and raised into the agent."""
    if input_stream is None and output_stream is None:
        return None
    problem = _not_stdio(input_stream, output_stream)
    if problem is None:
        reader: asyncio.StreamReader = output_stream
        return reader
    reason = (
        f"the agent gave {entry} {problem}; agent-meta run owns a connection only on the "
        "process's own stdin and stdout (duplicates of fd 0 and 1 included). Adopt agent_meta in "
        "the agent's code instead: agent_meta.sdk.run_agent (or open_stream_adapter) serves any "
        "asyncio StreamWriter and StreamReader pair (docs/sdk.md)"
    )
    report("refused", reason=reason)
    raise RuntimeError(f"agent-meta run: {reason}")


def _not_stdio(writer: Any, reader: Any) -> str | None:
    """What is wrong with ``writer`` (the SDK's ``input_stream``) and ``reader``
    (``output_stream``) as this process's stdout and stdin, or ``None``: they are."""
    import asyncio

    if not isinstance(writer, asyncio.StreamWriter):
        return f"an input_stream that is no asyncio StreamWriter ({type(writer).__name__})"
    if not isinstance(reader, asyncio.StreamReader):
        return f"an output_stream that is no asyncio StreamReader ({type(reader).__name__})"
    written = _transport_fd(writer.transport)
    if written is None or _identity(written) != _stdio.get(1) or _stdio.get(1) is None:
        return f"an input_stream writing to {_kind(written)}, not to its stdout"
    # A StreamReader names its transport only privately; without one, what it reads is unknown.
    read = _transport_fd(getattr(reader, "_transport", None))
    if read is None or _identity(read) != _stdio.get(0) or _stdio.get(0) is None:
        return f"an output_stream reading from {_kind(read)}, not from its stdin"
    return None


def _transport_fd(transport: Any) -> int | None:
    """The file descriptor an asyncio transport reads or writes, when it says."""
    if transport is None:
        return None
    for name in ("pipe", "socket"):
        found = transport.get_extra_info(name)
        if found is not None:
            try:
                fd: int = found.fileno()
            except (AttributeError, ValueError, OSError):
                return None
            return fd
    return None


def _identity(fd: int) -> tuple[int, int] | None:
    """Which open file ``fd`` is (device and inode; duplicates share them)."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _kind(fd: int | None) -> str:
    """What ``fd`` is, for a refusal."""
    if fd is None:
        return "a stream agent_meta cannot see the file of"
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return "a closed file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISREG(mode):
        return "a file"
    return "a terminal or device"


async def _serve(
    run: Callable[..., Any],
    agent: Any,
    kwargs: dict[str, Any],
    reader: asyncio.StreamReader | None = None,
) -> None:
    """``run(agent, ...)`` over the client's stdio with ``agent-meta run``'s options; with the
    agent's ``reader`` (its own reader on stdin), over that reader and the client's stdout."""
    from ..core._errors import TransportBrokenError
    from ..sansio._options import OwnerOptions

    config = _config
    assert config is not None, "install() runs before the agent can start serving"
    options = OwnerOptions(protocol_version=1, **_option_fields(config.options))
    if config.max_line_bytes is not None:
        kwargs.setdefault("stdio_buffer_limit_bytes", config.max_line_bytes)
    async with contextlib.AsyncExitStack() as stack:
        if reader is None:
            streams: tuple[Any, ...] = ()
            kwargs["stdout"] = config.stdout_fd
        else:
            writer = await stack.enter_async_context(_client_stdout(config, options.drain_timeout))
            streams = (writer, reader)
        try:
            if config.store is not None:
                from ..stores._open import open_store

                kwargs["store"] = await stack.enter_async_context(open_store(config.store))
            report("owned")
            await run(agent, *streams, options=options, **kwargs)
        except TransportBrokenError as exc:
            report("unwritten", reason=str(exc))  # the supervisor exits 1 and says so


@contextlib.asynccontextmanager
async def _client_stdout(config: RunConfig, drain_timeout: float) -> Any:
    """A writer on the client's stdout, closed at the end once what it holds is written (within
    ``drain_timeout``: a client that stopped reading cannot hold the exit)."""
    import asyncio
    import math

    from ..owner._failures import unwritten_error
    from ..sdk._stdio import _stdout_writer

    writer = await _stdout_writer(config.stdout_fd)
    try:
        yield writer
    finally:
        writer.close()
        try:
            bound = None if math.isinf(drain_timeout) else drain_timeout
            async with asyncio.timeout(bound):
                await writer.wait_closed()
        except (TimeoutError, OSError) as exc:
            left = writer.transport.get_write_buffer_size()
            when = f"within the drain timeout of {drain_timeout} s ({left} bytes left: {exc!r})"
            report("unwritten", reason=str(unwritten_error(when)))


def _option_fields(options: dict[str, Any]) -> dict[str, Any]:
    fields = dict(options)
    if "failure_path" in fields:
        fields["failure_path"] = tuple(fields["failure_path"])
    return fields
