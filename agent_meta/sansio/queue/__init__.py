"""The send queue (:class:`~agent_meta.sansio.queue._queue.SendQueue`) and its parts.

The owner's state machine, h11-style: producers submit publications, edits, resyncs and raw
frames; the writer task asks ``next_action()`` and reports how each frame went. Each part is a
module of its own that owns its state and changes nothing else (``docs/architecture.md``, the
table of the send queue's parts): the lifetimes and their fence (``_registry``), the positions
of entries (``_cursor``), the queued entries (``_fifo``, ``_entries``), the entry being written
(``_writing``), the rendering of frames (``_render``), coalescing (``_publish``), what must be
stored first (``_durability``, ``_records``), the edit rules (``_edits``), and the known state
of each lifetime (``_state``). No I/O and no runtime, like the rest of :mod:`agent_meta.sansio`.
"""

__all__: list[str] = []
