"""Printing figures from tests into the pytest log, even while output is captured."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def show_lines(config: pytest.Config, lines: list[str]) -> None:
    """Write ``lines`` to the terminal even while pytest captures output (no ``-s`` needed)."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if capture is None or reporter is None:  # pragma: no cover - plugins disabled
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():
        reporter.ensure_newline()
        for line in lines:
            reporter.write_line(line)
