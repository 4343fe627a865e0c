"""Fail when a function of the package is too complex; report the largest modules and classes.

Run by ``nox -s lint``. The gate is the architecture's (``docs/architecture.md``): no function
above cyclomatic complexity 12 (radon's count, boolean operators included). Lines are reported,
never enforced: the largest modules and classes are printed as information, because what a
class holds should follow from what it owns, not from a count (a cap met by moving lines
between files makes nothing simpler).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from radon.complexity import cc_visit

MAX_COMPLEXITY = 12
SHOWN = 5
"""How many of the largest modules and classes, and of the most complex functions, to print."""
ROOT = Path(__file__).resolve().parent.parent


def class_sizes(name: str, text: str) -> list[tuple[int, str]]:
    """The line span of each class of the module ``name``."""
    return [
        (node.end_lineno - node.lineno + 1, f"{name}:{node.lineno} {node.name}")
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    ]


def _top(items: list[tuple[int, str]]) -> str:
    items.sort(reverse=True)
    return ", ".join(f"{label} ({value})" for value, label in items[:SHOWN])


def main() -> int:
    problems: list[str] = []
    modules: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted((ROOT / "agent_meta").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        modules.append((len(text.splitlines()), name))
        classes += class_sizes(name, text)
        for block in cc_visit(text):
            label = f"{name}:{block.lineno} {block.fullname}"
            functions.append((block.complexity, label))
            if block.complexity > MAX_COMPLEXITY:
                problems.append(f"{label}: complexity {block.complexity} > {MAX_COMPLEXITY}")
    print("largest modules (lines):", _top(modules))
    print("largest classes (lines):", _top(classes))
    print("most complex functions:", _top(functions))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
