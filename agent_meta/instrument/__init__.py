"""``agent-meta run -- AGENT_CMD``: agent_meta's owner under an unchanged agent built on the
official ACP Python SDK, for people who run such agents and cannot edit them.

Two halves, one in each process: :mod:`._supervise` is the ``agent-meta run`` process, which
starts the agent with our ``sitecustomize`` first on its path and decides the exit status from
what the agent reports; :mod:`._install`, inside the agent, puts
:func:`agent_meta.sdk.run_agent` (and its ACP v2 twins) in place of the SDK's as the agent
imports them.
"""

__all__: list[str] = []
