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
- R2 one FIFO (the :class:`~agent_meta.sansio.queue._fifo.EntryFifo`) and one frame held or out at a
  time (:class:`~agent_meta.sansio.queue._writing.Writing`), positions in the
  :class:`~agent_meta.sansio.queue._cursor.FlushCursor`.
- R3 :meth:`SendQueue.submit` merges into a lifetime's *open* entry (still queued, nothing of the
  same lifetime carrying a patch queued after it), as the
  :class:`~agent_meta.sansio.queue._publish.Publisher` decides; capacity counts only entries that
  could pile up without bound.
- R4 :meth:`SendQueue.resync`, rendered by :class:`~agent_meta.sansio.queue._render.FrameRenderer`
  only when the writer takes it.
- R5/R6 :meth:`SendQueue.open_lifetime` / :meth:`SendQueue.close_lifetime`, with the
  :class:`~agent_meta.sansio.queue._registry.LifetimeRegistry` of open and fenced lifetimes: the
  fence begins at the close (what was queued before it is written, in order; every call
  after it is refused); a takeover drops what was queued.
- R7/R8 the edits of :mod:`~agent_meta.sansio.queue._edits`, applied inside
  :meth:`SendQueue.submit`.
- R9 an entry with notification ``_meta`` is never merged and closes the open entry.
- R10 :class:`~agent_meta.sansio._modes.WireMode`, chosen by :meth:`set_protocol_version`.
- R11 :meth:`SendQueue.lost` marks the lifetime for a repair resync before its next frame.
- R12 sizes checked before anything changes (``check_sizes``, :meth:`check_frame_size`).
- R13 :meth:`SendQueue.submit` applies a :class:`~agent_meta.sansio.queue._edits.ClientTitle` and,
  once the title is the client's, drops the ``title`` of every other publication and seed
  (:func:`~agent_meta.sansio.inbound._titles.without_title`), counted in ``suppressed_titles``.

The parts are classes of their own, as h11 keeps ``ConnectionState`` apart from
``Connection``: each owns its state and changes nothing else, and none holds another. The
queue alone calls them and carries what one part decides over to the others.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, final

from ...core._errors import FrameTooLargeError
from .._encode import EncodedUpdate, encode_update
from .._modes import WireMode, wire_mode
from ..inbound._titles import without_title
from ._cursor import FlushCursor
from ._durability import Durability
from ._edits import (
    ACCEPTED,
    FENCED,
    FULL,
    REFUSED,
    ClientTitle,
    Edit,
    Outcome,
    plan_edit,
    settle_edit,
)
from ._entries import InfoEntry, RawEntry, ResyncEntry, StoreBatch
from ._fifo import EntryFifo
from ._info_frames import publication_frame
from ._publish import Publisher
from ._records import restore_state
from ._registry import LifetimeRegistry
from ._render import FrameRenderer
from ._state import check_sizes
from ._writing import Writing

if TYPE_CHECKING:
    from .._options import OwnerOptions
    from ._entries import Entry
    from ._records import StoredLifetime
    from ._state import LifetimeState

