"""Report the package's largest modules and classes and its most complex functions.

Run by ``nox -s lint``, as information, never as a gate: what a class holds should follow from
what it owns, not from a count, and a cap met by moving lines between files makes nothing
simpler (``docs/architecture.md``). Functions above cyclomatic complexity 12 (radon's count,
boolean operators included) are listed by name, as the places a reader should look at first.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from radon.complexity import cc_visit

MAX_COMPLEXITY = 12
"""Above this, a function is listed by name (a place to read, not a failure)."""
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
    notes: list[str] = []
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
                notes.append(f"{label}: complexity {block.complexity} (above {MAX_COMPLEXITY})")
    print("largest modules (lines):", _top(modules))
    print("largest classes (lines):", _top(classes))
    print("most complex functions:", _top(functions))
    for note in notes:
        print(f"to read: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
