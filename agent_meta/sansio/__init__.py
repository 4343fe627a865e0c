"""Layer 2, sans-IO: the owner's send queue and per-lifetime state, where every rule R1-R12 is
decided, synchronously (events in, frames out; see ``docs/architecture.md``).

No I/O and no runtime, like :mod:`agent_meta.core`. The drivers in :mod:`agent_meta.owner` only
move its frames, park and wake tasks, retry and talk to the store.
"""

__all__: list[str] = []
