"""The ``agent-meta demo`` command line: every argument after ``demo`` is the demo's own
(:func:`agent_meta.demo._main.main` parses them), so this module only registers the command for
``agent-meta --help`` and runs the demo, or says which extra it needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["add_parser", "main"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``agent-meta demo`` (for ``--help``; :func:`main` takes its arguments)."""
    commands.add_parser(
        "demo",
        help="run the demo (needs the 'demo' extra)",
        description="Drive the reference agent with the official ACP Python SDK and show the "
        "session-info frames. Every argument after 'demo' is passed to the demo.",
    ).add_argument("args", nargs=argparse.REMAINDER, help="arguments for the demo")


def main(argv: Sequence[str]) -> int:
    """``agent-meta demo ARGS``: the demo's exit status (2 without the ``demo`` extra)."""
    from .._install_hint import import_extra

    demo = import_extra(
        "agent_meta.demo._main", "agent-meta demo needs the optional 'demo' dependencies", "demo"
    )
    if demo is None:
        return 2
    status = demo.main(list(argv))
    return status if isinstance(status, int) else 0
