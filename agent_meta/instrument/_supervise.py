"""``agent-meta run -- AGENT_CMD``: an unchanged official-SDK agent with agent_meta under it.

The convention of ``opentelemetry-instrument`` and ``ddtrace-run``: this process starts the
agent with agent_meta's ``sitecustomize`` first on its ``PYTHONPATH``, which replaces the SDK's
``run_agent`` as the agent imports it (:mod:`agent_meta.instrument._install`), and then only
watches. The agent reads the client's stdin itself; it writes the client's stdout through the
adapter, on a descriptor handed to it for that. Its own fd 1 is a pipe to this process, so
nothing reaches the client that the owner did not write:

- a JSON-RPC message on that pipe before the agent reported ``owned`` means the agent answers
  the client without agent_meta (not a Python SDK agent, a release outside the range, a
  connection not started through ``run_agent``): the agent is stopped and this process exits
  2, saying why. Nothing it wrote there reached the client;
- any other bytes there (a stray ``print``) go to stderr, where they cannot break the stream;
- ``refused`` from the agent stops it the same way; an agent that exits without ever being
  owned exits non-zero too (its own status, or 2);
- ``unwritten`` (the client stopped reading and accepted frames were left) makes an exit
  status of 0 a 1, as with ``agent-meta agent``.

SIGTERM and SIGHUP are passed on to the agent (SIGINT too, unless stdin is a terminal, whose
Ctrl-C reaches the agent directly); this process exits with the agent's status.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._agent_command import add_agent_command, exit_status, not_a_pipe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["BOOT_DIRECTORY", "add_parser", "main"]

BOOT_DIRECTORY: Final = Path(__file__).resolve().parent / "_boot"
"""The directory holding the ``sitecustomize`` put first on the agent's ``PYTHONPATH``."""

ENVIRONMENT: Final = "AGENT_META_RUN"  # agent_meta.instrument._install.ENVIRONMENT (not imported:
# this process stays light, its start-up is the agent's)

DRAIN_TIMEOUT: Final = 10.0
"""``--drain-timeout``'s default, as ``agent-meta agent``'s: a stalled client cannot hold the
exit, and a running request gets 10 s to be answered after the client's input ends."""

STOP_GRACE: Final = 5.0
"""Seconds a refused agent gets to end after SIGTERM before it is killed."""

_PREFIX: Final = "agent-meta run"


def add_parser(commands: Any) -> None:
    """Register ``agent-meta run`` (for ``--help``; :func:`main` parses its own arguments)."""
    parser = commands.add_parser(
        "run",
        usage=_USAGE,
        help="run an unchanged official-SDK agent with agent_meta under its connection",
        description=_description(),
    )
    _add_arguments(parser)


_USAGE = "%(prog)s [options] -- AGENT_CMD [ARGS...]"


def _description() -> str:
    return (
        "Start AGENT_CMD (a Python ACP agent built on the official SDK, agent-client-protocol "
        "0.6 to 1.0) with agent_meta's owner under its connection, without editing it: the "
        "SDK's run_agent is replaced as the agent imports it. agent_meta must be installed "
        "in the agent's environment. Options go before the '--'. Exits 2, saying why, when "
        "the agent cannot be owned."
    )


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help=(
            "keep session lifetimes across restarts of the agent (and share them with other "
            "agents on the same store): a SQLite file (a path or sqlite:///PATH) or a "
            "PostgreSQL database (postgresql://..., needs the 'postgres' extra)"
        ),
    )
    parser.add_argument(
        "--v1-meta-mode",
        choices=("merged", "passthrough"),
        default="merged",
        help="v1 frames: the complete merged _meta (default) or patches as published",
    )
    parser.add_argument(
        "--no-coalesce",
        action="store_true",
        help="send every update as its own frame (producers wait for queue room)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE into the agent (an extension using agent_meta.sdk.on_connection); "
        "repeatable",
    )
    parser.add_argument(
        "--drain-timeout",
        type=_seconds,
        default=DRAIN_TIMEOUT,
        metavar="SECONDS",
        help="when the client's input ends, how long the agent's running requests may take to "
        "be answered before the SDK cancels them, and at exit how long queued frames may take "
        f"to be written (default: {DRAIN_TIMEOUT:g}); below a client's grace before SIGTERM "
        "(the official SDK client's is 2 s), the agent exits by itself",
    )
    parser.add_argument(
        "--max-line",
        type=int,
        metavar="BYTES",
        help="longest inbound line accepted (default: the SDK's own limit)",
    )
    add_agent_command(parser)