__all__ = ["QueueStatistics", "SendQueue"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class QueueStatistics:
    """What one send queue has done so far (see :meth:`SendQueue.statistics`)."""

    publications: int
    """Session-info publications accepted."""
    coalesced: int
    """Publications and resyncs merged into an entry already queued, or carried by a
    snapshot written before their own entry came up."""
    fenced: int
    """Calls refused because their lifetime had ended (R6), and queued frames dropped because
    another holder took their lifetime over. A close drops nothing: what a lifetime queued
    before its close is written."""
    frames_written: int
    bytes_written: int
    write_failures: int
    """Frames reported lost (R11)."""
    resyncs: int
    """Resyncs rendered (requested ones and repairs)."""
    repairs: int
    """Repairs rendered after a lost frame."""
    taken_over: int
    """Lifetimes another holder took over."""
    peak_queued_frames: int
    """The most frames ever queued at once."""
    suppressed_titles: int
    """Titles dropped from the agent's publications and seeds: the title is the client's (R13)."""


class SendQueue:
    """The FIFO of one connection, with per-lifetime known state. Pure and synchronous.

    ``durable``: the owner has a lifetime store, so :meth:`next_action` hands out a
    :class:`StoreBatch` before any frame whose state is not stored yet.
    """

    def __init__(self, options: OwnerOptions, *, durable: bool = False) -> None:
        self.options = options
        self.max_frame_bytes = options.max_frame_bytes
        self.capacity = options.capacity
        self.lifetimes = LifetimeRegistry()
        self._cursor = FlushCursor()
        self._fifo = EntryFifo()
        self._writing = Writing()
        self._store = Durability(durable)
        self._renderer = FrameRenderer(wire_mode(options.protocol_version, options.v1_meta_mode))
        self._publisher = Publisher(options.max_frame_bytes)
        # What the queue itself counts (the parts count their own: see statistics()).
        self._publications = 0
        self._resyncs_served = 0  # resync requests a pending resync served
        self._fenced = 0
        self._frames_written = 0
        self._bytes_written = 0
        self._write_failures = 0
        self._taken_over = 0
        self._suppressed_titles = 0
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
            state.books.needs_repair = record.needs_repair
            self._store.restored(state, record)
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

    def close_lifetime(self, state: LifetimeState) -> None:
        """End a lifetime (R6): the fence begins here. Every call about it from now on is
        refused (:attr:`Outcome.FENCED`, counted), and no frame of it is queued any more;
        what it had queued before still goes out, in order (R2), as it was queued: a merged
        publication still open to merges, a resync pending or in flight (its snapshot is the
        state at the close, which nothing changes after it), a repair it owed. With a store,
        its record is deleted before any frame queued after the close is written."""
        if self.lifetimes.end(state):
            self._store.closed(state)

    def take_over(self, state: LifetimeState) -> None:
        """Another holder has ``state``'s lifetime now: end it here without touching its
        record (see :meth:`stored`), and drop what it still had queued, closed or not: the
        state those frames show may not be stored, and the lifetime is the other holder's."""
        if state.books.taken_over:
            return
        state.books.taken_over = True
        self._store.forget(state)
        self.lifetimes.end(state)
        self._taken_over += 1
        self._drop_lifetime(state)

    # -- producers -----------------------------------------------------------------------
    def has_room(self) -> bool:
        """Whether an entry that counts against capacity can be appended now."""
        return self._fifo.counted < self.capacity

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
        if state.books.closed:
            self._fenced += 1
            return FENCED
        update: EncodedUpdate | None
        if type(edit) is EncodedUpdate:  # a plain publication: the common case
            update = edit
            if state.client_title and edit.title is not None:
                update = self._suppress_title(edit)  # the title is the client's (R13)
        elif type(edit) is ClientTitle:
            return self._client_title(state, edit, express)
        else:
            planned = plan_edit(edit, state, self.options.failure_path, self.encode)
            if planned is REFUSED:
                return planned  # a stale report or a late resolution (R7)
            update = planned
        if update is not None:
            check_sizes(state, update, self.max_frame_bytes)
            expressed = express and self._express(state, update)
            if not expressed and self._publish(state, update) is FULL:
                return FULL
        if update is not edit and settle_edit(edit, state):
            self._store.changed(state)  # a failure change may carry no frame of its own
        return ACCEPTED

    def seed(self, state: LifetimeState, update: EncodedUpdate) -> Outcome:
        """Make ``update``'s fields known without queuing a frame: the next resync (or, under
        v1, the next frame, which carries the whole state) tells the client. Checked as a
        publication is (R12)."""
        if state.books.closed:
            self._fenced += 1
            return FENCED
        if state.client_title and update.title is not None:
            suppressed = self._suppress_title(update)  # the title is the client's (R13)
            if suppressed is None:
                return ACCEPTED
            update = suppressed
        check_sizes(state, update, self.max_frame_bytes)
        state.apply(update)
        self._store.changed(state)
        return ACCEPTED

    def resync(self, state: LifetimeState, *, repair_only: bool = False) -> Outcome:
        """Queue a resync of one lifetime (R4): ``_meta: null``, then the snapshot at write time.

        A resync already pending for the lifetime serves this request too (its snapshot is
        taken later still). Never needs room: a lifetime has at most one pending resync.
        """
        if state.books.closed:
            self._fenced += 1
            return FENCED
        pending = state.books.resync_entry
        if isinstance(pending, ResyncEntry):
            if not repair_only:
                pending.repair_only = False
            self._resyncs_served += 1
            return ACCEPTED
        entry = ResyncEntry(state, repair_only, self.mode.resync_frames)
        self._append(entry)
        state.books.resync_entry = entry
        state.books.open_entry = None
        return ACCEPTED

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
            self._fenced += 1
            return FENCED
        if self._fifo.counted >= self.capacity:
            return FULL
        self._append(RawEntry(frame))
        return ACCEPTED

    # -- the writer ----------------------------------------------------------------------
    def next_action(self) -> bytes | StoreBatch | None:
        """What the writer does next: write these bytes, store a batch first, or nothing (park).

        The bytes are one frame, or the rest of one written in part. Report each (with
        :meth:`written`, :meth:`hold` or :meth:`lost`, or let :meth:`still_wanted` drop it) and
        each :class:`StoreBatch` (:meth:`stored`) before asking again. A frame waits for the
        batch that stores its state, and is handed out once that batch is stored.
        """
        store = self._store
        writing = self._writing
        if store.batch is not None:
            raise RuntimeError("report the store batch handed out before asking again")
        if writing.out:
            raise RuntimeError("report the frame handed out before asking again")
        while True:
            if writing.frame is None and not self._next_frame():
                # Nothing to write: store what changed, so that a flush completes.
                return store.take() if store.pending else None
            if store.stored < writing.stored_by:
                # Persist before write (docs/durability.md). Changes made after the frame was
                # rendered wait for the next batch: under a stream of publications, waiting
                # for all of them would hold every frame back.
                return store.take()
            lifetime = writing.lifetime
            if lifetime is not None and lifetime.books.taken_over and not writing.sent:
                self._dropped()  # taken over while its state was being stored
                continue
            return writing.hand_out()

    def hold(self, sent: int) -> None:
        """The frame handed out was written in part, ``sent`` bytes more of it: :meth:`next_action`
        hands out the rest before anything else (R2)."""
        self._writing.wrote_part(sent)

    def written(self) -> None:
        """The writer reports that the frame handed out was written whole."""
        frame = self._writing.frame
        if frame is None or not self._writing.out:
            raise RuntimeError("no frame is handed out")
        self._frames_written += 1
        self._bytes_written += len(frame)
        self._writing.release()

    def still_wanted(self) -> bool:
        """Whether the frame handed out (and not begun: a retry after the transport proved it
        unsent) should still be written; if another holder took its lifetime over (say,
        during the retry's backoff) it is reported dropped here. A close does not drop it:
        it was queued before the close (R6)."""
        lifetime = self._writing.lifetime
        if lifetime is not None and lifetime.books.taken_over:
            self._dropped()
            return False
        return True

    def lost(self) -> str | None:
        """The writer reports that the frame handed out was not (or may not have been)
        delivered (R11); returns its session id (``None``: a frame of no session).

        Its lifetime is marked for repair: a resync goes out before that lifetime's next frame,
        and one is queued in case no other frame follows. The rest of the entry is dropped.
        A lifetime that is closed is not repaired (R6): a repair would be a frame queued
        after the close; the frames it queued before the close still go out.
        """
        lifetime = self._writing.lifetime
        self._write_failures += 1
        self._writing.release()
        if lifetime is None:
            return None
        if lifetime.books.closed:
            self._unrepaired(lifetime)
        else:
            self._repair(lifetime)
        return lifetime.session_id

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
            if state.session_id in stale and not state.books.taken_over:
                taken.append(state)
                self.take_over(state)
        return taken

    # -- flushing and statistics ---------------------------------------------------------
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
        writing = self._writing
        if self._renderer.repairing or writing.frame is not None:
            return False
        if self._store.stored < batches:
            return False
        return self._cursor.reached(position, not self._fifo.entries and writing.frames is None)

    @property
    def idle(self) -> bool:
        """Nothing queued, held or being written: :meth:`next_action` would return ``None``
        (with a store, it may still have a batch to hand out)."""
        writing = self._writing  # Writing.idle, written out: read after every direct write
        return writing.frame is None and writing.frames is None and not self._fifo.entries

    @property
    def queued_entries(self) -> int:
        """Entries waiting, including one being written (or a frame written without one)."""
        return len(self._fifo) + (0 if self._writing.idle else 1)

    @property
    def queued_frames(self) -> int:
        """Frames still queued, at most (a frame being written is no longer counted)."""
        return self._fifo.frames

    @property
    def store_batches(self) -> int:
        """Store batches reported stored."""
        return self._store.stored

    def statistics(self) -> QueueStatistics:
        """What this queue has done so far, its parts' counts included."""
        renderer = self._renderer
        return QueueStatistics(
            publications=self._publications,
            coalesced=self._publisher.merged + renderer.absorbed + self._resyncs_served,
            fenced=self._fenced,
            frames_written=self._frames_written,
            bytes_written=self._bytes_written,
            write_failures=self._write_failures,
            resyncs=renderer.resyncs,
            repairs=renderer.repairs,
            taken_over=self._taken_over,
            peak_queued_frames=self._fifo.peak_frames,
            suppressed_titles=self._suppressed_titles,
        )

    # -- internals: producers ------------------------------------------------------------
    def _fold(self, state: LifetimeState, update: EncodedUpdate) -> None:
        """Make ``update`` part of the known state (R1); with a store, store it."""
        state.apply(update)
        store = self._store
        if store.enabled:
            store.changed(state)
        self._publications += 1

    def _express(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Fold ``update`` and hold its one frame for the writer, if the queue is idle, the
        lifetime needs no repair and one frame says it; ``False`` (nothing done) otherwise.

        Every publication to an idle queue passes here, so the idle checks and the fold are
        written out. The frame takes no position in the :class:`FlushCursor`:
        nothing counts as flushed while a frame is held or out."""
        writing = self._writing
        if writing.frame is not None or writing.frames is not None or self._fifo.entries:
            return False  # something goes first: what is queued, or being written
        if state.books.needs_repair:
            return False  # the repair goes first
        mode = self.mode
        cleared = update.meta_clear
        patch = update.meta_patch
        if cleared and patch and not mode.full_object:
            return False  # two frames: the clear, then the object
        state.apply(update)  # _fold(), written out on this path
        store = self._store
        if store.enabled:
            store.changed(state)
        self._publications += 1
        frame = publication_frame(mode, state, update)
        writing.hold_express(frame, state, store.target() if store.enabled else 0)
        return True

    def _publish(self, state: LifetimeState, update: EncodedUpdate) -> Outcome:
        """Fold ``update`` and queue it as the :class:`Publisher` decides (R3):
        :attr:`Outcome.FULL`, having changed nothing, when it needs room and there is none."""
        publisher = self._publisher
        needs_room = publisher.needs_room(state, update)
        if needs_room and self._fifo.counted >= self.capacity:
            return FULL
        self._fold(state, update)
        entry = None if needs_room else publisher.open_entry(state)
        if entry is not None:
            before = entry.frames
            publisher.merge(entry, update)
            entry.frames = self.mode.publication_frames(entry.cleared, bool(entry.patch))
            self._fifo.count_frames(entry.frames - before)
            return ACCEPTED
        entry = InfoEntry(state, update, counted=needs_room)
        entry.frames = self.mode.publication_frames(entry.cleared, bool(entry.patch))
        if self.mode.full_object and not publisher.merging:
            entry.frame = publication_frame(self.mode, state, update)  # one step, one frame
        self._append(entry)
        state.books.open_entry = entry if publisher.stays_open(update) else None
        return ACCEPTED

    def _append(self, entry: Entry) -> None:
        entry.pos = self._cursor.append()
        self._fifo.append(entry)

    def _client_title(self, state: LifetimeState, edit: ClientTitle, express: bool) -> Outcome:
        """The client set ``state``'s title (R13): its confirmation is queued (a publication:
        :attr:`Outcome.FULL`, having changed nothing, when it needs room and there is none),
        or, without ``confirm``, it only becomes known (a resync tells the client if it
        differs from what was known). Either way the title is the client's from now on."""
        update = edit.update
        check_sizes(state, update, self.max_frame_bytes)
        if edit.confirm:
            expressed = express and self._express(state, update)
            if not expressed and self._publish(state, update) is FULL:
                return FULL
        elif state.title != update.title:
            state.apply(update)
            self.resync(state)
        state.client_title = True
        self._store.changed(state)
        return ACCEPTED

    def _suppress_title(self, update: EncodedUpdate) -> EncodedUpdate | None:
        """``update`` without the title the agent gave it, counted (R13)."""
        self._suppressed_titles += 1
        return without_title(update)

    # -- internals: the writer -----------------------------------------------------------
    def _next_frame(self) -> bool:
        """Hold the next frame to write: of the entry being written, or of the next entry the
        writer takes; ``False`` when nothing is queued."""
        writing = self._writing
        store = self._store
        fifo = self._fifo
        while True:
            if writing.next_frame(store.target() if store.enabled else 0):
                return True
            if writing.entry is not None:
                self._finish(writing.finish())
            if not fifo.entries:
                return False
            self._begin(fifo.take())

    def _begin(self, entry: Entry) -> None:
        """The writer takes ``entry``: it is rendered, and takes no more merges (R3, R4)."""
        lifetime = entry.lifetime
        renderer = self._renderer
        repair = renderer.repair_due(entry)
        if lifetime is not None:
            if lifetime.books.open_entry is entry:
                lifetime.books.open_entry = None
            if lifetime.books.resync_entry is entry:
                lifetime.books.resync_entry = None
            if repair:  # the client's view of it is repaired now (R11)
                lifetime.books.needs_repair = False
                self._store.changed(lifetime)
        self._writing.begin(entry, renderer.render(entry, repair))

    def _finish(self, entry: Entry | None) -> None:
        """``entry`` is written, dropped or cut short: its position is reached."""
        if entry is not None:
            self._cursor.finish(entry.pos, not self._fifo.entries)

    def _dropped(self) -> None:
        """The frame held or out is dropped unwritten, its lifetime having ended (R6)."""
        self._fenced += 1
        self._writing.release()

    def _repair(self, lifetime: LifetimeState) -> None:
        """``lifetime`` lost a frame (R11): repair its client's view before its next frame."""
        lifetime.books.needs_repair = True
        self._store.changed(lifetime)
        writing = self._writing
        if writing.entry is not None and writing.entry.lifetime is lifetime:
            self._finish(writing.finish())
        if not self.mode.repairs:
            return  # pass-through sends no resync frames, so there is no repair either
        self._renderer.repair_pending(lifetime)
        self.resync(lifetime, repair_only=True)

    def _unrepaired(self, lifetime: LifetimeState) -> None:
        """A frame of ``lifetime``, closed, was lost: the rest of its entry is dropped, and no
        repair is queued (R6). A repair it owed from before the close is still written with
        its next entry; one that was being written when the frame was lost is given up."""
        writing = self._writing
        if writing.entry is not None and writing.entry.lifetime is lifetime:
            self._finish(writing.finish())
        if not lifetime.books.needs_repair:
            self._renderer.forget(lifetime)  # no entry of it will finish a repair now

    def _drop_lifetime(self, state: LifetimeState) -> int:
        """Another holder took ``state`` over: drop what is queued of it."""
        self._renderer.forget(state)
        state.books.open_entry = None
        state.books.resync_entry = None
        dropped = self._fifo.drop_lifetime(state)
        entry = self._writing.end_lifetime(state)
        if entry is not None:
            dropped += 1
            self._finish(entry)
        elif not self._fifo.entries and self._writing.entry is None:
            self._cursor.finish(0, queue_empty=True)  # all that was queued is dropped
        self._fenced += dropped
        return dropped
