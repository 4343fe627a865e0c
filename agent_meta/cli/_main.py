"""The ``agent-meta`` command line (also ``python -m agent_meta``).

The ways in come first, as in the README's table: ``own`` and ``run`` (in front of, or under,
an agent you did not write), then ``proxy``, ``check`` and ``timeline`` (watch and check any
agent's metadata). ``agent-meta agent`` runs the reference agent on stdio, for any ACP client to
launch (on trio, or with ``--runtime sdk`` on the official ACP Python SDK); ``agent-meta demo``
runs the demo (which needs the ``demo`` extra). stdout carries only ACP messages in ``agent``
mode; diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import logging
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .._version import __version__
from ..core._errors import AgentMetaError
from ..sansio._lines import DEFAULT_MAX_LINE_BYTES
from ._args import Given, check_combination

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from types import ModuleType

    from ..sansio._options import OwnerOptions
    from ..sansio.queue._records import StoredLifetime
    from ..stores._store import LifetimeStore

__all__ = ["build_parser", "main"]

_PROTOCOLS = {"auto": (1, 2), "1": (1,), "2": (2,)}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``agent-meta`` (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="agent-meta",
        description=(
            "Session-info _meta ownership for ACP agents. Put it in front of any stdio ACP "
            "agent (own -- AGENT_CMD) or under an unchanged Python agent on the official SDK "
            "(run -- AGENT_CMD); watch an agent's metadata (proxy -- AGENT_CMD, then "
            "timeline) or check it against the rules (check -- AGENT_CMD); or run the "
            "reference agent on stdio (agent) and the demo that drives it with real ACP "
            "clients (demo). 'agent-meta COMMAND --help' tells more."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from ..instrument import _supervise
    from ..own import _command as _own
    from ..tools import _check, _proxy, _timeline

    for app in (_own, _supervise, _proxy, _check, _timeline):  # the README's order
        app.add_parser(commands)
    _add_agent_parser(commands)
    commands.add_parser(
        "demo",
        help="run the demo (needs the 'demo' extra)",
        description="Drive the reference agent with the official ACP Python SDK and show the "
        "session-info frames. Every argument after 'demo' is passed to the demo.",
    ).add_argument("args", nargs=argparse.REMAINDER, help="arguments for the demo")
    return parser


def _add_agent_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``agent-meta agent``; its own usage errors name it (``args.agent_parser``)."""
    agent = commands.add_parser(
        "agent",
        help="run the reference ACP agent on stdin/stdout",
        description=(
            "Run the reference ACP agent on stdin/stdout (NDJSON JSON-RPC). Prompt lines are "
            "commands: /meta set KEY JSON, /meta rm KEY, /meta patch JSON_OBJECT, /meta clear, "
            "/title [TEXT], /domain set KEY PATH JSON, /domain rm KEY PATH, "
            "/fail ID REVISION [TITLE], /resolve ID REVISION, /burst N KEY, /ask TEXT, "
            "/trace TRACEPARENT KEY JSON; other lines are echoed. Logs go to stderr."
        ),
    )
    agent.add_argument(
        "--runtime",
        choices=("trio", "sdk"),
        default="trio",
        help=(
            "trio: agent_meta's own connection (default); sdk: the same agent on the official "
            "ACP Python SDK with agent_meta's adapter (needs the 'sdk' extra; ACP v2 needs "
            "agent-client-protocol 1.0)"
        ),
    )
    agent.add_argument(
        "--protocol",
        choices=sorted(_PROTOCOLS),
        default="auto",
        help=(
            "ACP version(s) to accept at initialize: auto negotiates 1 or 2 (default: auto; "
            "with --runtime sdk before agent-client-protocol 1.0, 1 only)"
        ),
    )
    agent.add_argument(
        "--failure-path",
        default="agent-meta.failure",
        metavar="A.B",
        help="dotted place of the failure record in _meta (default: agent-meta.failure)",
    )
    agent.add_argument(
        "--max-line",
        action=Given,
        type=_positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="BYTES",
        help=f"longest inbound message line accepted (default: {DEFAULT_MAX_LINE_BYTES})",
    )
    agent.add_argument(
        "--v1-meta-mode",
        choices=("merged", "passthrough"),
        default="merged",
        help="v1 frames: the complete merged _meta (default) or patches as published",
    )
    agent.add_argument(
        "--no-coalesce",
        action="store_true",
        help="send every update as its own frame (producers wait for queue room)",
    )
    agent.add_argument(
        "--store",
        metavar="URL",
        help=(
            "keep session lifetimes and conversation history in this store, so a restarted "
            "agent (or another one on the same store) restores them on session/resume: a "
            "SQLite file (a path or sqlite:///PATH) or a PostgreSQL database "
            "(postgresql://USER@HOST/DB, the password in $PGPASSWORD or ~/.pgpass rather than "
            "the URL; needs the 'postgres' extra)"
        ),
    )
    agent.add_argument(
        "--listen",
        metavar="[HOST:]PORT",
        help=(
            "with --runtime sdk: serve remote clients over WebSocket (ws://HOST:PORT/acp) and "
            "streamable HTTP instead of stdio; HOST defaults to 127.0.0.1, PORT 0 takes a free "
            "one (printed on stdout). Every connection must send the bearer token "
            f"(--token-file, or ${TOKEN_VARIABLE}; at least 16 printable ASCII characters). "
            "Needs the 'sdk-http' extra"
        ),
    )
    agent.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"with --listen: the file holding the bearer token (else ${TOKEN_VARIABLE})",
    )
    agent.add_argument("-v", "--verbose", action="store_true", help="log more to stderr")
    agent.set_defaults(agent_parser=agent)


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agent-meta`` console script; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo"]:  # everything after it, --help included, is the demo's
        return _run_demo(arguments[1:])
    if arguments[:1] == ["run"]:  # parsed there, importing nothing more: its start-up is the
        from ..instrument._supervise import main as run_main  # agent's

        return run_main(arguments[1:])
    if arguments[:1] == ["own"]:  # the same: its child starts before anything heavy loads
        from ..own._command import main as own_main

        return own_main(arguments[1:])
    args = build_parser().parse_args(arguments)
    if hasattr(args, "run"):  # the apps: proxy, check, timeline
        return int(args.run(args))
    parser: argparse.ArgumentParser = args.agent_parser  # usage errors say agent-meta agent
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbose else logging.WARNING,
        format="agent-meta: %(levelname)s %(name)s: %(message)s",
    )
    check_combination(parser, args)
    options = _agent_options(parser, args)
    if args.runtime == "sdk":
        return _run_sdk_agent(parser, args, options)
    from ..agents.reference_agent._agent import ReferenceAgent
    from ..trio_connection._stdio import run_stdio_agent

    try:
        if args.store is None:
            run_stdio_agent(
                ReferenceAgent,
                protocol_versions=_PROTOCOLS[args.protocol],
                max_line_bytes=args.max_line,
                options=options,
            )
        else:
            import trio

            trio.run(
                _serve_with_store,
                args.store,
                _PROTOCOLS[args.protocol],
                args.max_line,
                options,
            )
    except (AgentMetaError, ExceptionGroup) as exc:
        print(f"agent-meta: stopped: {'; '.join(map(repr, _leaves(exc)))}", file=sys.stderr)
        return 1
    return 0


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups unwrapped."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _agent_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> OwnerOptions:
    """The owner options of ``agent-meta agent``, whatever the runtime."""
    from ..agents._common._commands import CommandError, parse_dotted_path
    from ..sansio._options import OwnerOptions

    try:
        failure_path = parse_dotted_path(args.failure_path)
    except CommandError as exc:
        parser.error(f"--failure-path: {exc}")
    return OwnerOptions(
        failure_path=failure_path,
        v1_meta_mode=args.v1_meta_mode,
        coalesce=not args.no_coalesce,
        drain_timeout=DRAIN_TIMEOUT,  # a client that stops reading cannot hold the exit forever
    )


