"""Section 1: publish throughput to a real pipe read by a separate process.

Both owners are measured: the trio one against raw trio writes (a/c) and the asyncio one
against raw asyncio writes of the same bytes (d/e), each next to the official SDK (b); and the
SDK itself with agent_meta's adapter under it (f/b).

Each run starts a :mod:`.reader` process and a :mod:`.sender` process whose stdout is the
reader's stdin, so the agent side and the client side each have their own interpreter (and,
on a 2-core machine, their own core). Updates per second are ``count`` divided by the time
from the sender's first update to the reader having received the last line. The kinds run
interleaved, ``repeats`` times, and the best run of each kind is kept.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

from ._common import Row, module_command, pipe_to_reader, verdict
from .sender import KINDS, wire_line


@dataclasses.dataclass
class Run:
    kind: str
    count: int
    seconds: float
    frames: int
    lines: int
    exact: bool

    @property
    def rate(self) -> float:
        return self.count / self.seconds


def run_once(kind: str, count: int, scratch: Path) -> Run:
    sender_report = scratch / f"sender-{kind}.json"
    reader_report = scratch / f"reader-{kind}.json"
    command = module_command("sender", kind, str(count), "--report", str(sender_report))
    sent, received = pipe_to_reader(command, sender_report, reader_report, f"the {kind} sender")
    # Every kind must end with the same last update (the SDK orders members differently).
    last = json.loads(received["last_line"])["params"]
    expected = json.loads(wire_line(count - 1, count))["params"]
    return Run(
        kind=kind,
        count=count,
        seconds=received["last"] - sent["t0"],
        frames=int(sent["frames"]),
        lines=int(received["lines"]),
        exact=last == expected and received["lines"] == sent["frames"],
    )


def measure(count: int, repeats: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Run]:
    best: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="agent-meta-bench-") as tmp:
        for _ in range(repeats):
            for kind in kinds:
                run = run_once(kind, count, Path(tmp))
                if kind not in best or run.rate > best[kind].rate:
                    best[kind] = run
    return best


def rows(count: int, repeats: int) -> list[Row]:
    runs = measure(count, repeats)
    owner, sdk, raw = runs["owner"], runs["sdk"], runs["raw"]
    section = "1 throughput"
    labels = {
        "owner": "(a) agent_meta owner, coalesce=False",
        "sdk": "(b) official Python SDK session_update",
        "raw": "(c) raw NDJSON, trio send_all per frame",
        "raw-os": "(c') raw NDJSON, blocking os.write per frame",
        "owner-asyncio": "(d) agent_meta asyncio owner, coalesce=False",
        "raw-asyncio": "(e) raw NDJSON, asyncio write + drain per frame",
        "sdk-adapter": "(f) official SDK session_update, agent_meta adapter under it",
    }
    out = [
        Row(section, label, f"{runs[kind].rate:,.0f} updates/s", "", verdict(runs[kind].exact))
        for kind, label in labels.items()
    ]
    ratio_b = owner.rate / sdk.rate
    ratio_c = owner.rate / raw.rate
    out.append(Row(section, "ratio a/b", f"{ratio_b:.2f}", ">= 1.5", verdict(ratio_b >= 1.5)))
    out.append(Row(section, "ratio a/c", f"{ratio_c:.2f}", ">= 0.5", verdict(ratio_c >= 0.5)))
    out.append(Row(section, "ratio a/c'", f"{owner.rate / runs['raw-os'].rate:.2f}"))
    ratio_e = runs["owner-asyncio"].rate / runs["raw-asyncio"].rate
    out.append(Row(section, "ratio d/e", f"{ratio_e:.2f}", ">= 0.5", verdict(ratio_e >= 0.5)))
    out.append(Row(section, "ratio d/b", f"{runs['owner-asyncio'].rate / sdk.rate:.2f}"))
    ratio_f = runs["sdk-adapter"].rate / sdk.rate
    out.append(Row(section, "ratio f/b", f"{ratio_f:.2f}", ">= 0.8", verdict(ratio_f >= 0.8)))
    for kind, label in (
        ("owner-coalesce", "(a) with coalescing on"),
        ("owner-asyncio-coalesce", "(d) with coalescing on"),
    ):
        co = runs[kind]
        out.append(
            Row(
                section,
                label,
                f"{co.rate:,.0f} updates/s, {co.frames:,} frames for {co.count:,} updates",
                "",
                verdict(co.exact),
            )
        )
    return out


def sdk_rows(count: int, repeats: int) -> list[Row]:
    """(b) and (f) alone, on whichever SDK release is installed: ``nox -s bench_sdk`` runs it
    on the oldest, 0.12.1 and the newest, each in its own venv."""
    from agent_meta.sdk._release import installed_release

    release = installed_release()
    runs = measure(count, repeats, ("sdk", "sdk-adapter"))
    section = f"1b SDK {release.version} ({release.seam})"
    out = [
        Row(section, "(b) official SDK session_update", f"{runs['sdk'].rate:,.0f} updates/s"),
        Row(
            section,
            "(f) the same, agent_meta adapter under it",
            f"{runs['sdk-adapter'].rate:,.0f} updates/s",
            "",
            verdict(runs["sdk-adapter"].exact and runs["sdk"].exact),
        ),
    ]
    ratio = runs["sdk-adapter"].rate / runs["sdk"].rate
    out.append(Row(section, "ratio f/b", f"{ratio:.2f}", ">= 0.8", verdict(ratio >= 0.8)))
    return out
