"""``agent-meta agent``: the reference agents, real ACP agents built only on agent_meta's public
API, and the command that serves them.

- :mod:`.reference_agent`: the agent on agent_meta's trio connection, for trying an editor
  against every rule;
- :mod:`.sdk_agent`: the same agent on the official SDK with the adapter under it (and, with
  ``--listen``, for remote clients over WebSocket and streamable HTTP);
- :mod:`._common`: what both share (the prompt-line commands, history, listing, replay);
- :mod:`._command`: the command line (``add_parser``: the options, the usage errors of their
  combinations, the owner options they make);
- :mod:`._serve`: the serving, on trio, on the SDK over stdio or listening, until the client or
  a signal ends it.

All of it uses the public API only, but for the few private imports the import contract names.
"""

__all__: list[str] = []
