"""Layer 2, sans-IO: where every rule R1-R13 is decided, synchronously (events in, frames out;
see ``docs/architecture.md``).

In layers of its own (an import-linter contract):

- :mod:`agent_meta.sansio.queue`: the owner's send queue and its parts, the known state of
  each lifetime and the queue's bookkeeping of it;
- :mod:`agent_meta.sansio.inbound`: what a connection decides about what it reads (the inbound
  gate, the lifetime tracker and its handler marks, running prompts, client-set titles, the
  error a handler's exception earns) and what ``agent-meta own`` decides in front of a child
  (replay windows, publication batches, v1 objects);
- what both use, here: the update encoder (``_encode``), the JSON-RPC frames other than session
  info (``_frames``), the line splitter (``_lines``, the client-side tools' too), the owner's
  options (``_options``) and the R10 table (``_modes``);
- the leaves (``_json_text``: the JSON text of values and members, ``NULL``), which import
  nothing of this package.

No I/O and no runtime, like :mod:`agent_meta.core`. The drivers in :mod:`agent_meta.owner` only
move its frames, park and wake tasks, retry and talk to the store.
"""

__all__: list[str] = []
