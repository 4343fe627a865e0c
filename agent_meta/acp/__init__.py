"""Layer 4, acp: the agent side of an ACP connection (NDJSON JSON-RPC over trio streams), which
sends every frame through its owner.
"""

__all__: list[str] = []
