"""Section 3: a slow client. Producers publish far faster than the pipe is read.

``sessions`` producer tasks (one per lifetime) publish as fast as they can into one owner whose
stream is a pipe to a :mod:`.reader` process that reads 1 KiB every 2 ms (about 500 KB/s).
Coalescing must keep the queue bounded (peak queued frames <= 2 x sessions) and memory flat in
the number of publications (the run is repeated with 4 x the publications), and the client,
folding only what it received, must end exactly at every lifetime's known state.

Memory is Python's traced allocation peak (``tracemalloc``) above the level before the run.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import trio

import agent_meta

from ._common import ROOT, Row, child_env, module_command, read_report, verdict

READER_ARGS = ("--fold", "--chunk", "1024", "--pause", "0.002")


@dataclasses.dataclass
class Result:
    publications: int
    sessions: int
    frames: int
    peak_queued_frames: int
    peak_bytes: int
    seconds: float
    exact: bool


def update(step: int) -> dict[str, Any]:
    """Publication ``step`` of a producer: patches, removals and titles, all exactness-relevant."""
    meta: dict[str, Any] = {"seq": step, f"slot-{step % 4}": {"step": step}}
    if step % 7 == 0:
        meta[f"slot-{(step + 1) % 4}"] = None
    result: dict[str, Any] = {"meta": meta}
    if step % 50 == 0:
        result["title"] = f"step {step}"
    return result


async def run(sessions: int, per_session: int, scratch: Path) -> Result:
    report = scratch / "slow-reader.json"
    process = await trio.lowlevel.open_process(
        module_command("reader", "--report", str(report), *READER_ARGS),
        stdin=subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    assert process.stdin is not None
    tracemalloc.start()
    try:
        async with agent_meta.open_owner(process.stdin) as owner:
            lifetimes = [owner.open_lifetime(f"slow-{index:04d}") for index in range(sessions)]
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            start = time.perf_counter()

            async def produce(lifetime: agent_meta.SessionLifetime) -> None:
                for step in range(per_session):
                    await lifetime.publish(**update(step))

            async with trio.open_nursery() as nursery:
                for lifetime in lifetimes:
                    nursery.start_soon(produce, lifetime)
            await owner.wait_flushed()
            seconds = time.perf_counter() - start
            _, peak = tracemalloc.get_traced_memory()
            stats = owner.statistics()
            known = {
                lt.session_id: {"title": _plain(lt.snapshot().title), "meta": lt.snapshot().meta}
                for lt in lifetimes
            }
    finally:
        tracemalloc.stop()
    await process.stdin.aclose()
    await process.wait()
    received = read_report(report)["state"]
    exact = json.loads(json.dumps(known)) == received
    return Result(
        publications=stats.publications,
        sessions=sessions,
        frames=stats.frames_written,
        peak_queued_frames=stats.peak_queued_frames,
        peak_bytes=peak - base,
        seconds=seconds,
        exact=exact,
    )


def _plain(value: object) -> object:
    return value if value is None or isinstance(value, str) else "<omitted>"


def rows(sessions: int, per_session: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-") as tmp:
        small = trio.run(run, sessions, per_session, Path(tmp))
        large = trio.run(run, sessions, 4 * per_session, Path(tmp))
    section = "3 slow client"
    out: list[Row] = []
    for result in (small, large):
        label = f"{result.publications:,} publications, {result.sessions} sessions"
        bound = 2 * result.sessions
        ok = result.peak_queued_frames <= bound
        out += [
            Row(section, label, f"{result.frames:,} frames written in {result.seconds:.1f} s"),
            Row(section, "  coalescing ratio", f"{result.publications / result.frames:.1f} x"),
            Row(
                section,
                "  peak queued frames",
                str(result.peak_queued_frames),
                f"<= {bound}",
                verdict(ok),
            ),
            Row(section, "  peak traced memory", f"{result.peak_bytes / 1024:,.0f} KiB"),
            Row(
                section,
                "  client state exact",
                "yes" if result.exact else "NO",
                "",
                verdict(result.exact),
            ),
        ]
    growth = large.peak_bytes / max(small.peak_bytes, 1)
    out.append(
        Row(
            section,
            "peak memory at 4 x publications",
            f"{growth:.2f} x",
            "flat (<= 1.5 x)",
            verdict(growth <= 1.5),
        )
    )
    return out
