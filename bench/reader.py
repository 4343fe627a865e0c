"""The client end of a benchmark pipe: a separate process that reads NDJSON from stdin.

It counts lines and bytes and notes (``time.monotonic``, system-wide on Linux) when the last
line arrived, then writes a JSON report to ``--report``. ``--fold`` also folds every frame with
:class:`agent_meta.testing.ClientMirror` and reports each session's final state, for exactness
checks. ``--chunk``/``--pause`` make it a slow client: it reads at most ``chunk`` bytes, then
sleeps ``pause`` seconds, before every read. ``--ready`` writes one byte on stdout once it
reads (after its imports). ``--latency`` reports, for every frame carrying
the moment it was written (``_meta.progress.t``), how long it took to arrive (``latencies``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--fold", action="store_true")
    parser.add_argument("--chunk", type=int, default=1 << 20)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--ready", action="store_true", help="write one byte on stdout when ready")
    args = parser.parse_args()
    latencies: list[float] = []
    partial = b""

    mirror = None
    if args.fold:
        from agent_meta.testing import ClientMirror

        mirror = ClientMirror(protocol_version=2)
    if args.ready:
        os.write(1, b"r")
    lines = 0
    size = 0
    first = last = 0.0
    tail = b""
    while True:
        if args.pause:
            time.sleep(args.pause)
        data = os.read(0, args.chunk)
        if not data:
            break
        size += len(data)
        newlines = data.count(b"\n")
        if newlines:
            last = time.monotonic()
            if not lines:
                first = last
            lines += newlines
        tail = (tail + data)[-65536:]
        if mirror is not None:
            mirror.feed_bytes(data)
        if args.latency:
            *complete, partial = (partial + data).split(b"\n")
            latencies.extend(_latency(line, last) for line in complete if b'"t":' in line)
    report: dict[str, Any] = {
        "lines": lines,
        "bytes": size,
        "first": first,
        "last": last,
        "last_line": tail.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode(),
    }
    if args.latency:
        report["latencies"] = latencies
    if mirror is not None:
        report["state"] = {
            sid: {"title": _plain(mirror.info(sid).title), "meta": mirror.meta(sid)}
            for sid in mirror.session_ids
        }
    with open(args.report, "w") as file:
        json.dump(report, file)


def _latency(line: bytes, arrived: float) -> float:
    """How long the frame ``line`` took from its writer to here."""
    sent: float = json.loads(line)["params"]["update"]["_meta"]["progress"]["t"]
    return arrived - sent


def _plain(value: object) -> object:
    return value if value is None or isinstance(value, str) else "<omitted>"


if __name__ == "__main__":
    main()