def main(argv: Sequence[str]) -> int:
    """``agent-meta run ARGS``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="agent-meta run", usage=_USAGE, description=_description()
    )
    _add_arguments(parser)
    args = parser.parse_args(list(argv))
    options: dict[str, Any] = {
        "v1_meta_mode": args.v1_meta_mode,
        "coalesce": not args.no_coalesce,
        "drain_timeout": args.drain_timeout,
    }
    store = None if args.store is None else _absolute_store_url(parser, args.store)
    if (problem := not_a_pipe()) is not None:  # the agent would fail inside asyncio
        _say(
            f"{problem}; the official SDK's asyncio pipe transports take pipes, sockets and "
            "terminals only (run the agent under a client)"
        )
        return 2
    supervisor = Supervisor(
        args.agent, store=store, options=options, max_line=args.max_line, imports=args.imports
    )
    return supervisor.run()


def _seconds(text: str) -> float:
    """``--drain-timeout``: a number of seconds, ``>= 0`` (``inf``: no bound)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"not a number of seconds >= 0: {text!r}")
    return value


def _absolute_store_url(parser: argparse.ArgumentParser, url: str) -> str:
    """``--store URL`` as the agent process needs it (a relative path made absolute); a URL
    that names no store is a usage error, said without its password."""
    from ..core._errors import StoreError
    from ..stores._urls import absolute_store_url

    try:
        return absolute_store_url(url)
    except StoreError as exc:
        parser.error(f"--store: {exc}")


@dataclasses.dataclass
class _Watch:
    """What the supervisor has learnt from the agent so far."""

    booted: bool = False
    """agent_meta's ``sitecustomize`` ran in the agent (``booted``)."""
    sdk: str | None = None
    """The SDK release whose ``run_agent`` was replaced (``instrumented``)."""
    owned: bool = False
    refused: str | None = None
    unwritten: str | None = None
    held: bytearray = dataclasses.field(default_factory=bytearray)
    """What the agent wrote to its fd 1 before it was owned (shown, not forwarded)."""
    stray: int = 0
    """Bytes the agent wrote to its fd 1 after it was owned (moved to stderr)."""

    def unowned(self) -> str:
        """Why the agent was never owned, as far as its status events tell."""
        if not self.booted:
            return (
                "agent_meta's sitecustomize never ran in the agent (python -I and -E ignore "
                "PYTHONPATH, -S skips sitecustomize, a program that is not Python never runs "
                "it): start the agent's Python without those flags"
            )
        if self.sdk is None:
            return (
                "it never imported the official ACP SDK (acp): agent-meta run serves Python "
                "agents on agent-client-protocol 0.6 to 1.0"
            )
        return (
            f"it imported the official ACP SDK ({self.sdk}) but did not start its connection "
            "through acp.run_agent (or the v2 run_agent, or a protocol router's run; on SDK "
            "0.6, AgentSideConnection on its stdio)"
        )


