"""The client-side tools, for anyone who runs or writes an ACP client or agent: ``agent-meta
proxy`` (watch any agent's session info and report the rules it breaks), ``check`` (drive an
agent through load, resume and close and judge it), and ``timeline`` (render a proxy's log).

They take the client's side, so they use the wire, the core, the line splitter and the
client's fold (:class:`~agent_meta.testing.ClientMirror`), nothing agent-side: not the owner,
the stores, the connections, the SDK adapter, the agents or ``agent-meta own``
(:mod:`agent_meta.own`, the owner in front of an agent), an import contract.
"""

__all__: list[str] = []
