"""Command-line pieces shared by the tools that run an agent command."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Given", "add_agent_command", "check_combination", "exit_status"]


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


def check_combination(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``agent-meta agent``: a usage error for an option the others make it ignore."""
    if args.listen is not None and args.runtime != "sdk":
        parser.error("--listen needs --runtime sdk")
    if args.token_file is not None and args.listen is None:
        parser.error("--token-file needs --listen")
    if args.listen is not None and "max_line" in getattr(args, "given", ()):
        parser.error(
            "--max-line applies to stdio only: with --listen, messages are WebSocket messages "
            "and HTTP bodies, not lines"
        )


class _AgentCommand(argparse.Action):
    """Collects ``-- AGENT_CMD ARGS...``; an empty command is a usage error (exit 2)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        command = [str(value) for value in values or ()]
        if command[:1] == ["--"]:
            command = command[1:]
        if not command:
            parser.error("an agent command is required after '--' (for example: -- my-agent)")
        setattr(namespace, self.dest, command)


def add_agent_command(parser: argparse.ArgumentParser) -> None:
    """Add the trailing ``-- AGENT_CMD ARGS...``: everything after ``--`` is the agent's."""
    parser.add_argument(
        "agent",
        nargs=argparse.REMAINDER,
        action=_AgentCommand,
        metavar="-- AGENT_CMD [ARGS...]",
        help="the agent to run, with its arguments (after '--', nothing is read as an option)",
    )


def exit_status(returncode: int) -> int:
    """A child's return code as a shell reports it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode
