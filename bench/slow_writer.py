"""Benchmark: a writer 100x slower than its producers (issue 3's measurement).

Producers publish ``--publications`` one-key patches spread over ``--sessions`` lifetimes as fast
as they can, while every frame takes the writer 100 times as long as one publication takes a
producer. Coalescing must keep the queue bounded by the number of sessions (R3), and a client
fed only the frames written must end exactly at the agent's known state.

Run: ``python -m bench.slow_writer`` (``--smoke`` for a quick run). Prints figures; exits
non-zero only if the mirror is not exact or the queue bound is broken.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc

import trio

import agent_meta
from agent_meta.testing import ClientMirror


class SlowWriter:
    """A transport whose every frame costs ``delay`` seconds of real time."""

    def __init__(self, delay: float, mirror: ClientMirror) -> None:
        self.delay = delay
        self.mirror = mirror
        self.frames = 0

    async def send_frame(self, frame: bytes) -> None:
        await trio.sleep(self.delay)
        self.mirror.feed(frame)
        self.frames += 1


async def publish_cost(samples: int = 5_000) -> float:
    """Seconds one producer spends per publication when the writer is never in the way."""

    class Sink:
        async def send_frame(self, frame: bytes) -> None:
            await trio.lowlevel.checkpoint()

    async with agent_meta.open_owner(Sink()) as owner:
        lifetime = owner.open_lifetime("calibrate")
        start = time.perf_counter()
        for i in range(samples):
            await lifetime.publish(meta={f"k{i % 10}": i})
        return (time.perf_counter() - start) / samples


async def run(sessions: int, publications: int, slowdown: float) -> int:
    cost = await publish_cost()
    delay = cost * slowdown
    mirror = ClientMirror(protocol_version=2)
    writer = SlowWriter(delay, mirror)
    rng = random.Random(7)
    per_session = publications // sessions

    tracemalloc.start()
    started = time.perf_counter()
    async with agent_meta.open_owner(writer) as owner:
        lifetimes = [owner.open_lifetime(f"s{i}") for i in range(sessions)]

        async def producer(lifetime: agent_meta.SessionLifetime) -> None:
            for n in range(per_session):
                key = f"k{rng.randrange(8)}"
                if rng.random() < 0.05:
                    await lifetime.publish(meta={key: None})  # removals must survive merging
                else:
                    await lifetime.publish(meta={key: n}, title=f"t{n % 3}")

        async with trio.open_nursery() as nursery:
            for lifetime in lifetimes:
                nursery.start_soon(producer, lifetime)
        produced = time.perf_counter() - started
        _, peak_publishing = tracemalloc.get_traced_memory()
        await owner.wait_flushed()
        drained = time.perf_counter() - started
        stats = owner.statistics()
        exact = all(mirror.info(lt.session_id) == lt.snapshot() for lt in lifetimes)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    accepted = stats.publications
    rows = [
        ("sessions", f"{sessions:,}"),
        ("publications accepted", f"{accepted:,}"),
        ("producer cost per publication", f"{cost * 1e6:.1f} us"),
        ("writer cost per frame", f"{delay * 1e6:.0f} us ({slowdown:.0f}x)"),
        ("frames written", f"{stats.frames_written:,}"),
        ("coalescing ratio (publications per frame)", f"{accepted / stats.frames_written:.1f}"),
        ("publications merged into queued frames", f"{stats.coalesced:,}"),
        (
            "peak queued frames",
            f"{stats.peak_queued_frames:,} (bound 2 x sessions = {2 * sessions:,})",
        ),
        ("peak traced memory while publishing", f"{peak_publishing / 2**20:.2f} MiB"),
        ("peak traced memory overall", f"{peak / 2**20:.2f} MiB"),
        ("time to publish all / to drain", f"{produced:.2f} s / {drained:.2f} s"),
        ("client mirror equals agent state", "yes" if exact else "NO"),
    ]
    width = max(len(name) for name, _ in rows)
    print("agent_meta owner under a slow writer")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    bounded = stats.peak_queued_frames <= 2 * sessions
    if not exact or not bounded:
        print(
            "FAILED: "
            + ("mirror not exact " if not exact else "")
            + ("queue unbounded" if not bounded else "")
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--publications", type=int, default=100_000)
    parser.add_argument("--slowdown", type=float, default=100.0)
    parser.add_argument("--smoke", action="store_true", help="10 sessions, 5,000 publications")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sessions, args.publications = 10, 5_000
    return trio.run(run, args.sessions, args.publications, args.slowdown)


if __name__ == "__main__":
    sys.exit(main())
