"""``agent-meta demo``: the reference agent as a real subprocess, driven step by step by the
official ACP clients (the Python SDK under v1, the TypeScript SDK under v2), printing what the
client sent, every frame it received and what it holds. For people deciding whether to use
agent_meta.

:mod:`._command` registers the command and runs the demo (or says which extra it needs);
:mod:`._main` is the demo, with its own arguments; :mod:`._story` its steps, :mod:`._print` the
printing, :mod:`._v2` the v2 part and :mod:`._node` the Node.js client.
"""

__all__: list[str] = []
