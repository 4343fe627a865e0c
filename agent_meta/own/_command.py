"""The ``agent-meta own`` command line, and its start: the child first, the imports after.

Start-up is the child's, not ours: ``agent-meta`` runs ``own`` before building the rest of
the command line (which imports every tool), parses only ``own``'s options, starts the child,
and only then imports trio, the owner and the store, while the child starts up. The client's
first line waits in the pipe meanwhile.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
from typing import IO, TYPE_CHECKING, Literal

from .._agent_command import add_agent_command, positive_int
from ..sansio._lines import DEFAULT_MAX_LINE_BYTES
from ._child import Child, ChildStartError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["EXIT_GRACE", "OwnSettings", "add_parser", "main", "run"]

NAME = "agent-meta own"

EXIT_GRACE = 10.0
"""Seconds the child may take to exit once the client's input has ended (or a signal was passed
on) before it is stopped: SIGTERM, then SIGKILL 10 seconds after (``DRAIN_TIMEOUT``)."""

_DESCRIPTION = (
    "Run AGENT_CMD (any stdio ACP agent, in any language) as the child of an ACP agent on this "
    "stdio that owns every session's session info for the client: the child's "
    "session_info_update frames become publications into agent_meta's owner (whole merged "
    "objects on v1, patches on v2; a resync at every load and resume response; nothing of a "
    "closed session), everything else is forwarded byte for byte, both ways. The exit status is "
    "the child's."
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OwnSettings:
    """What ``agent-meta own`` was asked to do."""

    command: list[str]
    store: str | None = None
    log: str | None = None
    child_meta: Literal["patch", "replace"] | None = None
    """``None``: as the child's ``initialize`` result says, else ``patch``."""
    max_line: int = DEFAULT_MAX_LINE_BYTES
    coalesce: bool = True
    exit_grace: float = EXIT_GRACE


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help=(
            "keep session lifetimes in this store (a SQLite file, a path or sqlite:///PATH, or a "
            "PostgreSQL database, postgresql://...), so a restarted own and its child restore "
            "them on session/resume even when the child's replay holds none"
        ),
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="also write every report (bad lines from the child, dropped frames ...) to FILE",
    )
    parser.add_argument(
        "--child-meta",
        choices=("patch", "replace"),
        default=None,
        help=(
            "how a v1 child's _meta objects are read: patch applies each as a shallow patch by "
            "top-level key, as v2 says (partial objects, like codex-acp's, add up); replace "
            "takes each as the whole _meta (a child that sends complete objects). Default: as "
            "the child's initialize result says (agents on agent_meta say they send whole "
            "objects), else patch, with a warning if its objects look whole. v2 always patches"
        ),
    )
    parser.add_argument(
        "--max-line",
        type=positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="BYTES",
        help=f"longest message line taken from either side (default: {DEFAULT_MAX_LINE_BYTES})",
    )
    parser.add_argument(
        "--no-coalesce",
        action="store_true",
        help="send every session-info update as its own frame, even behind a slow client",
    )
    parser.add_argument(
        "--exit-grace",
        type=_seconds,
        default=EXIT_GRACE,
        metavar="SECONDS",
        help=(
            "how long the child may take to exit after the client's input ends or a signal is "
            f"passed on, before it is stopped (default: {EXIT_GRACE:g})"
        ),
    )
    add_agent_command(parser)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agent-meta own`` to the full command line (its help; ``main`` runs it)."""
    parser = subparsers.add_parser(
        "own",
        usage="%(prog)s [options] -- AGENT_CMD [ARGS...]",
        help="own the session info of any ACP agent, run as this command's child",
        description=_DESCRIPTION,
    )
    _configure(parser)
    parser.set_defaults(run=run)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=NAME, usage="%(prog)s [options] -- AGENT_CMD [ARGS...]", description=_DESCRIPTION
    )
    _configure(parser)
    return parser


def _settings(args: argparse.Namespace) -> OwnSettings:
    return OwnSettings(
        command=args.agent,
        store=args.store,
        log=args.log,
        child_meta=args.child_meta,
        max_line=args.max_line,
        coalesce=not args.no_coalesce,
        exit_grace=args.exit_grace,
    )


def main(argv: Sequence[str]) -> int:
    """``agent-meta own ARGS``: parse, start the child, serve; return the exit status."""
    return start(_settings(_parser().parse_args(list(argv))))


def run(args: argparse.Namespace) -> int:
    """``agent-meta own`` with arguments the full command line parsed."""
    return start(_settings(args))


def start(settings: OwnSettings) -> int:
    """Start the child, then serve it until it exits; return the exit status (usage errors:
    2; a child that cannot be started: 127 when not found, else 126)."""
    if settings.store is not None:
        from ..core._errors import StoreError
        from ..stores._urls import store_kind

        try:
            store_kind(settings.store)
        except StoreError as exc:
            print(f"{NAME}: --store: {exc}", file=sys.stderr)
            return 2
    log: IO[str] | None = None
    if settings.log is not None:
        try:
            log = open(settings.log, "a", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as exc:
            print(f"{NAME}: cannot write the log: {exc}", file=sys.stderr)
            return 2
    try:
        try:
            child = Child.start(settings.command)
        except ChildStartError as exc:
            print(f"{NAME}: cannot start the agent: {exc}", file=sys.stderr)
            return exc.status
        # trio, the owner, the store: while the child starts up. What they create lives as
        # long as the process: no collections while they load (a sixth of their time), and
        # then out of the collector's way, so that a full collection (a pause of milliseconds
        # over every module) never holds a frame.
        collecting = gc.isenabled()
        gc.disable()
        try:
            from ._serve import serve

            gc.freeze()
        finally:
            if collecting:
                gc.enable()
        return serve(child, settings, log)
    finally:
        if log is not None:
            log.close()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text}")
    return value