class Supervisor:
    """Runs one agent under ``agent-meta run`` and decides the exit status."""

    def __init__(
        self,
        command: list[str],
        *,
        store: str | None,
        options: dict[str, Any],
        max_line: int | None,
        imports: list[str] | None = None,
    ) -> None:
        self._command = command
        self._imports = imports or []
        self._store = store
        self._options = options
        self._max_line = max_line
        self._watch = _Watch()
        self._status_buffer = b""

    def run(self) -> int:
        status_read, status_write = os.pipe()
        guard_read, guard_write = os.pipe()
        client_stdout = os.dup(1)
        environment = self._environment(client_stdout, status_write)
        try:
            process = subprocess.Popen(
                self._command,
                stdout=guard_write,
                pass_fds=(client_stdout, status_write),
                env=environment,
                preexec_fn=_dying_with(os.getpid()),  # safe: no thread runs yet
            )
        except OSError as exc:
            _say(f"cannot start {self._command[0]!r}: {exc.strerror or exc}")
            return 127 if isinstance(exc, FileNotFoundError) else 126
        finally:
            for fd in (status_write, guard_write, client_stdout):
                os.close(fd)
        interactive = os.isatty(0)
        _release_stdio()  # the client's EOF now depends on the agent alone
        with _passing_signals(process, interactive=interactive):
            self._watch_until_exit(process, status_read, guard_read)
        return self._status(process.returncode)

    def _environment(self, client_stdout: int, status_fd: int) -> dict[str, str]:
        environment = dict(os.environ)
        pythonpath = environment.get("PYTHONPATH")
        config = {
            "stdout_fd": client_stdout,
            "status_fd": status_fd,
            "pythonpath": pythonpath,
            "store": self._store,
            "options": self._options,
            "max_line_bytes": self._max_line,
            "imports": self._imports,
        }
        environment[ENVIRONMENT] = json.dumps(config)
        parts = [str(BOOT_DIRECTORY)] + ([pythonpath] if pythonpath else [])
        environment["PYTHONPATH"] = os.pathsep.join(parts)
        return environment

    # -- watching ----------------------------------------------------------------------------
    def _watch_until_exit(self, process: subprocess.Popen[bytes], status: int, guard: int) -> None:
        exited_read, exited_write = os.pipe()
        waiter = threading.Thread(target=_wait_then_tell, args=(process, exited_write), daemon=True)
        waiter.start()
        selector = selectors.DefaultSelector()
        for fd in (status, guard, exited_read):
            selector.register(fd, selectors.EVENT_READ)
        open_fds = {status, guard}
        try:
            while True:
                ready = {key.fd for key, _ in selector.select()}
                if status in ready:
                    self._read_status(status, selector, open_fds)
                if guard in ready:
                    self._read_status(status, selector, open_fds)  # what came first, first
                    self._read_guard(guard, selector, open_fds)
                if self._watch.refused is not None:
                    _stop(process)
                    break
                if exited_read in ready:
                    self._read_status(status, selector, open_fds)
                    self._drain(guard, selector, open_fds)
                    break
        finally:
            selector.close()
            waiter.join()
            for fd in (status, guard, exited_read, exited_write):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _read_status(self, fd: int, selector: selectors.BaseSelector, open_fds: set[int]) -> bool:
        """Take what the status pipe holds now (without waiting); False once it has ended."""
        if fd not in open_fds:
            return False
        chunk = _read_now(fd)
        if chunk is None:
            return True
        if not chunk:
            selector.unregister(fd)
            open_fds.discard(fd)
            return False
        self._status_buffer += chunk
        while b"\n" in self._status_buffer:
            line, self._status_buffer = self._status_buffer.split(b"\n", 1)
            self._on_status(json.loads(line))
        return True

    def _on_status(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        watch = self._watch
        if event == "booted":
            watch.booted = True
        elif event == "instrumented":
            watch.sdk = f"agent-client-protocol {message.get('sdk')}"
        elif event == "owned":
            watch.owned = True
            if watch.held:
                _say(
                    "the agent wrote to stdout before agent_meta owned its connection "
                    "(moved here, it never reached the client):"
                )
                sys.stderr.buffer.write(bytes(watch.held))
                sys.stderr.flush()
                watch.held.clear()
        elif event == "refused" and watch.refused is None:
            watch.refused = str(message.get("reason"))
            if isinstance(extra := message.get("needs_extra"), str):
                from .._install_hint import install_hint

                watch.refused += (
                    f"; install agent_meta with its '{extra}' extra into the agent's "
                    f"environment ({install_hint(extra)}, with that environment's pip)"
                )
        elif event == "unwritten":
            watch.unwritten = str(message.get("reason"))

    def _read_guard(self, fd: int, selector: selectors.BaseSelector, open_fds: set[int]) -> None:
        chunk = _read_now(fd)
        if chunk is None:
            return
        if not chunk:
            selector.unregister(fd)
            open_fds.discard(fd)
            return
        watch = self._watch
        if watch.owned:
            if not watch.stray:
                _say("the agent wrote to its stdout outside the ACP connection (moved here):")
            watch.stray += len(chunk)
            sys.stderr.buffer.write(chunk)
            sys.stderr.flush()
            return
        watch.held += chunk
        if _holds_a_message(watch.held):
            watch.refused = (
                "the agent answered the client without agent_meta under its connection (nothing "
                f"it wrote reached the client): {watch.unowned()}"
            )

    def _drain(self, guard: int, selector: selectors.BaseSelector, open_fds: set[int]) -> None:
        """The agent has exited: take what its fd 1 still holds, without waiting for a
        subprocess of its that may keep the pipe open."""
        while guard in open_fds:
            before = len(self._watch.held) + self._watch.stray
            self._read_guard(guard, selector, open_fds)
            if len(self._watch.held) + self._watch.stray == before:
                break

    # -- the verdict -------------------------------------------------------------------------
    def _status(self, returncode: int) -> int:
        watch = self._watch
        if watch.refused is not None:
            _say(f"{watch.refused}; stopped it")
            return 2
        status = exit_status(returncode)
        if not watch.owned:
            _say(
                f"the agent exited (status {status}) and agent_meta never owned its connection: "
                f"{watch.unowned()}"
            )
            if watch.held:
                _say("what it wrote to stdout (it never reached the client):")
                sys.stderr.buffer.write(bytes(watch.held))
                sys.stderr.flush()
            return status or 2
        if watch.unwritten is not None:
            _say(f"stopped: {watch.unwritten}")
            return status or 1
        return status


def _say(text: str) -> None:
    print(f"{_PREFIX}: {text}", file=sys.stderr, flush=True)


def _read_now(fd: int) -> bytes | None:
    """What ``fd`` holds now (``b""`` at its end), or ``None`` when it holds nothing yet."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None


def _holds_a_message(data: bytearray) -> bool:
    """Whether a complete line of ``data`` is a JSON-RPC message."""
    for line in bytes(data).split(b"\n")[:-1]:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "jsonrpc" in message:
            return True
    return False


def _wait_then_tell(process: subprocess.Popen[bytes], exited: int) -> None:
    process.wait()
    os.write(exited, b"x")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End a refused agent: SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _release_stdio() -> None:
    """Point this process's stdin and stdout at /dev/null: only the agent holds the client's
    pipes now, so the client sees the agent's end of output as the end."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1):
            os.dup2(null, fd)
    finally:
        os.close(null)


@contextlib.contextmanager
def _passing_signals(process: subprocess.Popen[bytes], *, interactive: bool) -> Iterator[None]:
    """Pass SIGTERM, SIGHUP and SIGINT on to the agent. Run from a terminal (``interactive``),
    Ctrl-C reaches the agent directly, so SIGINT is ignored here instead."""
    previous = {
        number: signal.getsignal(number)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    }

    def pass_on(number: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(number)

    for number in previous:
        interrupt_here = number == signal.SIGINT and interactive
        signal.signal(number, signal.SIG_IGN if interrupt_here else pass_on)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


_PR_SET_PDEATHSIG: Final = 1


def _dying_with(supervisor: int) -> Callable[[], None] | None:
    """What the agent's process runs before ``exec`` (Linux): the kernel sends it SIGKILL when
    this process dies. A client that gives up kills only the process it started, this one,
    with SIGKILL, which cannot be passed on; the agent would live on holding the client's
    stdout, and the client would wait for its EOF forever. Elsewhere ``None``: nothing."""
    if sys.platform != "linux":
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def die_with_supervisor() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:  # it died before the signal was set
            os._exit(1)

    return die_with_supervisor
