"""Section 4: 10,000 open lifetimes on one owner.

Memory per idle lifetime is the traced allocation growth (``tracemalloc``) of opening
``lifetimes`` lifetimes, divided by their number: first with no metadata (the owner's own
overhead), then seeded with a small metadata object (overhead plus the metadata). Session ids
are created beforehand, as an agent holds them anyway.

The resync storm then resyncs every lifetime at once (a client resuming them all) over a real
pipe to a :mod:`.reader` process: the time from the first ``resync`` call to the reader having
received the last of the ``2 x lifetimes`` frames (``_meta: null``, then the snapshot).
"""

from __future__ import annotations

import gc
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

import trio

import agent_meta

from ._common import ROOT, NullTransport, Row, child_env, module_command, read_report, verdict

SEED_META = {"agent": {"model": "model-x", "mode": "code"}, "branch": "main"}


def session_ids(count: int) -> list[str]:
    return [f"{index:08x}-5e55-4000-8000-000000000000" for index in range(count)]


async def idle_memory(count: int, seeded: bool) -> float:
    """Traced bytes per open lifetime (seeded with :data:`SEED_META` or empty)."""
    ids = session_ids(count)
    seed = agent_meta.SessionInfoPatch(title="A session", meta=SEED_META) if seeded else None
    async with agent_meta.open_owner(NullTransport()) as owner:
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            lifetimes = [owner.open_lifetime(sid, seed=seed) for sid in ids]
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(lifetimes) == count
    return (after - before) / count


def metadata_bytes() -> int:
    """What the seeded metadata itself takes as the wire text it is stored as."""
    return len(
        '{"title":"A session","_meta":{"agent":{"model":"model-x","mode":"code"},"branch":"main"}}'
    )


async def resync_storm(count: int, scratch: Path) -> tuple[float, int, int]:
    """Seconds from the first resync to the client having all frames; frames and lines seen."""
    report = scratch / "storm-reader.json"
    process = await trio.lowlevel.open_process(
        module_command("reader", "--report", str(report)),
        stdin=subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    assert process.stdin is not None
    seed = agent_meta.SessionInfoPatch(title="A session", meta=SEED_META)
    async with agent_meta.open_owner(process.stdin) as owner:
        lifetimes = [owner.open_lifetime(sid, seed=seed) for sid in session_ids(count)]
        start = time.monotonic()
        for lifetime in lifetimes:
            lifetime.resync()
        await owner.wait_flushed()
        frames = owner.statistics().frames_written
    await process.stdin.aclose()
    await process.wait()
    received = read_report(report)
    return received["last"] - start, frames, int(received["lines"])


def rows(count: int) -> list[Row]:
    empty = trio.run(idle_memory, count, False)
    seeded = trio.run(idle_memory, count, True)
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-") as tmp:
        seconds, frames, lines = trio.run(resync_storm, count, Path(tmp))
    section = "4 scale"
    return [
        Row(
            section,
            f"memory per idle lifetime ({count:,} open, no metadata)",
            f"{empty:,.0f} B",
            "<= 2 KiB",
            verdict(empty <= 2048),
        ),
        Row(
            section,
            f"  same, seeded with {metadata_bytes()} B of title and _meta",
            f"{seeded:,.0f} B",
            "<= 2 KiB + metadata",
            verdict(seeded <= 2048 + metadata_bytes()),
        ),
        Row(
            section,
            f"resync storm: {count:,} lifetimes at once",
            f"{seconds:.2f} s ({frames:,} frames)",
            "< 2 s",
            verdict(seconds < 2 and lines == frames == 2 * count),
        ),
    ]
