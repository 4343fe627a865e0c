"""The owner's send queue, sans I/O: events in, frames out. Every rule decision lives here.

A driver (trio, asyncio) calls the producer methods (:meth:`SendQueue.submit`,
:meth:`~SendQueue.resync`, :meth:`~SendQueue.submit_raw`, :meth:`~SendQueue.close_lifetime`)
and runs one writer loop: :meth:`~SendQueue.next_action` says what to do next -- write this
frame, store this batch first, or nothing (park) -- and the driver reports each outcome
(:meth:`~SendQueue.written`, :meth:`~SendQueue.lost`, :meth:`~SendQueue.stored`). A driver
decides nothing about what is sent; it moves bytes, parks and wakes tasks, and retries what the
transport proves unsent.

Where each rule is decided:

- R1 :meth:`SendQueue.submit` folds every accepted publication into the known state at once.
- R2 one FIFO (``_queue``) and one frame handed out at a time (the
  :class:`~agent_meta.sansio._cursor.FlushCursor`).
- R3 :meth:`SendQueue.submit` merges into a lifetime's *open* entry (still queued, nothing of the
  same lifetime carrying a patch queued after it); capacity counts only entries that could pile
  up without bound.
- R4 :meth:`SendQueue.resync`, rendered by :class:`~agent_meta.sansio._render.FrameRenderer`
  only when the writer takes it.
- R5/R6 :meth:`SendQueue.open_lifetime` / :meth:`SendQueue.close_lifetime`, with the
  :class:`~agent_meta.sansio._registry.LifetimeRegistry` of open and fenced lifetimes.
- R7/R8 the edits of :mod:`~agent_meta.sansio._edits`, applied inside :meth:`SendQueue.submit`.
- R9 an entry with notification ``_meta`` is never merged and closes the open entry.
- R10 :class:`~agent_meta.sansio._modes.WireMode`, chosen by :meth:`set_protocol_version`.
- R11 :meth:`SendQueue.lost` marks the lifetime for a repair resync before its next frame.
- R12 sizes checked before anything changes (``_check_sizes``, :meth:`check_frame_size`).
- R13 :meth:`SendQueue.submit` applies a :class:`~agent_meta.sansio._edits.ClientTitle` and, once
  the title is the client's, drops the ``title`` of every other publication and seed
  (:func:`~agent_meta.sansio._titles.without_title`), counted in ``suppressed_titles``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._errors import FrameTooLargeError
from ._cursor import FlushCursor
from ._durability import Durability
from ._edits import ClientTitle, Edit, Outcome, plan_edit, settle_edit
from ._encode import EncodedUpdate, encode_update
from ._entries import (
    Outgoing,
    QueueCounters,
    RawEntry,
    ResyncEntry,
    StoreBatch,
)
from ._fifo import EntryFifo
from ._modes import WireMode, wire_mode
from ._publish import Publisher
from ._records import restore_state
from ._registry import LifetimeRegistry
from ._render import FrameRenderer
from ._state import check_sizes
from ._titles import without_title
from ._writing import Writing

if TYPE_CHECKING:
    from ._options import OwnerOptions
    from ._records import StoredLifetime
    from ._state import LifetimeState

__all__ = ["SendQueue"]


class SendQueue:
    """The FIFO of one connection, with per-lifetime known state. Pure and synchronous.

    ``durable``: the owner has a lifetime store, so :meth:`next_action` hands out a
    :class:`StoreBatch` before any frame whose state is not stored yet.
    """

    def __init__(self, options: OwnerOptions, *, durable: bool = False) -> None:
        self.options = options
        self.max_frame_bytes = options.max_frame_bytes
        self.capacity = options.capacity
        self.counters = QueueCounters()
        self.lifetimes = LifetimeRegistry()
        self._cursor = FlushCursor()
        # Durability: lifetimes changed since last stored, ids to delete, batch sequence.
        self._store = Durability(durable)
        self._renderer = FrameRenderer(
            wire_mode(options.protocol_version, options.v1_meta_mode),
            self.counters,
            self._cursor,
            self._store,
        )
        self._queue = EntryFifo(self.counters, self._cursor)
        self.writing = Writing(self._queue, self._renderer, self._cursor)
        """What the writer is in the middle of (read-only outside the queue)."""
        self._publisher = Publisher(
            self._queue,
            self.writing,
            self._renderer,
            self._store,
            self.counters,
            capacity=options.capacity,
            max_frame_bytes=options.max_frame_bytes,
        )
        self.set_protocol_version(options.protocol_version)

    # -- configuration -------------------------------------------------------------------
    @property
    def protocol_version(self) -> int:
        """The connection's ACP protocol version (1 or 2)."""
        return self._protocol_version

    def set_protocol_version(self, version: int) -> None:
        """Render for ``version`` from now on; the connection sets it at ``initialize``."""
        self._protocol_version = version
        self.mode: WireMode = wire_mode(version, self.options.v1_meta_mode)
        self._renderer.mode = self.mode
        self._publisher.merging = self.options.coalesce and self.mode.merges

    def encode(self, **fields: object) -> EncodedUpdate:
        """Validate and encode a publication for this connection's mode (raises on bad input)."""
        return encode_update(**fields, offset_timestamps=self.mode.requires_offset_timestamps)

    # -- lifetimes (R5, R6) --------------------------------------------------------------
    def open_lifetime(
        self,
        session_id: str,
        seed: EncodedUpdate | None = None,
        record: StoredLifetime | None = None,
        location: str = "",
    ) -> LifetimeState:
        """Start a lifetime. ``record`` (claimed from the store at ``location``) restores a
        resumed lifetime first, with its epoch; ``seed`` is then applied as known state,
        sending nothing. With a store, a lifetime that is not restored is stored before the
        next frame (the response that names the session, say): it exists in the store before
        any client can ask another holder for it."""
        state = self.lifetimes.new(session_id)
        if record is not None:
            restore_state(state, record, location, self.max_frame_bytes)
        if seed is not None and state.client_title and seed.title is not None:
            seed = self._suppress_title(seed)  # the restored title is the client's (R13)
        if seed is not None:
            check_sizes(state, seed, self.max_frame_bytes)
        self.lifetimes.add(state)
        if seed is not None:
            state.apply(seed)
        if seed is not None or record is None:
            self._store.changed(state)
        return state

    def close_lifetime(self, state: LifetimeState) -> int:
        """End a lifetime (R6): drop its queued frames, and the rest of an entry of it being
        written. A frame already handed out is still finished and reported (a line is never
        cut). Returns the number of frames dropped."""
        if not self.lifetimes.end(state):
            return 0
        self._renderer.repairing.discard(state)
        self._store.closed(state)
        state.open_entry = None
        state.resync_entry = None
        dropped = self._queue.drop_lifetime(state)
        dropped += self.writing.end_lifetime(state)
        self.counters.fenced += dropped
        return dropped

    # -- producers -----------------------------------------------------------------------
    def has_room(self) -> bool:
        """Whether an entry that counts against capacity can be appended now."""
        return self._queue.counted < self.capacity

    def submit(self, state: LifetimeState, edit: Edit, *, express: bool = False) -> Outcome:
        """Apply one edit: compute its publication from the state now (R7, R8), fold it into
        the known state (R1) and queue it (R3).

        Returns :attr:`Outcome.FULL` having changed nothing when the publication needs room
        and there is none. Raises :class:`FrameTooLargeError` before changing anything if the
        frame or the resulting snapshot would exceed the frame limit.

        ``express``: the caller takes the next frame at once (a direct write). When nothing
        else is queued or being written, the publication is then rendered now, as the frame
        :meth:`next_action` returns next, without a queue entry: nothing could precede it or
        merge into it.
        """
        if state.closed:
            self.counters.fenced += 1
            return Outcome.FENCED
        update: EncodedUpdate | None
        if type(edit) is EncodedUpdate:  # a plain publication: the common case
            update = edit
            if state.client_title and edit.title is not None:
                update = self._suppress_title(edit)  # the title is the client's (R13)
        elif type(edit) is ClientTitle:
            return self._client_title(state, edit, express)
        else:
            planned = plan_edit(edit, state, self.options.failure_path, self.encode)
            if planned is Outcome.REFUSED:
                return planned  # a stale report or a late resolution (R7)
            update = planned
        if update is not None:
            check_sizes(state, update, self.max_frame_bytes)
            if self._publisher.publish(state, update, express=express) is Outcome.FULL:
                return Outcome.FULL
        if update is not edit and settle_edit(edit, state):
            self._store.changed(state)  # a failure change may carry no frame of its own
        return Outcome.ACCEPTED

    def seed(self, state: LifetimeState, update: EncodedUpdate) -> Outcome:
        """Make ``update``'s fields known without queuing a frame: the next resync (or, under
        v1, the next frame, which carries the whole state) tells the client. Checked as a
        publication is (R12)."""
        if state.closed:
            self.counters.fenced += 1
            return Outcome.FENCED
        if state.client_title and update.title is not None:
            suppressed = self._suppress_title(update)  # the title is the client's (R13)
            if suppressed is None:
                return Outcome.ACCEPTED
            update = suppressed
        check_sizes(state, update, self.max_frame_bytes)
        state.apply(update)
        self._store.changed(state)
        return Outcome.ACCEPTED

    def resync(self, state: LifetimeState, *, repair_only: bool = False) -> Outcome:
        """Queue a resync of one lifetime (R4): ``_meta: null``, then the snapshot at write time.

        A resync already pending for the lifetime serves this request too (its snapshot is
        taken later still). Never needs room: a lifetime has at most one pending resync.
        """
        if state.closed:
            self.counters.fenced += 1
            return Outcome.FENCED
        pending = state.resync_entry
        if isinstance(pending, ResyncEntry):
            if not repair_only:
                pending.repair_only = False
            self.counters.coalesced += 1
            return Outcome.ACCEPTED
        entry = ResyncEntry(state, repair_only, self.mode.resync_frames)
        self._queue.append(entry)
        state.resync_entry = entry
        state.open_entry = None
        return Outcome.ACCEPTED

    def check_frame_size(self, frame: bytes) -> None:
        """Raise :class:`FrameTooLargeError` if ``frame`` is over the limit (R12)."""
        if len(frame) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"frame of {len(frame)} bytes exceeds the limit of {self.max_frame_bytes} bytes"
            )

    def submit_raw(self, frame: bytes, session_id: str | None = None) -> Outcome:
        """Queue any other frame (a response, a request, another notification); it counts
        against capacity. :attr:`Outcome.FULL` (nothing queued) when there is no room.

        ``session_id``: the session a notification or a request belongs to (its
        ``params.sessionId``). Once that session's lifetime has ended, nothing more of it is
        written, whatever its kind (R6): :attr:`Outcome.FENCED`, counted. What was queued before
        the close still goes out, in order (the final updates of cancelled work precede the
        ``session/close`` response).
        """
        self.check_frame_size(frame)
        if session_id is not None and self.lifetimes.fenced(session_id):
            self.counters.fenced += 1
            return Outcome.FENCED
        if not self.has_room():
            return Outcome.FULL
        self._queue.append(RawEntry(frame))
        return Outcome.ACCEPTED

    # -- the writer ----------------------------------------------------------------------
    def next_action(self) -> Outgoing | StoreBatch | None:
        """What the writer does next: write a frame, store a batch first, or nothing (park).

        Report each :class:`Outgoing` (:meth:`written`, :meth:`lost` or :meth:`dropped`) and
        each :class:`StoreBatch` (:meth:`stored`) before asking again. A frame is handed out
        before the batch that stores its state, and again once that batch is stored.
        """
        store = self._store
        if store.batch is not None:
            raise RuntimeError("report the store batch handed out before asking again")
        while True:
            writing = self.writing
            out = writing.held
            writing.held = None
            if out is None:
                out = writing.next_frame()
                if out is not None and store.enabled:
                    out.stored_by = store.target()  # the changes it was rendered from
            else:
                self._cursor.unreported = True
            if out is None:
                # Nothing to write: store what changed, so that a flush completes.
                return store.take() if store.pending else None
            if store.stored < out.stored_by:
                # Persist before write (docs/durability.md). Changes made after the frame was
                # rendered wait for the next batch: under a stream of publications, waiting
                # for all of them would hold every frame back.
                writing.held = out
                return store.take()
            lifetime = out.lifetime
            if lifetime is not None and lifetime.closed and not out.sent:
                self.dropped(out)  # it ended while its state was being stored (R6)
                continue
            return out

    def hold(self, out: Outgoing) -> None:
        """``out`` was written in part (``out.sent`` bytes): :meth:`next_action` hands out the
        rest before anything else."""
        self.writing.held = out

    def written(self, out: Outgoing) -> None:
        """The writer reports that ``out`` was written whole."""
        counters = self.counters
        counters.frames_written += 1
        counters.bytes_written += len(out.frame)
        self._cursor.reported(self.writing.held is not None)

    def dropped(self, out: Outgoing) -> None:
        """The writer reports that it dropped ``out`` unwritten, its lifetime having ended (R6)."""
        self.counters.fenced += 1
        self._reported()

    def still_wanted(self, out: Outgoing) -> bool:
        """Whether ``out`` (not yet begun) should still be written; if its lifetime ended (say,
        during a retry's backoff) it is reported dropped here (R6)."""
        lifetime = out.lifetime
        if lifetime is not None and lifetime.closed:
            self.dropped(out)
            return False
        return True

    def lost(self, out: Outgoing) -> None:
        """The writer reports that ``out`` was not (or may not have been) delivered (R11).

        Its lifetime is marked for repair: a resync goes out before that lifetime's next frame,
        and one is queued in case no other frame follows. The rest of the entry is dropped.
        """
        self.counters.write_failures += 1
        self._reported()
        lifetime = out.lifetime
        if lifetime is None or lifetime.closed:
            return
        lifetime.needs_repair = True
        self._store.changed(lifetime)
        writing = self.writing
        if writing.entry is not None and writing.entry.lifetime is lifetime:
            writing.finish()
        if not self.mode.repairs:
            return  # pass-through sends no resync frames, so there is no repair either
        self._renderer.repairing.add(lifetime)
        self.resync(lifetime, repair_only=True)

    def stored(self, batch: StoreBatch, stale: frozenset[str] = frozenset()) -> list[LifetimeState]:
        """The writer reports that ``batch`` is durably stored, except for the lifetimes of the
        session ids in ``stale``: another holder took them over (their stored epoch moved on).
        Each of those ends here, as a close does (R6: nothing more of it is written, its queued
        frames are dropped), except that its record is left to the new holder; the lifetimes
        that ended so are returned."""
        self._store.done(batch, stale)
        if not stale:
            return []
        taken: list[LifetimeState] = []
        for state in batch.states:
            if state.session_id in stale and not state.taken_over:
                taken.append(state)
                self.take_over(state)
        return taken

    def take_over(self, state: LifetimeState) -> None:
        """Another holder has ``state``'s lifetime now: end it here without touching its
        record (see :meth:`stored`)."""
        state.taken_over = True
        self._store.forget(state)
        if self.lifetimes.end(state):
            self.counters.taken_over += 1
            self._renderer.repairing.discard(state)
            state.open_entry = None
            state.resync_entry = None
            dropped = self._queue.drop_lifetime(state)
            dropped += self.writing.end_lifetime(state)
            self.counters.fenced += dropped

    # -- flushing ------------------------------------------------------------------------
    def flush_target(self) -> tuple[int, int]:
        """What "flushed" means for a caller now: every entry queued so far written (or
        dropped), and every change accepted so far stored (see :meth:`is_flushed`)."""
        return self._cursor.appended, self._store.target()

    def durable_target(self) -> int:
        """The store batch that holds every change accepted so far (see :meth:`is_durable`)."""
        return self._store.target()

    def is_durable(self, target: int) -> bool:
        """Whether the batch ``target`` (from :meth:`durable_target`) is stored."""
        return self._store.stored >= target

    def is_flushed(self, target: tuple[int, int]) -> bool:
        """Whether ``target`` (from :meth:`flush_target`) is reached, and every client view
        damaged by a lost frame has been repaired since."""
        position, batches = target
        if self._renderer.repairing or self._cursor.unreported or self.writing.held is not None:
            return False
        if self._store.stored < batches:
            return False
        return self._cursor.reached(position, not self._queue.entries and not self.writing.busy)

    @property
    def idle(self) -> bool:
        """Nothing queued, held or being written: :meth:`next_action` would return ``None``
        (with a store, it may still have a batch to hand out)."""
        return self.writing.idle

    @property
    def position(self) -> int:
        """The position of the newest entry."""
        return self._cursor.appended

    @property
    def queued_entries(self) -> int:
        """Entries waiting, including one being written."""
        in_flight = self.writing.busy or self._cursor.unreported
        return len(self._queue) + (1 if in_flight else 0)

    @property
    def queued_frames(self) -> int:
        """Frames still queued, at most (a frame being written is no longer counted)."""
        return self._queue.frames

    @property
    def store_batches(self) -> int:
        """Store batches reported stored."""
        return self._store.stored

    # -- internals: producers ------------------------------------------------------------
    def _client_title(self, state: LifetimeState, edit: ClientTitle, express: bool) -> Outcome:
        """The client set ``state``'s title (R13): its confirmation is queued (a publication:
        :attr:`Outcome.FULL`, having changed nothing, when it needs room and there is none),
        or, without ``confirm``, it only becomes known (a resync tells the client if it
        differs from what was known). Either way the title is the client's from now on."""
        update = edit.update
        check_sizes(state, update, self.max_frame_bytes)
        if edit.confirm:
            if self._publisher.publish(state, update, express=express) is Outcome.FULL:
                return Outcome.FULL
        elif state.title != update.title:
            state.apply(update)
            self.resync(state)
        state.client_title = True
        self._store.changed(state)
        return Outcome.ACCEPTED

    def _suppress_title(self, update: EncodedUpdate) -> EncodedUpdate | None:
        """``update`` without the title the agent gave it, counted (R13)."""
        self.counters.suppressed_titles += 1
        return without_title(update)

    # -- internals: the writer -----------------------------------------------------------
    def _reported(self) -> None:
        self._cursor.reported(self.writing.held is not None)
