"""The benchmark suite keeps working: CI runs it with tiny counts (timings are not checked)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio

import agent_meta
from agent_meta import OwnerOptions
from agent_meta.testing import ClientMirror

from . import instructions
from ._common import ROOT, Row, child_env, module_command, render_table
from .sender import SESSION_ID, patch, wire_line

if TYPE_CHECKING:
    from pathlib import Path


class _Recorder:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    async def send_frame(self, frame: bytes) -> None:
        self.frames.append(frame)


def test_the_raw_baseline_writes_the_owners_bytes() -> None:
    """(c) is like for like: the pre-encoded lines are exactly what the owner writes."""

    async def main() -> list[bytes]:
        recorder = _Recorder()
        async with agent_meta.open_owner(recorder, OwnerOptions(coalesce=False)) as owner:
            lifetime = owner.open_lifetime(SESSION_ID)
            for step in range(3):
                await lifetime.publish(meta=patch(step, 3))
        return recorder.frames

    assert trio.run(main) == [wire_line(step, 3) for step in range(3)]
    mirror = ClientMirror()
    mirror.feed(wire_line(2, 3))
    assert mirror.meta(SESSION_ID) == patch(2, 3)


def test_the_raw_asyncio_baseline_writes_the_asyncio_owners_bytes() -> None:
    """(e) is like for like with (d): the asyncio owner writes the same pre-encoded lines."""

    async def main() -> list[bytes]:
        recorder = _Recorder()
        async with agent_meta.open_asyncio_owner(recorder, OwnerOptions(coalesce=False)) as owner:
            lifetime = owner.open_lifetime(SESSION_ID)
            for step in range(3):
                await lifetime.publish(meta=patch(step, 3))
        return recorder.frames

    assert asyncio.run(main()) == [wire_line(step, 3) for step in range(3)]


def test_every_instructions_kind_writes_the_same_bytes(tmp_path: Path) -> None:
    """Section 7 is like for like: both owners and both floors write the same frames for the
    same updates, so the instructions per update compare the same work."""
    written = {}
    for kind in instructions.KINDS:
        fifo = tmp_path / kind  # a pipe, as asyncio's pipe transport requires
        os.mkfifo(fifo)
        command = module_command("instructions", kind, "5", str(fifo))
        with subprocess.Popen(command, cwd=ROOT, env=child_env()) as child:
            written[kind] = fifo.read_bytes()
        assert child.returncode == 0
    assert all(frames == written["floor"] for frames in written.values()), written
    lines = written["floor"].splitlines(keepends=True)
    assert len(lines) == 5
    mirror = ClientMirror()
    for line in lines:
        mirror.feed(line)
    assert mirror.meta(instructions.SESSION_ID) == instructions.patch(4, 5)


def test_render_table_aligns_columns() -> None:
    table = render_table([Row("s", "figure", "1 x", "<= 2", "ok"), Row("s", "f", "10 x")])
    lines = table.splitlines()
    assert len(lines) == 4
    assert len({len(line) for line in lines}) == 1


SECTIONS = {
    "throughput": ("1 throughput",),
    "patch": ("2 patch cost",),
    "slow": ("3 slow client",),
    "scale": ("4 scale",),
    "proxy": ("5 proxy overhead",),
    "startup": ("6 agent-meta run start-up",),
    "instructions": ("7 instructions per update",),
    "stores": ("8 stores",),
    "takeover": ("9 takeover",),
    "own": ("10 own start-up", "10 own throughput", "10 own latency"),
}
"""Each ``--only`` section and the rows it must print. One test each, so that the workers
share them (the whole smoke run takes a minute or more on one)."""


@pytest.mark.parametrize("section", list(SECTIONS))
def test_each_section_runs_with_tiny_counts(section: str) -> None:
    result = subprocess.run(
        module_command("__main__", "--smoke", "--only", section),
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang: a section takes seconds, more on a loaded machine
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    for label in SECTIONS[section]:
        assert any(row[2:].startswith(label) for row in rows), (label, result.stdout)
    assert "machine:" in result.stdout
    assert "NO" not in result.stdout.split()  # every client state exact


def test_every_section_is_smoked() -> None:
    from .__main__ import EVERY

    assert set(SECTIONS) == set(EVERY)
