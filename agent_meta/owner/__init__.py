"""Layer 3, owner: the runtime drivers over the sans-IO queue (trio today), the handles agents
hold (:class:`~agent_meta.SessionLifetime`), the transport seam and the lifetime stores.
"""

__all__: list[str] = []
