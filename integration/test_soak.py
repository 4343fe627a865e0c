"""A bounded soak: several sessions, random operations, restarts, zero divergence, flat memory.

A raw NDJSON client (ACP v2) drives ``python -m agent_meta agent`` over real pipes and folds
every frame with :class:`ClientMirror`. It checks two things all the time:

- after every ``session/list`` response, each open session's folded client state equals the
  snapshot the agent lists (checked only while no ``/burst`` runs: a burst may publish after
  the listing was taken but before its response found queue room), and
- at every ``session/resume`` of a live lifetime, and after every restart, the state the client
  held before the resync equals the resync snapshot (``_meta: null``, then the known state).

Restarts alternate between a clean stop (stdin closed) and SIGKILL. The agent runs with
``--store``, so each new process restores the sessions from the SQLite file and is resumed.
Sessions are also closed and reopened (a fresh lifetime) along the way. The agent's RSS
(``/proc/PID/status`` VmRSS) is sampled over time; figures are printed and only a generous
bound is asserted.

``AGENT_META_SOAK_SECONDS`` sets the duration (default 20 s; keep it <= 60 s in CI).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from agent_meta.testing import ClientMirror
from integration.harness import REPO, agent_command, agent_env

SECONDS = float(os.environ.get("AGENT_META_SOAK_SECONDS") or 20)
SESSIONS = 4
RESTARTS = 3
KEYS = ["a", "b", "ext", "agent-meta", "zed.dev/x"]
MiB = 1024 * 1024
pytestmark = pytest.mark.slow


def _rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _slope(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in bytes per second."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (r - mean_r) for t, r in samples) / var


class Figures:
    def __init__(self) -> None:
        self.operations = 0
        self.requests = 0
        self.frames = 0
        self.restarts = 0
        self.resumes = 0
        self.checks = 0
        self.divergences: list[str] = []
        self.epochs: list[list[tuple[float, int]]] = []


class Agent:
    """One agent process and the raw client talking to it."""

    def __init__(self, process: trio.Process, figures: Figures) -> None:
        self.process = process
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.figures = figures
        self.buffer = b""
        self.ids = 0

    async def frame(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.figures.frames += 1
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(
        self, mirror: ClientMirror, method: str, params: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Send a request; fold every frame until its response; return (frames, response)."""
        self.ids += 1
        request_id = self.ids
        line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.stdin.send_all(json.dumps(line).encode() + b"\n")
        self.figures.requests += 1
        frames: list[dict[str, Any]] = []
        while True:
            frame = await self.frame()
            assert frame is not None, f"the agent's output ended before the {method} response"
            mirror.feed(frame)
            if "method" not in frame and frame.get("id") == request_id:
                assert "error" not in frame, (method, params, frame)
                if method == "session/prompt":  # v2 answers at once: read on to the turn's end
                    frames += await self._until_turn_ends(mirror, params["sessionId"])
                return frames, frame
            frames.append(frame)

    async def _until_turn_ends(self, mirror: ClientMirror, sid: str) -> list[dict[str, Any]]:
        """Fold frames up to the idle ``state_update`` (with a stop reason) of ``sid``."""
        frames: list[dict[str, Any]] = []
        while True:
            frame = await self.frame()
            assert frame is not None, "the agent's output ended inside a turn"
            mirror.feed(frame)
            frames.append(frame)
            update = frame.get("params", {}).get("update", {}) if "method" in frame else {}
            if frame.get("params", {}).get("sessionId") == sid and "stopReason" in update:
                return frames


