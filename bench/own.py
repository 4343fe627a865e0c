"""Section 10: what ``agent-meta own`` costs in front of a child agent.

- **Start-up.** Each child is started alone and under ``own``, alternately, ``starts`` times;
  each start is timed from the process's creation to the client having read the
  ``initialize`` answer, and the medians are compared. The children: the reference agent
  (``python -m agent_meta agent``), codex-acp 2.6.0 when ``integration/codex`` is installed
  (against the fake model server), and a stdlib agent that starts in a few tens of
  milliseconds (the worst case: nothing of ``own``'s own start hides behind the child's).
- **Throughput.** A stdlib child (:mod:`.own_child`) answers ``initialize`` (v2) and
  ``session/new``, then writes ``count`` session-info updates as fast as the pipe takes them,
  to a :mod:`.reader` process: straight through a pipe, through ``agent-meta proxy`` (every
  byte forwarded, nothing parsed on the way) and through ``own`` (every update a publication
  into the session's lifetime, rendered again by the owner). The time is the child's first
  update to the reader's last line; the reader folds what it got, which must be the child's
  last state. Best of ``repeats`` interleaved runs.
- **Latency.** The same child writes 1,000 updates a second, each stamped with the moment it
  was written; the reader notes when each arrived. p50 and p99 straight through a pipe and
  through ``own --no-coalesce`` (with coalescing, two updates ``own`` reads at once leave as
  one frame, and the earlier one's latency could not be seen): what ``own`` adds per frame.
  Best p50 and best p99 of ``repeats`` interleaved runs (the machine is shared).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import ROOT, Row, child_env, module_command, read_report, verdict
from .sender import SESSION_ID, patch
from .startup import INITIALIZE as INITIALIZE_V1

STARTUP_TARGET_MS = 100.0
"""The most ``own`` may add to the time to the ``initialize`` answer."""
THROUGHPUT_TARGET = 0.8
"""``own``'s throughput at least this share of ``agent-meta proxy``'s."""
LATENCY_TARGET_MS = 1.0
"""The most ``own`` may add to a frame's p99 latency at 1,000 frames a second."""
PACED_RATE = 1000.0

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
INITIALIZE["params"] = {"protocolVersion": 2, "capabilities": {}, "info": {"name": "bench"}}
NEW = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(ROOT)}}
GO = b'{"jsonrpc":"2.0","method":"_bench/go"}\n'
"""The notification that starts the child's updates, once the reader is ready."""

STDLIB_AGENT = [sys.executable, "-m", "tests.broken_agents.correct"]


def own(command: list[str], *options: str) -> list[str]:
    return [sys.executable, "-m", "agent_meta", "own", *options, "--", *command]


def proxy(command: list[str]) -> list[str]:
    return [sys.executable, "-m", "agent_meta", "proxy", "--", *command]


# --------------------------------------------------------------------------- start-up


def time_to_initialize(command: list[str], env: dict[str, str] | None) -> float:
    """Seconds from starting ``command`` to reading its answer to ``initialize``; then it is
    stopped with SIGTERM (codex-acp takes seconds to exit at the end of its input)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env or child_env()
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(INITIALIZE_V1)
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    elapsed = time.perf_counter() - started
    process.terminate()
    process.wait()
    process.stdin.close()
    process.stdout.close()
    if answer.get("id") != 1 or "result" not in answer:
        raise RuntimeError(f"{command} did not answer initialize: {answer}")
    return elapsed


def _startup_rows(starts: int) -> list[Row]:
    children: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("the reference agent", [sys.executable, "-m", "agent_meta", "agent"], None),
        ("a stdlib agent (starts in ~50 ms)", STDLIB_AGENT, None),
    ]
    out: list[Row] = []
    section = "10 own start-up"
    with _Codex() as codex:
        if codex is not None:
            children.insert(1, ("codex-acp 2.6.0", *codex))
        else:
            out.append(
                Row(section, "codex-acp 2.6.0", "not installed (npm ci in integration/codex)")
            )
        for name, command, env in children:
            alone: list[float] = []
            under: list[float] = []
            for _ in range(starts):
                alone.append(time_to_initialize(command, env=env))
                under.append(time_to_initialize(own(command), env=env))
            first, second = statistics.median(alone), statistics.median(under)
            added = (second - first) * 1000
            out.append(
                Row(section, f"{name}: alone, to its initialize answer", f"{first * 1000:.0f} ms")
            )
            out.append(Row(section, f"{name}: under agent-meta own", f"{second * 1000:.0f} ms"))
            out.append(
                Row(
                    section,
                    f"{name}: added by own",
                    f"{added:.0f} ms",
                    f"<= {STARTUP_TARGET_MS:.0f} ms",
                    verdict(added <= STARTUP_TARGET_MS),
                )
            )
    return out


class _Codex:
    """codex-acp's command and environment while its fake model server runs, if installed."""

    def __enter__(self) -> tuple[list[str], dict[str, str]] | None:
        from integration.codex import codex_command, codex_env, codex_home, codex_ready

        if codex_ready() is not None:
            self._server = None
            return None
        from integration.codex import fake_model_server

        self._tmp = tempfile.TemporaryDirectory(prefix="agent-meta-bench-codex-")
        self._server = fake_model_server()
        port = self._server.__enter__()
        home = codex_home(Path(self._tmp.name), port)
        return codex_command(), {**child_env(), **codex_env(home)}

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._tmp.cleanup()


# --------------------------------------------------------------------------- streams


