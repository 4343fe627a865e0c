"""``agent-meta own``: agent_meta's owner in front of any stdio ACP agent, in any language (a
product, beside ``agent-meta run``, which also wraps an agent agent_meta did not write).

The command is an ACP agent on its own stdio that runs ``AGENT_CMD`` as its child and forwards
everything between the client and the child, byte for byte, except the session info: the
child's ``session_info_update`` frames become publications into the session lifetimes of a
trio owner over stdout (one FIFO to the client), so R1 to R13 hold whatever the child does.

- :mod:`._command`: the command line; the child is started before anything heavy is imported
  (start-up is the child's, not ours);
- :mod:`._child`: the child process (its pipes, its exit, the signals passed on);
- :mod:`._relay`: what happens to each message, both ways (:class:`._relay.Relay`);
- :mod:`._serve`: the I/O: the two pumps, the owner, the store, signals and the end.

The decisions that are not I/O live below: the connection shell every connection answers
through (:mod:`agent_meta.owner._shell`), the replay windows
(:mod:`agent_meta.sansio.inbound._replay`), the composition of a chunk's updates
(:mod:`agent_meta.sansio.inbound._batch`), what a v1 object means
(:mod:`agent_meta.sansio.inbound._v1_objects`) and the envelope rule
(:mod:`agent_meta.core._envelope`).
"""

__all__: list[str] = []
