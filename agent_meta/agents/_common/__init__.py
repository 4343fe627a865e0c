"""What the two reference agents share (the trio one in :mod:`agent_meta.agents.reference_agent`,
the official-SDK one in :mod:`agent_meta.agents.sdk_agent`): the prompt-line grammar, the replies,
``session/list`` pages, replay, the steps that restore and close a session, and the SQLite
history. Built on the public API only, like the
agents (an import-linter contract checks it)."""

__all__: list[str] = []
