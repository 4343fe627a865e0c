"""Fail when modules of the package import each other in a circle at run time.

Run by ``nox -s lint``. Reads every module of ``agent_meta`` and follows the imports that run
when it is imported: those at module level, outside ``if TYPE_CHECKING:`` blocks (imports
inside functions run later, and annotations under ``from __future__ import annotations``
never). A circle among those means a module can find its partner half initialised, depending
on which one is imported first.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "agent_meta"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements among ``body`` that run at import time (not under TYPE_CHECKING,
    not inside functions or classes' methods)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += _runtime_imports(node.body)
            found += _runtime_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                found += _runtime_imports(block)
            for handler in node.handlers:
                found += _runtime_imports(handler.body)
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module of the package, and the modules of the package it imports at run time."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _runtime_imports(tree.body):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            source = _resolve(name, path.name == "__init__.py", node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else source)
        edges[name] = {target for target in targets if target in modules and target != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    sys.setrecursionlimit(10_000)
    modules = {module_name(path): path for path in sorted((ROOT / PACKAGE).rglob("*.py"))}
    edges = graph(modules)
    found = cycles(edges)
    count = sum(len(targets) for targets in edges.values())
    print(f"runtime imports: {len(modules)} modules, {count} imports inside the package")
    for component in found:
        print("import circle: " + " <-> ".join(component), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
