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


DOCS = ROOT / "docs"
PACKAGE = ROOT / "agent_meta"
TOP_LEVEL = ("agent_meta", "tests", "integration", "bench", "scripts", "docs")
"""Folders of the repository a page may name a path in (``bench/__main__.py``)."""
EXTERNAL = ("acp/", "kimi_cli/")
"""Code of other projects the pages name (the official SDK's package, a third-party agent's)."""
_PATH = re.compile(r"[A-Za-z0-9_][\w./-]*(?:\.py|/)")
_DOTTED = re.compile(r"agent_meta(?:\.\w+)+")


def named_paths(text: str) -> list[str]:
    """The module and package paths in a page's code spans: ``agent_meta/...``, a path in a
    package of agent_meta (``sansio/queue/_queue.py``, ``own/``), or in a folder of the
    repository; a bare file name (``_registry.py``, in a table of one package) is not one."""
    paths = []
    for span in re.findall(r"`([^`\s]+)`", text):
        if _PATH.fullmatch(span) and "/" in span.rstrip("/") and not span.startswith(EXTERNAL):
            paths.append(span)
        elif span.endswith("/") and span.count("/") == 1 and not span.startswith(EXTERNAL):
            paths.append(span)  # a package or folder by itself: sansio/
    return paths


def path_exists(path: str) -> bool:
    """Whether a named path is there: relative to the repository for one of its folders, else
    relative to the package (``owner/_base.py`` is ``agent_meta/owner/_base.py``)."""
    first = path.split("/", 1)[0]
    if first in TOP_LEVEL:
        return (ROOT / path).exists()
    return (PACKAGE / path).exists()


def module_exists(dotted: str) -> bool:
    """Whether ``agent_meta.a._b...`` names modules that are there: each part is a package or
    a module until a module is reached, or a public name of the package before it
    (``agent_meta.OwnerOptions``); what follows a module, an attribute, is the rule table's
    business. A private part that is no module (``agent_meta.sansio._seam``) is missing."""
    here = ROOT / "agent_meta"
    for part in dotted.split(".")[1:]:
        if (here / part / "__init__.py").exists():
            here = here / part
        elif (here / f"{part}.py").exists():
            return True
        else:
            return not part.startswith("_")
    return True


def page_names() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        found += [(page.name, path) for path in named_paths(text) if not path.startswith(".")]
        found += [(page.name, name) for name in _DOTTED.findall(text)]
    return found


def test_every_module_path_the_docs_name_exists() -> None:
    missing = [
        f"{page}: {name}"
        for page, name in page_names()
        if not (module_exists(name) if "/" not in name else path_exists(name))
    ]
    assert missing == []


def test_the_path_check_reads_paths_and_fails_on_a_missing_one() -> None:
    text = (
        "`owner/_store.py`, `sansio/queue/_queue.py`, `own/`, `sansio/`, `_registry.py`, "
        "`acp/schema.py`, `bench/__main__.py`, `apps/_supervise.py`, `x = 1`"
    )
    paths = named_paths(text)
    assert paths == [
        "owner/_store.py",
        "sansio/queue/_queue.py",
        "own/",
        "sansio/",
        "bench/__main__.py",
        "apps/_supervise.py",
    ]
    assert [path for path in paths if not path_exists(path)] == [
        "owner/_store.py",
        "apps/_supervise.py",
    ]
    assert module_exists("agent_meta.sansio.inbound._tracker.LifetimeTracker")
    assert not module_exists("agent_meta.sansio._seam")
