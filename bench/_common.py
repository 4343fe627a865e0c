"""Shared helpers: where the repository is, child-process commands, the result table."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: children run from here so they import this tree's ``agent_meta``."""


def child_env() -> dict[str, str]:
    """The environment for child processes: this tree first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def module_command(module: str, *args: str) -> list[str]:
    """``python -m bench.<module> args...`` with this interpreter."""
    return [sys.executable, "-m", f"bench.{module}", *args]


def read_report(path: Path) -> dict[str, Any]:
    """The JSON report a child process wrote."""
    with path.open() as file:
        report: dict[str, Any] = json.load(file)
    return report


def pipe_to_reader(
    sender: list[str], sender_report: Path, reader_report: Path, what: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the ``sender`` command with its stdout piped into a ``reader`` process, to the end;
    their two reports. ``what`` names the sender in the ``RuntimeError`` raised if it fails.

    The sender's stdin is a pipe that nothing is written to (the SDK connects a read pipe to
    stdin) and that is closed once it exits.
    """
    env = child_env()
    reader = subprocess.Popen(
        module_command("reader", "--report", str(reader_report)),
        stdin=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert reader.stdin is not None
    process = subprocess.Popen(
        sender, stdin=subprocess.PIPE, stdout=reader.stdin, cwd=ROOT, env=env
    )
    reader.stdin.close()
    if process.wait() != 0:
        raise RuntimeError(f"{what} failed")
    assert process.stdin is not None
    process.stdin.close()
    if reader.wait() != 0:
        raise RuntimeError("the pipe reader failed")
    return read_report(sender_report), read_report(reader_report)


class NullTransport:
    """A transport that drops every frame after a checkpoint, as a fast stream would.

    Used where the cost of the owner itself is measured, without any pipe in the way.
    """

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0

    async def send_frame(self, frame: bytes) -> None:
        self.frames += 1
        self.bytes += len(frame)
        await trio.lowlevel.checkpoint()


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: a figure, its unit, and what it is checked against."""

    section: str
    name: str
    value: str
    target: str = ""
    verdict: str = ""


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def render_table(rows: list[Row]) -> str:
    """A plain-text table (also valid Markdown, so docs/performance.md can hold it as is)."""
    header = ("section", "figure", "value", "target", "")
    cells = [header, *((r.section, r.name, r.value, r.target, r.verdict) for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in cells[1:])])


def machine() -> str:
    """CPU model, core count and Python build, for the record."""
    model = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for text in out.splitlines():
        if text.startswith("Model name:"):
            model = text.split(":", 1)[1].strip()
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; " + (
        "Python " + sys.version.replace("\n", " ")
    )
