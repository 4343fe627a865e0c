"""Layer 4, owner: the runtime drivers over the sans-IO queue (trio's
:class:`~agent_meta.MetaOwner`, asyncio's :class:`~agent_meta.AsyncioMetaOwner`), what they share
without a runtime, the handles agents hold (:class:`~agent_meta.SessionLifetime`) and the
transport seam.
"""

__all__: list[str] = []
