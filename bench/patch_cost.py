"""Section 2: the cost of a one-key patch against how much the lifetime already holds.

A lifetime is seeded with ``stored`` keys, then ``count`` one-key patches are published with
coalescing off (each renders and "writes" its own frame, to a transport that drops it), so the
figure is the owner's whole per-update cost: validation, size checks, folding, queueing,
rendering. Best of ``repeats`` runs per size.
"""

from __future__ import annotations

import time

import trio

import agent_meta
from agent_meta import OwnerOptions

from ._common import NullTransport, Row, verdict

SIZES = (10, 1_000, 10_000)


def stored_meta(stored: int) -> dict[str, object]:
    return {f"key-{index:05d}": {"value": index, "label": "stored"} for index in range(stored)}


async def publish_cost(stored: int, count: int) -> float:
    """Seconds per one-key publication into a lifetime holding ``stored`` keys."""
    transport = NullTransport()
    async with agent_meta.open_owner(transport, OwnerOptions(coalesce=False)) as owner:
        lifetime = owner.open_lifetime(
            "patch-cost", seed=agent_meta.SessionInfoPatch(meta=stored_meta(stored))
        )
        start = time.perf_counter()
        for step in range(count):
            await lifetime.publish(meta={"hot": {"step": step}})
        await owner.wait_flushed()
        elapsed = time.perf_counter() - start
    assert transport.frames == count
    return elapsed / count


def rows(count: int, repeats: int) -> list[Row]:
    cost = dict.fromkeys(SIZES, float("inf"))
    for _ in range(repeats):  # interleaved, so that a busy moment hits every size alike
        for size in SIZES:
            cost[size] = min(cost[size], trio.run(publish_cost, size, count))
    section = "2 patch cost"
    out = [
        Row(section, f"one-key patch, {size:,} keys stored", f"{cost[size] * 1e6:.1f} us")
        for size in SIZES
    ]
    ratio = cost[SIZES[-1]] / cost[SIZES[0]]
    out.append(
        Row(
            section,
            "cost at 10,000 keys / at 10 keys",
            f"{ratio:.2f}",
            "<= 1.3",
            verdict(ratio <= 1.3),
        )
    )
    return out