SDK_V1_ONLY = (
    "the official Python SDK before 1.0 speaks ACP v1 only "
    "(ACP v2 needs agent-client-protocol 1.0 or later: acp.experimental.v2)"
)
"""Why ``--runtime sdk`` takes no ``--protocol 2`` on an SDK release without the v2 API."""


def _sdk_too_old_for_the_reference_agent() -> str | None:
    """Why the installed SDK cannot run the reference agent, if it cannot: the adapter serves
    0.6 on, the reference agent is written against the API of 0.7.1 on (``run_agent``,
    ``SessionInfoUpdate``, resume). A missing SDK is :func:`_import_extra`'s to report."""
    try:
        from ..sdk._release import installed_release

        release = installed_release()
    except ImportError:
        return None
    if release.runs_agent and release.session_info:
        return None
    return (
        "agent-meta agent --runtime sdk needs agent-client-protocol 0.7.1 or later (the reference "
        f"agent uses its run_agent and SessionInfoUpdate); {release.version} is installed.\n"
        "Install a later one with: pip install 'agent-client-protocol>=0.7.1'"
    )


def _run_sdk_agent(
    parser: argparse.ArgumentParser, args: argparse.Namespace, options: OwnerOptions
) -> int:
    """``agent-meta agent --runtime sdk``: the reference agent on the official SDK (asyncio):
    ACP v1 on any supported release, v2 on 1.0 (``auto``: the one the client asks for)."""
    too_old = _sdk_too_old_for_the_reference_agent()
    if too_old is not None:
        print(too_old, file=sys.stderr)
        return 2
    sdk_agent = _import_extra(
        "agent_meta.agents.sdk_agent._serve",
        "agent-meta agent --runtime sdk needs the official ACP Python SDK",
        "sdk",
    )
    if sdk_agent is None:
        return 2
    offered = _sdk_protocol_versions()
    protocols = tuple(v for v in _PROTOCOLS[args.protocol] if v in offered)
    if not protocols:
        parser.error(f"--protocol {args.protocol} with --runtime sdk: {SDK_V1_ONLY}")
    if args.listen is not None:
        return _run_listening(parser, args, options)
    if (problem := _not_a_pipe()) is not None:
        print(
            f"agent-meta agent --runtime sdk: {problem}; asyncio's pipe transports take pipes, "
            "sockets and terminals only (run it under a client, or use the trio runtime)",
            file=sys.stderr,
        )
        return 2
    # The owner follows the version initialize answers; it starts at the one served alone.
    options = dataclasses.replace(options, protocol_version=2 if protocols == (2,) else 1)
    import asyncio

    serve = functools.partial(sdk_agent.serve_sdk_agent, protocols=protocols)
    try:
        asyncio.run(_serve_sdk(serve, args.store, args.max_line, options))
    except (AgentMetaError, ExceptionGroup) as exc:
        print(f"agent-meta: stopped: {'; '.join(map(repr, _leaves(exc)))}", file=sys.stderr)
        return 1
    return 0


