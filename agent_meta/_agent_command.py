"""The ``-- AGENT_CMD ARGS...`` argument and a child's exit status: what the commands that run
an agent as their child share (``proxy``, ``check``, ``own``, ``run``)."""

from __future__ import annotations

import argparse
import os
import stat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["add_agent_command", "exit_status", "not_a_pipe", "positive_int"]


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


def not_a_pipe() -> str | None:
    """Why this process's stdin or stdout cannot carry an agent on the official SDK (a regular
    file: asyncio's pipe transports take pipes, sockets and terminals only), or ``None``."""
    for name, fd in (("stdin", 0), ("stdout", 1)):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return f"{name} is not open"
        if stat.S_ISREG(mode):
            return f"{name} is a regular file"
    return None


def positive_int(text: str) -> int:
    """An option's whole number ``>= 1`` (``--max-line``), or a usage error naming it."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value
