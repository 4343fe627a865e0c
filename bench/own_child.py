"""The child agent of the ``agent-meta own`` benchmark: stdlib only, blocking writes.

    python -m bench.own_child MODE COUNT [RATE] --report PATH

It answers ``initialize`` (with the version asked for) and ``session/new`` (session
``bench-session``) from stdin, waits for one more line (``_bench/go``), then writes ``COUNT``
``session_info_update`` frames for that session and exits:

- ``stream``: as fast as the pipe takes them, each the line of
  :func:`bench.sender.wire_line` (pre-encoded, one blocking ``os.write`` each);
- ``paced``: ``RATE`` frames a second, each carrying the moment it was written
  (``_meta.progress.t``, ``time.monotonic``, system-wide on Linux), for the latency of the
  frames through whatever sits between it and the reader.

The report (JSON) holds ``t0``, the moment just before the first frame.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .sender import SESSION_ID, wire_line


def write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def answer(line: bytes, result: dict[str, object]) -> None:
    request = json.loads(line)
    write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")


def paced_line(step: int, count: int) -> bytes:
    meta = {"progress": {"step": step, "of": count, "t": time.monotonic()}}
    update = {"sessionUpdate": "session_info_update", "_meta": meta}
    params = {"sessionId": SESSION_ID, "update": update}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("stream", "paced"))
    parser.add_argument("count", type=int)
    parser.add_argument("rate", type=float, nargs="?", default=1000.0)
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    stdin = sys.stdin.buffer
    initialize = stdin.readline()
    version = json.loads(initialize)["params"]["protocolVersion"]
    answer(initialize, {"protocolVersion": version, "agentCapabilities": {}})
    answer(stdin.readline(), {"sessionId": SESSION_ID})
    stdin.readline()  # _bench/go: the reader is ready
    count: int = args.count
    if args.mode == "stream":
        lines = [wire_line(step, count) for step in range(count)]
        t0 = time.monotonic()
        for line in lines:
            write(line)
    else:
        period = 1.0 / args.rate
        t0 = time.monotonic()
        for step in range(count):
            due = t0 + step * period
            while (left := due - time.monotonic()) > 0:
                time.sleep(left)
            write(paced_line(step, count))
    with open(args.report, "w") as file:
        json.dump({"t0": t0}, file)


if __name__ == "__main__":
    main()
