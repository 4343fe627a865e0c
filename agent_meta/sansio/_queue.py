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
- R2 one FIFO (``_queue``) and one frame handed out at a time (``_unreported``).
- R3 :meth:`SendQueue.submit` merges into a lifetime's *open* entry (still queued, nothing of the
  same lifetime carrying a patch queued after it); capacity counts only entries that could pile
  up without bound.
- R4 :meth:`SendQueue.resync`, rendered by ``_resync_frames`` only when the writer takes it.
- R5/R6 :meth:`SendQueue.open_lifetime` / :meth:`SendQueue.close_lifetime`.
- R7/R8 the edits of :mod:`~agent_meta.sansio._edits`, applied inside :meth:`SendQueue.submit`.
- R9 an entry with notification ``_meta`` is never merged and closes the open entry.
- R10 :class:`~agent_meta.sansio._modes.WireMode`, chosen by :meth:`set_protocol_version`.
- R11 :meth:`SendQueue.lost` marks the lifetime for a repair resync before its next frame.
- R12 sizes checked before anything changes (``_check_sizes``, :meth:`check_frame_size`).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from ..core._errors import FrameTooLargeError, SessionExistsError
from ._durability import Durability
from ._edits import Edit, Outcome, plan_edit, settle_edit
from ._encode import EncodedUpdate, encode_update
from ._entries import (
    Entry,
    InfoEntry,
    Outgoing,
    QueueCounters,
    RawEntry,
    ResyncEntry,
    StoreBatch,
)
from ._frames import clear_frame, info_frame, info_frames, snapshot_frame
from ._modes import WireMode, wire_mode
from ._records import restore_state
from ._state import LifetimeState

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._options import OwnerOptions
    from ._records import StoredLifetime

__all__ = ["ENDED_IDS", "SendQueue"]

ENDED_IDS = 4096
"""How many ended session ids the queue remembers to fence their other frames (R6)."""


