"""The ``agent-meta agent`` command line: its options, the usage errors of their combinations,
and the owner options they make; :mod:`._serve` runs the agent they ask for.

Building the parser imports nothing heavy (``agent-meta --help`` builds every command's): the
runtimes, the stores and the agents themselves are imported when the command runs.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from typing import TYPE_CHECKING

from .._agent_command import positive_int
from ..sansio._lines import DEFAULT_MAX_LINE_BYTES
from ._serve import DRAIN_TIMEOUT, TOKEN_VARIABLE, run_sdk, run_trio

if TYPE_CHECKING:
    from agent_meta import OwnerOptions

__all__ = ["PROTOCOLS", "Given", "add_parser", "check_combination", "run"]

PROTOCOLS = {"auto": (1, 2), "1": (1,), "2": (2,)}
"""``--protocol``'s choices: the ACP versions each accepts at ``initialize``."""

_DESCRIPTION = (
    "Run the reference ACP agent on stdin/stdout (NDJSON JSON-RPC). Prompt lines are "
    "commands: /meta set KEY JSON, /meta rm KEY, /meta patch JSON_OBJECT, /meta clear, "
    "/title [TEXT], /domain set KEY PATH JSON, /domain rm KEY PATH, "
    "/fail ID REVISION [TITLE], /resolve ID REVISION, /burst N KEY, /ask TEXT, "
    "/trace TRACEPARENT KEY JSON; other lines are echoed. Logs go to stderr."
)


class Given(argparse.Action):
    """Stores the value as ``store`` does, and notes that the option was given (``given``):
    for the options whose default does not show whether they were."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agent-meta agent`` to the command line; its usage errors print its own usage."""
    agent = commands.add_parser(
        "agent", help="run the reference ACP agent on stdin/stdout", description=_DESCRIPTION
    )
    _configure(agent)
    agent.set_defaults(run=functools.partial(run, agent))


def _configure(agent: argparse.ArgumentParser) -> None:
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
        choices=sorted(PROTOCOLS),
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
        type=positive_int,
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


def check_combination(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error for an option the others make it ignore."""
    if args.listen is not None and args.runtime != "sdk":
        parser.error("--listen needs --runtime sdk")
    if args.token_file is not None and args.listen is None:
        parser.error("--token-file needs --listen")
    if args.listen is not None and "max_line" in getattr(args, "given", ()):
        parser.error(
            "--max-line applies to stdio only: with --listen, messages are WebSocket messages "
            "and HTTP bodies, not lines"
        )


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``agent-meta agent`` with the arguments ``parser`` (its own, for usage errors) parsed;
    returns the exit status."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbose else logging.WARNING,
        format="agent-meta: %(levelname)s %(name)s: %(message)s",
    )
    check_combination(parser, args)
    options = _owner_options(parser, args)
    versions = PROTOCOLS[args.protocol]
    if args.runtime == "sdk":
        return run_sdk(parser, args, versions, options)
    return run_trio(args, versions, options)


def _owner_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> OwnerOptions:
    """The owner options of ``agent-meta agent``, whatever the runtime."""
    from agent_meta import OwnerOptions

    from ._common._commands import CommandError, parse_dotted_path

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
