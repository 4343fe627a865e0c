"""Layer 3, stores: where session lifetimes outlive a connection.

The :class:`~agent_meta.LifetimeStore` contract (claims fenced by a holder and an epoch), the
in-memory store, SQLite (one machine, many processes) and PostgreSQL (replicas), and
:func:`~agent_meta.open_store`, which picks one by URL. Their blocking drivers run in worker
threads of either runtime; nothing here imports trio or asyncio at module level.
"""

__all__: list[str] = []
