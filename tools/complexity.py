"""Fail when a function of the package is too complex, or a module or class too long.

Run by ``nox -s lint``. The limits are the architecture's (``docs/architecture.md``): no
function above cyclomatic complexity 12 (radon's count, boolean operators included), no module
over 500 lines, no class over 400, and each runtime driver module well under 400 lines, since a
driver only moves bytes and wakes tasks.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from radon.complexity import cc_visit

MAX_COMPLEXITY = 12
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 400
MAX_DRIVER_LINES = 400
DRIVERS = ("agent_meta/owner/_trio.py", "agent_meta/owner/_asyncio.py")
ROOT = Path(__file__).resolve().parent.parent


def sizes(name: str, text: str) -> list[str]:
    """What is too long in the module ``name``: the module itself, or one of its classes."""
    found = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: {lines} lines > {MAX_MODULE_LINES}")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            span = node.end_lineno - node.lineno + 1
            if span > MAX_CLASS_LINES:
                found.append(f"{name}:{node.lineno} class {node.name}: {span} lines")
    return found


def main() -> int:
    problems: list[str] = []
    worst: list[tuple[int, str]] = []
    for path in sorted((ROOT / "agent_meta").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        problems += sizes(name, text)
        for block in cc_visit(text):
            label = f"{name}:{block.lineno} {block.fullname}"
            worst.append((block.complexity, label))
            if block.complexity > MAX_COMPLEXITY:
                problems.append(f"{label}: complexity {block.complexity} > {MAX_COMPLEXITY}")
    for driver in DRIVERS:
        path = ROOT / driver
        if path.exists():
            lines = len(path.read_text(encoding="utf-8").splitlines())
            print(f"{driver}: {lines} lines")
            if lines >= MAX_DRIVER_LINES:
                problems.append(f"{driver}: {lines} lines >= {MAX_DRIVER_LINES}")
    worst.sort(reverse=True)
    print("most complex:", ", ".join(f"{label} ({value})" for value, label in worst[:5]))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
