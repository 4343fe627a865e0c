"""Command-line tools built on agent_meta: ``agent-meta proxy``, ``check`` and ``timeline``.

They see any ACP agent from the client's side: what a client ends up holding for each session's
``_meta``, and which of the rules a client can observe the agent keeps. They use only
agent_meta's public API.
"""
