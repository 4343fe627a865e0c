"""The ``agent-meta`` command line (also ``python -m agent_meta``): the top-level parser, and
each subcommand handed to its product.

The ways in come first, as in the README's table: ``own`` and ``run`` (in front of, or under,
an agent you did not write), then ``proxy``, ``check`` and ``timeline`` (watch and check any
agent's metadata), ``attach`` (a stdio client's way to a host serving ACP over a WebSocket,
:mod:`agent_meta.attach`); then ``agent`` (the reference agent on stdio,
:mod:`agent_meta.agents`) and
``demo`` (:mod:`agent_meta.demo`, which needs the ``demo`` extra). Each product brings its own
``add_parser`` and runs what it parsed. ``own``, ``run`` and ``demo`` parse their own arguments,
before the rest of the command line is built (which imports every product's parser): the
child of ``own`` and ``run`` starts before anything heavy is imported, and everything after
``demo`` is the demo's.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .._version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``agent-meta`` (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="agent-meta",
        description=(
            "Session-info _meta ownership for ACP agents. Put it in front of any stdio ACP "
            "agent (own -- AGENT_CMD) or under an unchanged Python agent on the official SDK "
            "(run -- AGENT_CMD); watch an agent's metadata (proxy -- AGENT_CMD, then "
            "timeline) or check it against the rules (check -- AGENT_CMD); reach a host that "
            "serves ACP over a WebSocket from a stdio client (attach URL); or run the "
            "reference agent on stdio (agent) and the demo that drives it with real ACP "
            "clients (demo). 'agent-meta COMMAND --help' tells more."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from ..agents import _command as _agent
    from ..attach import _command as _attach
    from ..demo import _command as _demo
    from ..instrument import _supervise
    from ..own import _command as _own
    from ..tools import _check, _proxy, _timeline

    products = (_own, _supervise, _proxy, _check, _timeline, _attach, _agent, _demo)
    for product in products:  # the README's order
        product.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agent-meta`` console script; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo"]:  # everything after it, --help included, is the demo's
        from ..demo._command import main as demo_main

        return demo_main(arguments[1:])
    if arguments[:1] == ["run"]:  # parsed there, importing nothing more: its start-up is the
        from ..instrument._supervise import main as run_main  # agent's

        return run_main(arguments[1:])
    if arguments[:1] == ["own"]:  # the same: its child starts before anything heavy loads
        from ..own._command import main as own_main

        return own_main(arguments[1:])
    args = build_parser().parse_args(arguments)
    return int(args.run(args))  # proxy, check, timeline, attach, agent: each product's own


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