TOKEN_VARIABLE = "AGENT_META_TOKEN"
"""The environment variable ``--listen`` reads the bearer token from (without ``--token-file``)."""


def _run_listening(
    parser: argparse.ArgumentParser, args: argparse.Namespace, options: OwnerOptions
) -> int:
    """``--listen``: the SDK agent for remote clients (WebSocket and streamable HTTP)."""
    host, port = _listen_address(parser, args.listen)
    token = _bearer_token(parser, args.token_file)
    listen = _import_extra(
        "agent_meta.agents.sdk_agent._listen",
        "agent-meta agent --listen needs the SDK's HTTP server and an ASGI server "
        "(agent-client-protocol 0.12)",
        "sdk-http",
    )
    if listen is None:
        return 2
    serve = functools.partial(listen.serve_sdk_listen, host, port, token)
    import asyncio

    try:
        asyncio.run(_serve_listening(serve, args.store, options))
    except (AgentMetaError, listen.ListenError, ExceptionGroup) as exc:
        print(f"agent-meta: stopped: {'; '.join(map(repr, _leaves(exc)))}", file=sys.stderr)
        return 1
    return 0


def _listen_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` as a (host, port) pair; loopback unless a host is named."""
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text, 10)
    except ValueError:
        parser.error(f"--listen {text!r}: expected [HOST:]PORT")
    if not 0 <= port <= 65535:
        parser.error(f"--listen {text!r}: the port must be from 0 to 65535")
    return host, port


def _bearer_token(parser: argparse.ArgumentParser, path: str | None) -> str:
    """The token of ``--token-file`` (its first line), else of the environment; the token
    itself never appears in a message."""
    if path is not None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"--token-file {path}: cannot read it ({type(exc).__name__})")
        token = lines[0].strip() if lines else ""
    else:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        parser.error(f"--listen needs a bearer token: --token-file PATH, or ${TOKEN_VARIABLE}")
    from ..sdk._auth import check_token

    try:
        check_token(token)
    except ValueError as exc:
        parser.error(f"--listen: {exc}")
    return token


async def _serve_listening(
    serve: Callable[..., Awaitable[None]], url: str | None, options: OwnerOptions
) -> None:
    if url is None:
        await serve(options)
        return
    from ..stores._open import open_store

    async with open_store(url) as store:
        await serve(options, store=store, history=store)


def _sdk_protocol_versions() -> tuple[int, ...]:
    """The ACP versions the installed SDK serves (``(1, 2)`` on 1.0, else ``(1,)``)."""
    from ..agents.sdk_agent._serve import sdk_protocol_versions

    return sdk_protocol_versions()


def _not_a_pipe() -> str | None:
    """Why stdin or stdout cannot carry the SDK runtime (a regular file), or ``None``."""
    for name, fd in (("stdin", 0), ("stdout", 1)):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return f"{name} is not open"
        if stat.S_ISREG(mode):
            return f"{name} is a regular file"
    return None


async def _serve_sdk(
    serve: Callable[..., Awaitable[None]], url: str | None, max_line: int, options: OwnerOptions
) -> None:
    if url is None:
        await serve(options, max_line_bytes=max_line, handle_signals=True)
        return
    from ..stores._open import open_store

    async with open_store(url) as store:
        await serve(
            options,
            store=_crash_hook(store),
            history=store,
            max_line_bytes=max_line,
            handle_signals=True,
        )


DRAIN_TIMEOUT = 10.0
"""Seconds ``agent-meta agent`` waits at exit for queued frames to be written, once the work
has ended (on a signal, within the stop's own bound of 15 s: see ``AgentConnection.shutdown``);
frames still unwritten then make it exit with status 1."""

CRASH_AFTER_PERSIST = "AGENT_META_TEST_CRASH_AFTER_PERSIST"
"""Test hook: with ``N`` in this environment variable, ``agent --store`` kills its own process
(``os._exit(137)``, like ``kill -9``) right after the Nth store write, before the frame that
write protects is written. Only for crash tests."""


async def _serve_with_store(
    url: str, versions: tuple[int, ...], max_line: int, options: OwnerOptions
) -> None:
    from ..agents.reference_agent._agent import ReferenceAgent
    from ..stores._open import open_store
    from ..trio_connection._stdio import serve_stdio

    async with open_store(url) as store:
        agent = await ReferenceAgent.with_store(store)
        await serve_stdio(
            agent,
            protocol_versions=versions,
            max_line_bytes=max_line,
            options=options,
            store=_crash_hook(store),
            handle_signals=True,
        )


def _crash_hook(store: LifetimeStore) -> LifetimeStore:
    """``store``, or the :data:`CRASH_AFTER_PERSIST` test hook around it when that is set."""
    crash_after = os.environ.get(CRASH_AFTER_PERSIST)
    return _CrashAfterWrites(store, int(crash_after)) if crash_after else store


class _CrashAfterWrites:
    """The :data:`CRASH_AFTER_PERSIST` hook: a store that ends the process after N writes."""

    def __init__(self, store: LifetimeStore, writes: int) -> None:
        self._store = store
        self._left = writes

    @property
    def location(self) -> str:
        return self._store.location

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        return await self._store.claim(session_id, holder)

    async def read(self, session_id: str) -> StoredLifetime | None:
        return await self._store.read(session_id)

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        return await self._store.read_many(session_ids)

    async def write(
        self,
        saves: Sequence[StoredLifetime],
        deletes: Sequence[tuple[str, int]],
        *,
        holder: str,
    ) -> frozenset[str]:
        stale = await self._store.write(saves, deletes, holder=holder)
        self._left -= 1
        if self._left <= 0:
            sys.stderr.write(f"agent-meta: {CRASH_AFTER_PERSIST}: crashing after a store write\n")
            sys.stderr.flush()
            os._exit(137)
        return stale


def _import_extra(module: str, needs: str, extra: str) -> ModuleType | None:
    """``module``, or ``None`` after saying on stderr what its missing extra is and how to
    install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        from .._install_hint import install_hint

        print(
            f"{needs} ({exc}).\nInstall the '{extra}' extra: {install_hint(extra)}", file=sys.stderr
        )
        return None


def _run_demo(args: list[str]) -> int:
    demo = _import_extra(
        "agent_meta.demo._main",
        "agent-meta demo needs the optional 'demo' dependencies",
        "demo",
    )
    if demo is None:
        return 2
    status = demo.main(args)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
