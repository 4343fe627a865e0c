"""What a connection decides about the messages it reads, before and around its handlers.

The inbound gate (``_gate``: what ACP refuses before an agent sees it, batches, ``initialize``
negotiation, the responses on their way out) and the prompts it tracks (``_turns``); the
lifetime tracker (``_tracker``) and the handler marks it keeps (``_marks``); client-set titles
(``_titles``, R13); the error a handler's exception earns (``_handler_errors``); and what only
``agent-meta own`` needs, in front of a child it did not write: the replay windows
(``_replay``), a chunk's updates composed into one publication (``_batch``) and what a v1
object means (``_v1_objects``). No I/O and no runtime, like the rest of :mod:`agent_meta.sansio`.
"""

__all__: list[str] = []
