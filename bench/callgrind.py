"""Section 7: instructions per update, under callgrind, against each runtime's floor.

Each kind of :mod:`.instructions` (the trio owner, the asyncio owner, and their floors: the
same frame as a dict, ``json.dumps``, one ``os.write``, and on trio one
``trio.lowlevel.checkpoint()``) runs under ``valgrind --tool=callgrind`` twice, with ``small``
and ``large`` updates; the difference of the two totals divided by the difference of the counts
is what one update costs, start-up and imports left out. Instruction counts are the same
whatever else the machine does, so the ratios compare code, not load. Skipped (with the
reason) where valgrind is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ._common import ROOT, Row, child_env, module_command, verdict
from .instructions import KINDS

TARGET = 1.2
"""Each owner's instructions per update, at most this many times its runtime's floor."""

FLOORS = {"trio": "trio-floor", "asyncio": "floor"}
"""The floor each owner is measured against: what any agent on that runtime pays."""

_TOTAL = re.compile(rb"^summary:\s+(\d+)", re.MULTILINE)


def instructions(kind: str, count: int, scratch: Path) -> int:
    """Instructions the whole ``instructions KIND COUNT`` process executes."""
    out = scratch / f"callgrind.{kind}.{count}"
    env = child_env()
    env["PYTHONHASHSEED"] = "0"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        *module_command("instructions", kind, str(count)),
    ]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    found = _TOTAL.search(out.read_bytes())
    if found is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(found.group(1))


def per_update(kind: str, small: int, large: int) -> float:
    with tempfile.TemporaryDirectory(prefix="agent-meta-callgrind-") as tmp:
        low = instructions(kind, small, Path(tmp))
        high = instructions(kind, large, Path(tmp))
    return (high - low) / (large - small)


def rows(small: int, large: int, *, measure: bool = True) -> list[Row]:
    """The section's rows. Without ``measure`` (``--smoke``) each kind runs once, plainly: the
    programs still work and write the same bytes, but nothing is counted (eight runs under
    valgrind take minutes, which a smoke run is not for)."""
    section = "7 instructions per update (callgrind)"
    if not measure:
        for kind in KINDS:
            subprocess.run(
                module_command("instructions", kind, str(small)),
                cwd=ROOT,
                env=child_env(),
                check=True,
                capture_output=True,
            )
        return [Row(section, "not measured by --smoke", f"{len(KINDS)} kinds ran")]
    if shutil.which("valgrind") is None:
        return [Row(section, "skipped", "valgrind is not installed (Debian: valgrind)")]
    cost = {kind: per_update(kind, small, large) for kind in KINDS}
    out = [
        Row(section, "floor: dict, json.dumps, os.write", f"{cost['floor']:,.0f}"),
        Row(section, "trio floor: the floor, and one checkpoint()", f"{cost['trio-floor']:,.0f}"),
        Row(section, "trio owner, coalesce=False", f"{cost['trio']:,.0f}"),
        Row(section, "asyncio owner, coalesce=False", f"{cost['asyncio']:,.0f}"),
    ]
    for kind, floor in FLOORS.items():
        ratio = cost[kind] / cost[floor]
        out.append(
            Row(
                section,
                f"ratio {kind} owner/{floor}",
                f"{ratio:.2f}",
                f"<= {TARGET}",
                verdict(ratio <= TARGET),
            )
        )
    return out
