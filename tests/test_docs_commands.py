"""The ``agent-meta`` commands the README and docs/ show are accepted by the real parsers, and
the usage lines they quote are the real ones."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_meta.cli._main import build_parser
from agent_meta.demo._main import _parser as demo_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^\s*```(\S*)")
_COMMAND = re.compile(r"(?:^|[\s/])agent-meta (?=[a-z-])")


def _blocks() -> list[tuple[str, int, str, str]]:
    """Every line of a fenced block: (page, line number, the block's language, the line)."""
    found = []
    for page in PAGES:
        language: str | None = None
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            fence = _FENCE.match(line)
            if fence:
                language = fence.group(1) if language is None else None
            elif language is not None:
                found.append((page.relative_to(ROOT).as_posix(), number, language, line))
    return found


def _invocations(line: str) -> list[list[str]]:
    """The ``agent-meta`` invocations of one shell line (after ``&&``, ``exec``, a path)."""
    words = shlex.split(line, comments=True)
    runs: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "&", "|"):
            runs.append([])
        else:
            runs[-1].append(word)
    commands = []
    for run in runs:
        while run and (run[0] == "exec" or re.fullmatch(r"[A-Z_]+=\S*", run[0])):
            run = run[1:]
        if run and Path(run[0]).name == "agent-meta":
            commands.append(run[1:])
    return commands


def _examples() -> list[tuple[str, list[str]]]:
    """Commands of ``sh`` blocks, and the command heading a ``text`` block's shown output."""
    examples = []
    for page, number, language, line in _blocks():
        shell = language == "sh" and _COMMAND.search(line)
        heading = language == "text" and re.match(r"agent-meta [a-z]+ --", line)
        if shell or heading:
            examples += [(f"{page}:{number}", argv) for argv in _invocations(line)]
    return examples


EXAMPLES = _examples()


def test_the_docs_show_commands_to_check() -> None:
    assert len(EXAMPLES) > 15
    assert {argv[0] for _, argv in EXAMPLES} >= {"agent", "demo", "run", "check", "proxy"}


@pytest.mark.parametrize(("where", "argv"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_a_documented_command_parses(where: str, argv: list[str]) -> None:
    if argv[0] == "demo":  # the demo parses what follows it itself
        demo_parser().parse_args(argv[1:])
        return
    args = build_parser().parse_args(argv)
    if hasattr(args, "agent") and isinstance(args.agent, list):  # run, own, proxy, check
        assert args.agent, f"{where}: no agent command after --"


def _usages() -> list[tuple[str, str, str]]:
    """Every ``usage: agent-meta NAME ...`` line the docs quote: (where, name, the line)."""
    return [
        (f"{page}:{number}", line.split()[2], line.strip())
        for page, number, _language, line in _blocks()
        if line.startswith("usage: agent-meta ")
    ]


USAGES = _usages()


@pytest.mark.parametrize(("where", "name", "shown"), USAGES, ids=[u[0] for u in USAGES])
def test_a_quoted_usage_line_is_the_real_one(
    where: str, name: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # the docs quote it on one line
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    real = commands.choices[name].format_usage().strip()
    assert shown == real, f"{where} quotes {shown!r}; the real usage is {real!r}"


def test_every_install_hint_names_the_extra_of_a_checkout() -> None:
    """agent_meta is not on a package index: ``pip install 'agent-meta[X]'`` would find
    nothing, so docs and messages name a checkout (the README's Install), except where they
    say what to type once it is released on PyPI."""
    sources = [*PAGES, *sorted((ROOT / "agent_meta").rglob("*.py"))]
    wrong = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "agent-meta[" in line and "PyPI" not in line
    ]
    assert not wrong, "\n".join(wrong)


def _shown_check() -> tuple[list[str], list[str]]:
    """docs/proxy.md's ``agent-meta check`` of the broken agent: the command and the report."""
    text = (ROOT / "docs" / "proxy.md").read_text(encoding="utf-8")
    found = re.search(
        r"```sh\n(agent-meta check --prompt [^\n]+)\n```\n.*?```text\n(.*?)\n```", text, re.S
    )
    assert found, "docs/proxy.md shows no agent-meta check of a broken agent"
    report = found.group(2).replace("/path/to/agent_meta", str(ROOT))
    return shlex.split(found.group(1)), report.splitlines()


def test_the_check_of_a_broken_agent_shows_what_a_run_prints() -> None:
    """Run as the docs say, from the checkout's root: the report shown is the one printed."""
    argv, shown = _shown_check()
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", *argv[1:]],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    real = done.stdout.splitlines()
    assert real[0] == shown[0]
    assert real[-1] == shown[-1]
    body = shown[2:-1]  # one protocol's block, cut from the report
    start = real.index(body[0])
    assert real[start : start + len(body)] == body
