"""The repository's folders say what they hold (docs/architecture.md, "The repository").

``tests/`` is self-contained: it imports nothing of ``integration/`` (real clients and agents)
or ``bench/`` (the benchmarks), and starts none of their modules (``python -m ...``). What
both need lives in ``tests/support/``, and they import it from there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("integration", "bench")
"""The top-level packages ``tests/`` must not use."""


def _outside(module: str) -> bool:
    return module.split(".")[0] in OUTSIDE


def _uses(path: Path) -> list[str]:
    """What ``path`` imports or runs of :data:`OUTSIDE`, as ``line: module``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names if _outside(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if _outside(node.module):
                found.append(f"{node.lineno}: {node.module}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _outside(node.value)
            and re.fullmatch(r"[\w.]+", node.value)
            and "." in node.value
        ):
            found.append(f"{node.lineno}: {node.value}")  # python -m integration.x, runpy
    return found


def test_the_tests_import_nothing_of_integration_or_bench() -> None:
    offenders = {
        str(path.relative_to(ROOT)): uses
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (uses := _uses(path))
    }
    assert offenders == {}


def test_the_check_finds_an_import_and_a_module_run(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import integration.harness\n"
        "from bench import sender\n"
        "from tests.support import sdk_mini_agent\n"
        'COMMAND = ["python", "-m", "integration.sdk_mini_agent"]\n'
        'TEXT = "integration tests, bench marks"\n',
        encoding="utf-8",
    )
    assert _uses(sample) == [
        "1: integration.harness",
        "2: bench",
        "4: integration.sdk_mini_agent",
    ]
