"""``python -m bench [--smoke]``: run every section and print one table.

Timing targets are reported (``ok`` / ``MISSED``), never enforced: the exit status is non-zero
only when a correctness check fails (a client state that is not exact, a lost frame).
"""

from __future__ import annotations

import argparse
import sys
import time

from . import (
    callgrind,
    own,
    patch_cost,
    proxy,
    scale,
    slow_client,
    startup,
    stores,
    takeover,
    throughput,
)
from ._common import Row, machine, render_table

FULL = {
    "updates": 50_000,
    "repeats": 3,
    "patches": 5_000,
    "sessions": 100,
    "per_session": 200,
    "lifetimes": 10_000,
    "proxy_repeats": 5,  # a shared machine's noise swamps a 10 % difference in fewer runs
    "starts": 15,
    "instructions_small": 2_000,
    "instructions_large": 6_000,
    "store_sessions": 100,
    "store_per_session": 20,
    "store_publications": 3_000,
    "store_lifetimes": 2_000,
    "takeovers": 15,
    "own_starts": 9,
    "own_updates": 50_000,
    "own_paced": 3_000,
}
SMOKE = {
    "updates": 500,
    "repeats": 1,
    "patches": 200,
    "sessions": 10,
    "per_session": 50,
    "lifetimes": 500,
    "proxy_repeats": 1,
    "starts": 1,
    "instructions_small": 100,
    "instructions_large": 300,
    "store_sessions": 10,
    "store_per_session": 3,
    "store_publications": 100,
    "store_lifetimes": 50,
    "takeovers": 1,
    "own_starts": 1,
    "own_updates": 500,
    "own_paced": 100,
}

EVERY = (
    "throughput",
    "patch",
    "slow",
    "scale",
    "proxy",
    "startup",
    "instructions",
    "stores",
    "takeover",
    "own",
)
"""The sections a run without ``--only`` runs (``sdk`` repeats what ``throughput`` has)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks the suite runs")
    parser.add_argument(
        "--only",
        choices=("sdk", *EVERY),
        action="append",
        help="sections (default: all but sdk, whose figures throughput has too; nox -s "
        "bench_sdk runs sdk on several SDK releases)",
    )
    args = parser.parse_args(argv)
    size = SMOKE if args.smoke else FULL
    only = set(args.only or EVERY)
    started = time.monotonic()
    rows: list[Row] = []
    if "throughput" in only:
        rows += throughput.rows(size["updates"], size["repeats"])
    if "sdk" in only:
        rows += throughput.sdk_rows(size["updates"], size["repeats"])
    if "patch" in only:
        rows += patch_cost.rows(size["patches"], size["repeats"])
    if "slow" in only:
        rows += slow_client.rows(size["sessions"], size["per_session"])
    if "scale" in only:
        rows += scale.rows(size["lifetimes"])
    if "proxy" in only:
        rows += proxy.rows(size["updates"], size["proxy_repeats"])
    if "startup" in only:
        rows += startup.rows(size["starts"])
    if "instructions" in only:
        rows += callgrind.rows(
            size["instructions_small"], size["instructions_large"], measure=not args.smoke
        )
    if "stores" in only:
        rows += stores.rows(
            size["store_sessions"],
            size["store_per_session"],
            size["store_publications"],
            size["store_lifetimes"],
        )
    if "takeover" in only:
        rows += takeover.rows(size["takeovers"])
    if "own" in only:
        rows += own.rows(
            size["own_starts"], size["own_updates"], size["proxy_repeats"], size["own_paced"]
        )
    print(render_table(rows))
    print()
    print(f"machine: {machine()}")
    mode = "smoke" if args.smoke else "full"
    command = " ".join(["python -m bench", *sys.argv[1:]])
    print(f"{mode} run in {time.monotonic() - started:.0f} s: {command}")
    broken = [row for row in rows if row.verdict == "MISSED" and not row.target]
    for row in broken:
        print(f"correctness check failed: {row.section} / {row.name}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