class SendQueue:
    """The FIFO of one connection, with per-lifetime known state. Pure and synchronous.

    ``durable``: the owner has a lifetime store, so :meth:`next_action` hands out a
    :class:`StoreBatch` before any frame whose state is not stored yet.
    """

    def __init__(self, options: OwnerOptions, *, durable: bool = False) -> None:
        self.options = options
        self.max_frame_bytes = options.max_frame_bytes
        self.capacity = options.capacity
        self.sessions: dict[str, LifetimeState] = {}
        self.counters = QueueCounters()
        self.set_protocol_version(options.protocol_version)
        self._queue: collections.deque[Entry] = collections.deque()
        self._counted = 0  # queued entries that count against capacity
        self._queued_frames = 0
        self._current: Iterator[bytes] | None = None  # frames of the entry being written
        self._current_entry: Entry | None = None
        self._appended = 0  # position of the newest entry
        self._finished = 0  # every entry up to here is written or dropped
        # A frame was handed out and not yet reported (written, lost, dropped). It may be half
        # on the wire: nothing counts as flushed until it is reported, nothing else is handed out.
        self._unreported = False
        self._held: Outgoing | None = None  # next_action returns it before anything else
        self._express_pos = 0  # position of an express frame not yet reported; 0: none
        self._repairing: set[LifetimeState] = set()  # lost a frame, repair not yet written
        # Session ids whose lifetime ended and was not reopened: their frames are fenced (R6).
        # Bounded: the oldest are forgotten first (a session closed that long ago is quiet).
        self._ended: dict[str, None] = {}
        # Durability: lifetimes changed since last stored, ids to delete, batch sequence.
        self._store = Durability(durable)

    # -- configuration -------------------------------------------------------------------
    @property
    def protocol_version(self) -> int:
        """The connection's ACP protocol version (1 or 2)."""
        return self._protocol_version

    def set_protocol_version(self, version: int) -> None:
        """Render for ``version`` from now on; the connection sets it at ``initialize``."""
        self._protocol_version = version
        self.mode: WireMode = wire_mode(version, self.options.v1_meta_mode)
        # Whether publications may be merged: coalescing on, and the mode allows it (R3, R10).
        self.merging = self.options.coalesce and self.mode.merges

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
        """Start a lifetime. ``record`` (read from the store at ``location``) restores a
        resumed lifetime first; ``seed`` is then applied as known state, sending nothing."""
        if session_id in self.sessions:
            raise SessionExistsError(f"session {session_id!r} already has an open lifetime")
        state = LifetimeState(session_id)
        self._ended.pop(session_id, None)
        if record is not None:
            restore_state(state, record, location)
            size = state.snapshot_size()
            if size > self.max_frame_bytes:
                raise FrameTooLargeError(
                    f"stored session {session_id!r} holds about {size} bytes of session info, "
                    f"over the frame limit of {self.max_frame_bytes} bytes"
                )
        if seed is not None:
            self._check_sizes(state, seed)
            state.apply(seed)
            self._store.changed(state)
        self.sessions[session_id] = state
        return state

    def close_lifetime(self, state: LifetimeState) -> int:
        """End a lifetime (R6): drop its queued frames, and the rest of an entry of it being
        written. A frame already handed out is still finished and reported (a line is never
        cut). Returns the number of frames dropped."""
        if state.closed:
            return 0
        state.closed = True
        self._ended[state.session_id] = None
        if len(self._ended) > ENDED_IDS:
            del self._ended[next(iter(self._ended))]
        self._repairing.discard(state)
        self._store.closed(state)
        state.open_entry = None
        state.resync_entry = None
        if self.sessions.get(state.session_id) is state:
            del self.sessions[state.session_id]
        kept: collections.deque[Entry] = collections.deque()
        dropped = 0
        for entry in self._queue:
            if entry.lifetime is state:
                dropped += entry.frames
                self._forget(entry)
            else:
                kept.append(entry)
        self._queue = kept
        if self._current_entry is not None and self._current_entry.lifetime is state:
            if self._unreported:
                self._current = iter(())  # its frame being written is finished, nothing after
            else:
                dropped += 1
                self._finish_current()
        self.counters.fenced += dropped
        return dropped

    # -- producers -----------------------------------------------------------------------
    def has_room(self) -> bool:
        """Whether an entry that counts against capacity can be appended now."""
        return self._counted < self.capacity

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
        else:
            planned = plan_edit(edit, state, self.options.failure_path, self.encode)
            if planned is Outcome.REFUSED:
                return planned  # a stale report or a late resolution (R7)
            update = planned
        if update is not None:
            self._check_sizes(state, update)
            if not (express and self._express(state, update)):
                needs_room = self._needs_room(state, update)
                if needs_room and self._counted >= self.capacity:
                    return Outcome.FULL
                self._publish(state, update, needs_room)
        if update is not edit and settle_edit(edit, state):
            self._store.changed(state)  # a failure change may carry no frame of its own
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
        self._append(entry)
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
        if session_id is not None and session_id in self._ended:
            self.counters.fenced += 1
            return Outcome.FENCED
        if not self.has_room():
            return Outcome.FULL
        self._append(RawEntry(frame))
        return Outcome.ACCEPTED

    # -- the writer ----------------------------------------------------------------------
    def next_action(self) -> Outgoing | StoreBatch | None:
        """What the writer does next: write a frame, store a batch first, or nothing (park).

        Report each :class:`Outgoing` (:meth:`written`, :meth:`lost` or :meth:`dropped`) and
        each :class:`StoreBatch` (:meth:`stored`) before asking again. A frame is handed out
        before the batch that stores its state, and again once that batch is stored.
        """
        store = self._store
        if store.in_flight:
            raise RuntimeError("report the store batch handed out before asking again")
        while True:
            out = self._held
            self._held = None
            if out is None:
                out = self._next_frame()
                if out is not None and store.enabled:
                    out.stored_by = store.target()  # the changes it was rendered from
            else:
                self._unreported = True
            if out is None:
                # Nothing to write: store what changed, so that a flush completes.
                return store.take() if store.pending else None
            if store.stored < out.stored_by:
                # Persist before write (docs/durability.md). Changes made after the frame was
                # rendered wait for the next batch: under a stream of publications, waiting
                # for all of them would hold every frame back.
                self._held = out
                return store.take()
            lifetime = out.lifetime
            if lifetime is not None and lifetime.closed and not out.sent:
                self.dropped(out)  # it ended while its state was being stored (R6)
                continue
            return out

    def hold(self, out: Outgoing) -> None:
        """``out`` was written in part (``out.sent`` bytes): :meth:`next_action` hands out the
        rest before anything else."""
        self._held = out

    def written(self, out: Outgoing) -> None:
        """The writer reports that ``out`` was written whole."""
        self.counters.frames_written += 1
        self.counters.bytes_written += len(out.frame)
        self._reported()

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
        if self._current_entry is not None and self._current_entry.lifetime is lifetime:
            self._finish_current()
        if not self.mode.repairs:
            return  # pass-through sends no resync frames, so there is no repair either
        self._repairing.add(lifetime)
        self.resync(lifetime, repair_only=True)

    def stored(self, batch: StoreBatch) -> None:
        """The writer reports that ``batch`` is durably stored."""
        self._store.done(batch)

    # -- flushing ------------------------------------------------------------------------
    def flush_target(self) -> tuple[int, int]:
        """What "flushed" means for a caller now: every entry queued so far written (or
        dropped), and every change accepted so far stored (see :meth:`is_flushed`)."""
        return self._appended, self._store.target()

    def is_flushed(self, target: tuple[int, int]) -> bool:
        """Whether ``target`` (from :meth:`flush_target`) is reached, and every client view
        damaged by a lost frame has been repaired since."""
        position, batches = target
        if self._repairing or self._unreported or self._held is not None:
            return False
        if self._store.stored < batches:
            return False
        if self._finished >= position:
            return True
        return not self._queue and self._current is None

    @property
    def idle(self) -> bool:
        """Nothing queued, held or being written: :meth:`next_action` would return ``None``
        (with a store, it may still have a batch to hand out)."""
        return (
            not self._queue
            and self._current is None
            and self._held is None
            and not self._unreported
        )

    @property
    def position(self) -> int:
        """The position of the newest entry."""
        return self._appended

    @property
    def queued_entries(self) -> int:
        """Entries waiting, including one being written."""
        in_flight = self._current is not None or self._unreported
        return len(self._queue) + (1 if in_flight else 0)

    @property
    def queued_frames(self) -> int:
        """Frames still queued, at most (a frame being written is no longer counted)."""
        return self._queued_frames

    @property
    def store_batches(self) -> int:
        """Store batches reported stored."""
        return self._store.stored

    # -- internals: producers ------------------------------------------------------------
    def _needs_room(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Whether publishing ``update`` now appends an entry that counts against capacity:
        one with notification ``_meta`` (R9), any when not merging, or one whose merge would
        make the open entry too large."""
        if update.notification_meta is not None or not self.merging:
            return True
        entry = state.open_entry
        if not isinstance(entry, InfoEntry):
            return False
        return entry.patch_size + update.patch_size > self.max_frame_bytes // 2

    def _fold(self, state: LifetimeState, update: EncodedUpdate) -> None:
        state.apply(update)
        self._store.changed(state)
        self.counters.publications += 1

    def _express(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Fold ``update`` and hold its one frame for :meth:`next_action`, if nothing is queued
        or being written and the lifetime needs no repair; ``False`` (nothing done) otherwise."""
        if self._queue or self._current is not None or self._held or self._unreported:
            return False  # not idle (see idle): something must go first
        if state.needs_repair:
            return False
        if update.meta_clear and update.meta_patch and not self.mode.full_object:
            return False  # two frames: the clear, then the object
        self._fold(state, update)
        frame = info_frames(
            self.mode,
            state,
            update.title,
            update.updated_at,
            update.meta_clear,
            update.meta_patch,
            update.notification_meta,
        )[0]
        self._appended += 1
        self._express_pos = self._appended
        held = self._held = Outgoing(frame, state)
        if self._store.enabled:
            held.stored_by = self._store.target()
        return True

    def _publish(self, state: LifetimeState, update: EncodedUpdate, needs_room: bool) -> None:
        self._fold(state, update)
        entry = state.open_entry
        if not needs_room and isinstance(entry, InfoEntry):
            before = entry.frames
            entry.merge(update)
            entry.frames = self._frames_of(entry)
            self._count_frames(entry.frames - before)
            self.counters.coalesced += 1
            return
        new = InfoEntry(state, update, counted=needs_room)
        new.frames = self._frames_of(new)
        self._append(new)
        state.open_entry = new if (self.merging and update.notification_meta is None) else None

    def _check_sizes(self, state: LifetimeState, update: EncodedUpdate) -> None:
        limit = self.max_frame_bytes
        own = len(state.prefix) + 64 + update.patch_size
        if update.title is not None:
            own += len(update.title)
        if update.updated_at is not None:
            own += len(update.updated_at)
        if update.notification_meta is not None:
            own += len(update.notification_meta)
        # Quick and sufficient: the update's frame plus everything known bounds both sizes.
        known = state.meta_size + len(state.fragments)
        if state.title is not None:
            known += len(state.title)
        if state.updated_at is not None:
            known += len(state.updated_at)
        if own + known <= limit:
            return
        if own > limit:
            raise FrameTooLargeError(
                f"the frame for this update of session {state.session_id!r} would be about "
                f"{own} bytes, over the limit of {limit} bytes"
            )
        after = state.size_after(update)
        if after > limit:
            raise FrameTooLargeError(
                f"session {state.session_id!r} would hold about {after} bytes of session info, "
                f"over the frame limit of {limit} bytes (a resync must fit in one frame)"
            )

    def _frames_of(self, entry: InfoEntry) -> int:
        return self.mode.publication_frames(entry.cleared, bool(entry.patch))

    def _append(self, entry: Entry) -> None:
        self._appended += 1
        entry.pos = self._appended
        self._queue.append(entry)
        if entry.counted:
            self._counted += 1
        self._count_frames(entry.frames)

    def _count_frames(self, delta: int) -> None:
        self._queued_frames += delta
        if self._queued_frames > self.counters.peak_queued_frames:
            self.counters.peak_queued_frames = self._queued_frames

    def _forget(self, entry: Entry) -> None:
        """Bookkeeping when an entry leaves the queue (taken or dropped)."""
        if entry.counted:
            self._counted -= 1
        self._queued_frames -= entry.frames
        lifetime = entry.lifetime
        if lifetime is not None:
            if lifetime.open_entry is entry:
                lifetime.open_entry = None
            if lifetime.resync_entry is entry:
                lifetime.resync_entry = None

    # -- internals: the writer -----------------------------------------------------------
    def _next_frame(self) -> Outgoing | None:
        if self._unreported:
            raise RuntimeError("report the last frame handed out before taking the next one")
        while True:
            current = self._current
            if current is not None:
                entry = self._current_entry
                assert entry is not None
                lifetime = entry.lifetime
                if lifetime is not None and lifetime.closed:
                    self._finish_current()
                    continue
                frame = next(current, None)
                if frame is not None:
                    self._unreported = True
                    return Outgoing(frame, lifetime)
                self._finish_current()
                continue
            if not self._queue:
                return None
            entry = self._queue.popleft()
            self._forget(entry)
            self._current_entry = entry
            self._current = self._render(entry)

    def _reported(self) -> None:
        self._unreported = False
        if self._express_pos and self._held is None:  # the express frame is done
            if self._express_pos > self._finished:
                self._finished = self._express_pos
            self._express_pos = 0

    def _finish_current(self) -> None:
        entry = self._current_entry
        if entry is not None and entry.pos > self._finished:
            self._finished = entry.pos
        self._current = None
        self._current_entry = None
        if not self._queue and not self._express_pos:
            self._finished = self._appended

    def _render(self, entry: Entry) -> Iterator[bytes]:
        """The frames of an entry the writer takes. Everything but a resync is rendered at
        once; a resync's snapshot frame only once its ``null`` frame is written (R4)."""
        if isinstance(entry, InfoEntry):
            state = entry.lifetime
            if entry.pos <= state.absorbed_through:
                return iter(self._absorbed_frames(entry))
            if state.needs_repair:
                return self._repaired_info_frames(entry)
            frames = self._info_frames(entry)
            if self.mode.full_object:
                self._absorb(state)  # the frame is a snapshot: nothing queued may go back
            return iter(frames)
        if isinstance(entry, RawEntry):
            return iter((entry.frame,))
        if entry.repair_only and not entry.lifetime.needs_repair:
            return iter(())
        return self._resync_frames(entry.lifetime)

    def _info_frames(self, entry: InfoEntry) -> list[bytes]:
        return info_frames(
            self.mode,
            entry.lifetime,
            entry.title,
            entry.updated_at,
            entry.cleared,
            entry.patch,
            entry.notification_meta,
        )

    def _absorbed_frames(self, entry: InfoEntry) -> list[bytes]:
        """An entry whose publications a snapshot already carries: only its notification
        ``_meta`` still goes out (R9), on an update that changes nothing."""
        if entry.notification_meta is None:
            return []
        prefix = entry.lifetime.prefix
        return [info_frame(prefix, None, None, None, entry.notification_meta)]

    def _absorb(self, state: LifetimeState) -> None:
        """A snapshot of ``state`` is being rendered now: it carries every publication queued
        behind it, so those entries send nothing more (the client would otherwise go back
        through older states, issue 13), and none of them may take later publications."""
        state.absorbed_through = self._appended
        if state.open_entry is not None:
            state.open_entry = None

    def _repaired_info_frames(self, entry: InfoEntry) -> Iterator[bytes]:
        yield from self._resync_frames(entry.lifetime)
        if entry.pos <= entry.lifetime.absorbed_through:
            yield from self._absorbed_frames(entry)  # the repair's snapshot carries it
        else:
            yield from self._info_frames(entry)  # no snapshot was sent (v1 pass-through)

    def _resync_frames(self, state: LifetimeState) -> Iterator[bytes]:
        if state.needs_repair:
            self.counters.repairs += 1
            state.needs_repair = False
            self._store.changed(state)
        if self.mode.resync == "none":
            return
        self.counters.resyncs += 1
        if self.mode.resync == "clear_then_snapshot":
            yield clear_frame(state)
            # Rendered only now, after the clear went out: the snapshot is as new as it can be.
            self._absorb(state)
            if state.is_empty():
                self._repairing.discard(state)
                return
        self._absorb(state)
        yield snapshot_frame(self.mode, state)
        self._repairing.discard(state)  # reached only once every frame above was written