def _stream(
    front: str, child_args: list[str], scratch: Path, *, latency: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the child (behind ``front``: ``direct``, ``proxy`` or ``own``) into a reader; the
    child's report and the reader's.

    This process plays the client until the session exists (``initialize``, then
    ``session/new``, each once the one before is answered); then the reader takes the rest of
    the output, and once it is ready, ``_bench/go`` starts the child's updates."""
    child_report = scratch / "child.json"
    reader_report = scratch / "reader.json"
    child = module_command("own_child", *child_args, "--report", str(child_report))
    fronts = {
        "direct": child,
        "proxy": proxy(child),
        "own": own(child),
        "own --no-coalesce": own(child, "--no-coalesce"),
    }
    command = fronts[front]
    env = child_env()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env
    )
    assert process.stdin is not None
    assert process.stdout is not None
    for request in (INITIALIZE, NEW):
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        _read_line(process.stdout.fileno())
    reading = ["--ready", *(["--latency"] if latency else [])]
    reader = subprocess.Popen(
        module_command("reader", "--report", str(reader_report), *reading),
        stdin=process.stdout,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert reader.stdout is not None
    process.stdout.close()
    reader.stdout.read(1)  # the reader is ready
    process.stdin.write(GO)
    process.stdin.flush()
    if process.wait() != 0:
        raise RuntimeError(f"the child ({front}) failed")
    process.stdin.close()
    if reader.wait() != 0:
        raise RuntimeError("the pipe reader failed")
    reader.stdout.close()
    return read_report(child_report), read_report(reader_report)


def _read_line(fd: int) -> bytes:
    """One line of ``fd``, read byte by byte (nothing after it is taken)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise RuntimeError(f"the output ended inside the opening: {line!r}")
        line += byte
    return line


def _check(front: str, received: dict[str, Any], count: int, *, paced: bool = False) -> None:
    """The last frame the reader got carries the child's last update: with one key updated
    over and over, what a client holds at the end whatever was coalesced before."""
    last = json.loads(received["last_line"])
    progress = dict(last["params"]["update"]["_meta"]["progress"])
    if paced:
        del progress["t"]
    expected = patch(count - 1, count)["progress"]
    if last["params"]["sessionId"] != SESSION_ID or progress != expected:
        raise RuntimeError(f"through {front}, the reader's last frame is {last}, not {expected}")


def _throughput_rows(count: int, repeats: int) -> list[Row]:
    best: dict[str, float] = {}
    frames: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-own-") as tmp:
        for _ in range(repeats):
            for front in ("direct", "proxy", "own"):
                sent, received = _stream(front, ["stream", str(count)], Path(tmp))
                _check(front, received, count)
                seconds = float(received["last"] - sent["t0"])
                best[front] = min(seconds, best.get(front, seconds))
                frames[front] = received["lines"]
    section = "10 own throughput"
    rate = {front: count / seconds for front, seconds in best.items()}
    share = rate["own"] / rate["proxy"]
    return [
        Row(
            section,
            f"{count:,} updates, stdlib child, direct pipe",
            f"{best['direct']:.3f} s ({rate['direct']:,.0f}/s)",
        ),
        Row(
            section, "  through agent-meta proxy", f"{best['proxy']:.3f} s ({rate['proxy']:,.0f}/s)"
        ),
        Row(
            section,
            f"  through agent-meta own ({frames['own']:,} frames after coalescing)",
            f"{best['own']:.3f} s ({rate['own']:,.0f}/s)",
        ),
        Row(
            section,
            "  own / proxy",
            f"{share:.2f}x",
            f">= {THROUGHPUT_TARGET}x",
            verdict(share >= THROUGHPUT_TARGET),
        ),
    ]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _latency_rows(count: int, repeats: int) -> list[Row]:
    figures: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-own-") as tmp:
        for _ in range(repeats):
            for front in ("direct", "own --no-coalesce"):
                _, received = _stream(
                    front, ["paced", str(count), str(PACED_RATE)], Path(tmp), latency=True
                )
                _check(front, received, count, paced=True)
                latencies = received["latencies"]
                if len(latencies) < count:
                    lost = count - len(latencies)
                    raise RuntimeError(f"through {front}, {lost} frames were lost")
                run = (_percentile(latencies, 0.5), _percentile(latencies, 0.99))
                best = figures.get(front, run)
                figures[front] = (min(best[0], run[0]), min(best[1], run[1]))
    section = "10 own latency"
    added = (figures["own --no-coalesce"][1] - figures["direct"][1]) * 1000
    return [
        Row(
            section,
            f"{count:,} updates at {PACED_RATE:,.0f}/s, direct pipe: p50 / p99",
            f"{figures['direct'][0] * 1000:.3f} / {figures['direct'][1] * 1000:.3f} ms",
        ),
        Row(
            section,
            "  through agent-meta own --no-coalesce: p50 / p99",
            f"{figures['own --no-coalesce'][0] * 1000:.3f} / "
            f"{figures['own --no-coalesce'][1] * 1000:.3f} ms",
        ),
        Row(
            section,
            "  p99 added by own",
            f"{added:.3f} ms",
            f"<= {LATENCY_TARGET_MS:.0f} ms",
            verdict(added <= LATENCY_TARGET_MS),
        ),
    ]


def rows(starts: int, count: int, repeats: int, paced: int) -> list[Row]:
    return [
        *_startup_rows(starts),
        *_throughput_rows(count, repeats),
        *_latency_rows(paced, repeats),
    ]
