"""``agent-meta demo``: the reference agent as a real subprocess, driven step by step by the
official ACP clients (the Python SDK under v1, the TypeScript SDK under v2), printing what the
client sent, every frame it received and what it holds. For people deciding whether to use
agent_meta.
"""

__all__: list[str] = []
