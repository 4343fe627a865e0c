"""The reference agents behind ``agent-meta agent``: real ACP agents built only on agent_meta's
public API, for trying an editor against every rule (:mod:`.reference_agent`, on the trio
connection) and for showing an official-SDK agent with the adapter under it
(:mod:`.sdk_agent`). :mod:`._common` is what both share (commands, history, listing).
"""

__all__: list[str] = []
