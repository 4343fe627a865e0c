"""Options of ``agent-meta agent`` whose meaning depends on the others."""

from __future__ import annotations

import argparse

__all__ = ["Given", "check_combination"]


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
