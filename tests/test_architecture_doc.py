"""docs/architecture.md's rule table is checked against the code and the tests.

Every code name in the "decided in" column must resolve, and every test pattern in the "tests"
column must match at least one test function, so the table cannot drift from what is real.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
RULES = [f"R{n}" for n in range(1, 14)]


def rule_rows() -> dict[str, tuple[list[str], list[str]]]:
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.match(r"R\d+ ", cells[0]):
            continue
        rule = cells[0].split()[0]
        rows[rule] = (re.findall(r"`([^`]+)`", cells[1]), re.findall(r"`([^`]+)`", cells[2]))
    return rows


def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(dotted)


def functions_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]


def test_every_rule_has_a_row() -> None:
    assert sorted(rule_rows(), key=lambda r: int(r[1:])) == RULES


@pytest.mark.parametrize("rule", RULES)
def test_rule_row_names_real_code_and_real_tests(rule: str) -> None:
    code, tests = rule_rows()[rule]
    assert code, f"{rule}: no code named"
    for name in code:
        resolve(name)  # raises if the module or attribute is gone
    assert tests, f"{rule}: no test named"
    for pattern in tests:
        file_name, _, test_pattern = pattern.partition("::")
        names = functions_in(ROOT / file_name)
        assert fnmatch.filter(names, test_pattern), f"{rule}: {pattern} matches no test"


def test_the_picture_names_every_package_and_only_those() -> None:
    """The layer picture of docs/architecture.md names each package of agent_meta (``name/``
    after a margin) and no package that is not there."""
    text = DOC.read_text(encoding="utf-8")
    picture = text.split("```text", 1)[1].split("```", 1)[0]
    named = set(re.findall(r"(?m)(?:^|\s{2})([a-z_]+)/(?=\s)", picture))
    package = ROOT / "agent_meta"
    real = {path.parent.name for path in package.glob("*/__init__.py")}
    assert named == real
