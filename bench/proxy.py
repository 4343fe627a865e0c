"""Section 5: what ``agent-meta proxy`` adds to a stream over a pipe.

The same stream (``count`` session-info updates from :mod:`.sender`) goes to a :mod:`.reader`
process twice, side by side in one run: straight through a pipe, and through
``agent-meta proxy -- <sender>`` (the proxy's stdout is the reader's stdin). The time is the
sender's first update to the reader's last line, so the proxy's own start-up is not counted.
Kinds, runs and repeats interleave; the best run of each counts.

- ``owner``: the sender is agent_meta's owner (``coalesce=False``), a real agent's pace; the
  target is that the proxy adds at most 10 %.
- ``raw-os``: pre-encoded lines with blocking writes, far faster than any agent: what the
  proxy can carry at most (no target).
- ``owner`` with ``--log``: the same, also writing the NDJSON log (no target).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ._common import Row, module_command, pipe_to_reader, verdict
from .sender import wire_line

TARGET = 0.10
"""The most the proxy may add to the end-to-end time of the ``owner`` stream."""


def run_once(kind: str, count: int, scratch: Path, *, proxy: str | None) -> float:
    """Seconds for one stream; ``proxy``: ``None`` (direct), ``""`` or a log path (``--log``).

    Raises ``RuntimeError`` when the reader did not get exactly the lines that were sent.
    """
    sender_report = scratch / "sender.json"
    reader_report = scratch / "reader.json"
    command = module_command("sender", kind, str(count), "--report", str(sender_report))
    if proxy is not None:
        log = ["--log", proxy] if proxy else []
        command = [sys.executable, "-m", "agent_meta", "proxy", *log, "--", *command]
    what = f"the {kind} sender (proxy: {proxy is not None})"
    sent, received = pipe_to_reader(command, sender_report, reader_report, what)
    last = received["last_line"].encode() + b"\n"
    if received["lines"] != count or last != wire_line(count - 1, count):
        raise RuntimeError(f"the {kind} stream (proxy: {proxy is not None}) arrived changed")
    return float(received["last"] - sent["t0"])


def measure(count: int, repeats: int) -> dict[tuple[str, str], float]:
    """The best time of each (kind, mode) over ``repeats`` interleaved rounds."""
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-proxy-") as tmp:
        scratch = Path(tmp)
        modes = {"direct": None, "proxy": "", "proxy --log": str(scratch / "log.ndjson")}
        for _ in range(repeats):
            for kind in ("owner", "raw-os"):
                for mode, proxy in modes.items():
                    if kind == "raw-os" and mode == "proxy --log":
                        continue
                    seconds = run_once(kind, count, scratch, proxy=proxy)
                    key = (kind, mode)
                    best[key] = min(seconds, best.get(key, seconds))
    return best


def rows(count: int, repeats: int) -> list[Row]:
    runs = measure(count, repeats)
    section = "5 proxy overhead"
    out: list[Row] = []
    for kind, label in (("owner", "owner sender"), ("raw-os", "raw os.write sender")):
        direct = runs[(kind, "direct")]
        rate = f"{direct:.3f} s ({count / direct:,.0f} frames/s)"
        out.append(Row(section, f"{count:,} frames, {label}, direct pipe", rate))
        modes = ("proxy", "proxy --log") if kind == "owner" else ("proxy",)
        for mode in modes:
            added = runs[(kind, mode)] / direct - 1
            value = f"{runs[(kind, mode)]:.3f} s, {added:+.1%}"
            if (kind, mode) == ("owner", "proxy"):
                target = f"<= {TARGET:.0%}"
                out.append(
                    Row(
                        section,
                        f"  through agent-meta {mode}",
                        value,
                        target,
                        verdict(added <= TARGET),
                    )
                )
            else:
                out.append(Row(section, f"  through agent-meta {mode}", value))
    return out
