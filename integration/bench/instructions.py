"""Publish N one-key patches to ``/dev/null`` through the trio owner, for instruction counts.

Run it under ``valgrind --tool=callgrind`` with two counts and take the difference, which
leaves out start-up and imports::

    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m integration.bench.instructions 2000
    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m integration.bench.instructions 6000

(instructions per update = difference of the two totals / 4000). Instruction counts do not
depend on what else the machine is doing, so they compare two versions of the code where
throughput runs are too noisy to.
"""

from __future__ import annotations

import os
import sys

import trio

import agent_meta


def patch(step: int, count: int) -> dict[str, object]:
    return {"progress": {"step": step, "of": count}, "pad": "x" * 40}


async def publish(count: int) -> None:
    stream = trio.lowlevel.FdStream(os.open(os.devnull, os.O_WRONLY))
    options = agent_meta.OwnerOptions(coalesce=False)
    async with agent_meta.open_owner(stream, options) as owner:
        lifetime = owner.open_lifetime("bench-session")
        for step in range(count):
            await lifetime.publish(meta=patch(step, count))
    await stream.aclose()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    trio.run(publish, count)


if __name__ == "__main__":
    main()
