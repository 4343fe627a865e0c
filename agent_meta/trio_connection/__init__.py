"""Layer 5, the trio connection: the agent side of an ACP connection (NDJSON JSON-RPC over trio
streams, stdio by default), for agents written on agent_meta itself. Every frame it sends goes
through its owner; what it answers before a handler runs is the sans-IO inbound gate's decision,
as for the official-SDK adapter beside it (:mod:`agent_meta.sdk`).
"""

__all__: list[str] = []