def _resync_snapshot(frames: list[dict[str, Any]], sid: str) -> tuple[Any, Any]:
    """(meta, title) restored by the last ``_meta: null`` of ``sid`` and the frame after it."""
    infos = [
        f["params"]["update"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"].get("sessionUpdate") == "session_info_update"
    ]
    starts = [i for i, u in enumerate(infos) if "_meta" in u and u["_meta"] is None]
    assert starts, f"no resync of {sid} before the resume response"
    after = infos[starts[-1] + 1 : starts[-1] + 2]
    meta = after[0].get("_meta") if after else None
    title = after[0].get("title", "<unknown>") if after else "<unknown>"
    return meta or None, title


def _random_command(rng: random.Random) -> str:
    key = rng.choice(KEYS)
    value = rng.choice([1, "x", [1, None], {"n": rng.randint(0, 9), "z": None}, True])
    return rng.choice(
        [
            f"/meta set {key} {json.dumps(value)}",
            f"/meta rm {key}",
            f"/meta patch {json.dumps({key: value, rng.choice(KEYS): None})}",
            "/meta clear",
            f"/title t{rng.randint(0, 99)}",
            "/title",
            f"/domain set ext p.{rng.choice('qr')} {rng.randint(0, 9)}",
            f"/domain rm ext p.{rng.choice('qr')}",
            f"/fail inc-{rng.randint(1, 2)} {rng.randint(0, 3)} broken",
            f"/resolve inc-{rng.randint(1, 2)} {rng.randint(0, 3)}",
            "plain text, echoed",
        ]
    )


async def _check_listing(
    agent: Agent, mirror: ClientMirror, open_ids: set[str], f: Figures, *, racing: bool = False
) -> Any:
    _frames, response = await agent.request(mirror, "session/list", {})
    listing = {s["sessionId"]: s for s in response["result"]["sessions"]}
    if racing:
        # A burst may publish after the handler took the listing but before its response
        # found queue room, so the client can be ahead: no comparison while one runs.
        return listing
    for sid in open_ids:
        entry = listing[sid]
        f.checks += 1
        held = mirror.info(sid)
        if (held.meta or None) != entry.get("_meta"):
            f.divergences.append(
                f"list {sid}: client {held.meta!r} != agent {entry.get('_meta')!r}"
            )
        if "title" in entry and held.title != entry["title"]:
            f.divergences.append(f"list {sid}: title {held.title!r} != {entry['title']!r}")
    return listing


async def _resume_and_compare(agent: Agent, mirror: ClientMirror, sid: str, f: Figures) -> None:
    held = mirror.info(sid)
    frames, _ = await agent.request(mirror, "session/resume", {"sessionId": sid, "cwd": str(REPO)})
    f.resumes += 1
    f.checks += 1
    meta, title = _resync_snapshot(frames, sid)
    if (held.meta or None) != meta:
        f.divergences.append(f"resume {sid}: client {held.meta!r} != snapshot {meta!r}")
    if title != "<unknown>" and held.title != title:
        f.divergences.append(f"resume {sid}: title {held.title!r} != snapshot {title!r}")


async def _soak(store: Path, f: Figures) -> None:
    rng = random.Random(int(os.environ.get("AGENT_META_SOAK_SEED") or 5))
    extra = ("--store", str(store))
    env = {**os.environ, **agent_env()}
    epoch_seconds = SECONDS / (RESTARTS + 1)
    mirror = ClientMirror(protocol_version=2)
    session_ids: list[str] = []
    for epoch in range(RESTARTS + 1):
        process = await trio.lowlevel.open_process(
            [*agent_command(*extra)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(REPO),
        )
        agent = Agent(process, f)
        samples: list[tuple[float, int]] = []
        f.epochs.append(samples)
        async with trio.open_nursery() as nursery:

            async def sample(
                pid: int = process.pid, into: list[tuple[float, int]] = samples
            ) -> None:
                start = time.monotonic()
                while True:
                    rss = _rss(pid)
                    if rss is not None:
                        into.append((time.monotonic() - start, rss))
                    await trio.sleep(0.1)

            await agent.request(mirror, "initialize", {"protocolVersion": 2})
            if session_ids:
                for sid in session_ids:  # restored from the store: the resync must match
                    await _resume_and_compare(agent, mirror, sid, f)
            else:
                session_ids = []
                for _ in range(SESSIONS):
                    _, response = await agent.request(mirror, "session/new", {"cwd": str(REPO)})
                    session_ids.append(response["result"]["sessionId"])
            open_ids = set(session_ids)
            nursery.start_soon(sample)  # after start-up, so "first" is a warm process
            deadline = time.monotonic() + epoch_seconds
            while time.monotonic() < deadline:
                sid = rng.choice(session_ids)
                roll = rng.random()
                f.operations += 1
                if sid not in open_ids:
                    await agent.request(mirror, "session/resume", {"sessionId": sid, "cwd": "/"})
                    open_ids.add(sid)  # a fresh lifetime: the client may keep a stale title
                elif roll < 0.70:
                    lines = [_random_command(rng) for _ in range(rng.randint(1, 4))]
                    text = "\n".join(lines)
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
                    await agent.request(mirror, "session/prompt", prompt)
                elif roll < 0.78:
                    count = rng.randint(10, 200)
                    prompt = {
                        "sessionId": sid,
                        # The removal first, so that burst == count means this burst ended.
                        "prompt": [
                            {"type": "text", "text": f"/meta rm burst\n/burst {count} burst"}
                        ],
                    }
                    await agent.request(mirror, "session/prompt", prompt)
                    # Listing races the burst (always valid); wait until it has finished.
                    for _ in range(10_000):
                        listing = await _check_listing(agent, mirror, open_ids, f, racing=True)
                        if listing[sid].get("_meta", {}).get("burst") == count:
                            break
                    await _check_listing(agent, mirror, open_ids, f)
                elif roll < 0.90:
                    await _resume_and_compare(agent, mirror, sid, f)
                elif roll < 0.95:
                    await agent.request(mirror, "session/close", {"sessionId": sid})
                    open_ids.discard(sid)
                else:
                    await _check_listing(agent, mirror, open_ids, f)
            for sid in session_ids:  # live lifetimes again before the restart
                if sid not in open_ids:
                    await agent.request(mirror, "session/resume", {"sessionId": sid, "cwd": "/"})
            open_ids = set(session_ids)
            await _check_listing(agent, mirror, open_ids, f)
            if epoch < RESTARTS:
                f.restarts += 1
            if epoch % 2 == 1:
                process.send_signal(signal.SIGKILL)
            else:
                await agent.stdin.aclose()
            with trio.fail_after(30):
                while await agent.frame() is not None:
                    pass
                await process.wait()
            nursery.cancel_scope.cancel()
        await agent.stdin.aclose()  # idempotent
        await agent.stdout.aclose()


def test_soak_zero_divergence_and_flat_memory(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    store = tmp_path / "soak.sqlite3"
    figures = Figures()
    trio.run(_soak_bounded, store, figures)
    lines = [
        f"soak: {SECONDS:.0f} s, {SESSIONS} sessions, store=yes: "
        f"{figures.operations:,} operations, {figures.requests:,} requests, "
        f"{figures.frames:,} frames, {figures.restarts} restarts, {figures.resumes} resumes, "
        f"{figures.checks:,} state checks, {len(figures.divergences)} divergences"
    ]
    for index, samples in enumerate(figures.epochs):
        if not samples:
            continue
        rss = [r for _, r in samples]
        lines.append(
            f"soak: agent process {index + 1}: RSS first {rss[0] / MiB:.1f} MiB, "
            f"peak {max(rss) / MiB:.1f} MiB, last {rss[-1] / MiB:.1f} MiB, "
            f"slope {_slope(samples) / 1024:+.1f} KiB/s over {samples[-1][0]:.1f} s "
            f"({len(samples)} samples)"
        )
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():  # shown without -s, in the CI log
            reporter.ensure_newline()
            for line in lines:
                reporter.write_line(line)
    else:  # pragma: no cover - plugins disabled
        print("\n".join(lines), file=sys.stderr)
    assert figures.divergences == [], figures.divergences[:10]
    assert figures.restarts == RESTARTS
    for samples in figures.epochs:
        if len(samples) >= 2:
            first, last = samples[0][1], samples[-1][1]
            assert last <= first * 1.5 + 20 * MiB, (first, last)


async def _soak_bounded(store: Path, figures: Figures) -> None:
    with trio.fail_after(SECONDS + 120):  # a hang guard, not a timing assertion
        await _soak(store, figures)
