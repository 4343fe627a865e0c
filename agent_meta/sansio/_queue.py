"""The owner's send queue, sans I/O: events in, frames out.

This is where rules R2-R6, R9-R11 live. The trio :class:`~agent_meta.MetaOwner` only moves
frames from :meth:`SendQueue.next_frame` to a transport and reports each outcome back with
:meth:`SendQueue.written` or :meth:`SendQueue.lost`.

Entries form one FIFO. A ``session_info_update`` publication is folded into the known state at
once (R1), then either merged into its lifetime's *open* entry (still queued, nothing of the
same lifetime carrying a patch queued after it) or appended as a new entry (R3). Entries render
their frames only when the writer takes them, so a resync shows the state at write time (R4).

Capacity: only entries that can pile up without bound count against ``capacity`` -- other
notifications and responses, publications that carry notification ``_meta`` (never merged, R9),
every publication when coalescing is off, and a publication whose merge would overflow the frame
limit. Merged publications and resyncs never wait: each lifetime has at most one open entry and
one pending resync, so memory per session stays bounded however fast producers publish.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Literal

from ..core._errors import FrameTooLargeError, SessionExistsError
from ._frames import NULL, fragment, info_frame, object_text
from ._state import EncodedUpdate, LifetimeState, member_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = ["Outgoing", "QueueCounters", "SendQueue"]

V1MetaMode = Literal["merged", "passthrough"]


class _Info:
    """Queued ``session_info_update`` publication(s) of one lifetime, in normal form."""

    __slots__ = (
        "cleared",
        "counted",
        "frames",
        "lifetime",
        "notification_meta",
        "own_patch",
        "patch",
        "patch_size",
        "pos",
        "title",
        "updated_at",
    )

    def __init__(self, lifetime: LifetimeState, update: EncodedUpdate, counted: bool) -> None:
        self.lifetime = lifetime
        self.counted = counted
        self.title = update.title
        self.updated_at = update.updated_at
        self.cleared = update.meta_clear
        self.patch = update.meta_patch  # shared until a merge changes it (most never merge)
        self.own_patch = False
        self.patch_size = update.patch_size
        self.notification_meta = update.notification_meta
        self.pos = 0
        self.frames = 1

    def merge(self, update: EncodedUpdate) -> None:
        """Fold a later update into this entry (same effect for every stored state)."""
        if update.title is not None:
            self.title = update.title
        if update.updated_at is not None:
            self.updated_at = update.updated_at
        if update.meta_clear:
            self.cleared = True
            self.patch = None
            self.own_patch = False
            self.patch_size = 0
        if update.meta_patch is not None:
            if not self.own_patch:
                self.patch = {} if self.patch is None else dict(self.patch)
                self.own_patch = True
            assert self.patch is not None
            for key, frag in update.meta_patch.items():
                if key in self.patch:
                    self.patch_size -= member_size(key, self.patch[key])
                self.patch[key] = frag
                self.patch_size += member_size(key, frag)


def _patch_text(patch: Mapping[str, str | None]) -> str:
    """A patch object's text: each member's fragment, ``"key":null`` for a removal."""
    members = []
    for key, frag in patch.items():
        members.append(frag if frag is not None else fragment(key, NULL))
    return object_text(members)


class _Resync:
    __slots__ = ("counted", "frames", "lifetime", "pos", "repair_only")

    def __init__(self, lifetime: LifetimeState, repair_only: bool) -> None:
        self.lifetime = lifetime
        self.repair_only = repair_only
        self.counted = False
        self.pos = 0
        self.frames = 2


class _Raw:
    __slots__ = ("counted", "frame", "frames", "lifetime", "pos")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.lifetime: LifetimeState | None = None
        self.counted = True
        self.pos = 0
        self.frames = 1


_Entry = _Info | _Resync | _Raw


class Outgoing:
    """One frame for the writer, and the lifetime it belongs to (``None`` for other frames).

    ``sent`` counts bytes of the frame already written (by a direct write that the pipe took
    only in part); the writer sends the rest.
    """

    __slots__ = ("frame", "lifetime", "sent")

    def __init__(self, frame: bytes, lifetime: LifetimeState | None) -> None:
        self.frame = frame
        self.lifetime = lifetime
        self.sent = 0

    def unsent(self) -> bytes:
        """The part of the frame still to be written."""
        return self.frame[self.sent :] if self.sent else self.frame


class QueueCounters:
    """Plain counters, read by :meth:`MetaOwner.statistics`."""

    __slots__ = (
        "bytes_written",
        "coalesced",
        "fenced",
        "frames_written",
        "peak_queued_frames",
        "publications",
        "repairs",
        "resyncs",
        "write_failures",
    )

    def __init__(self) -> None:
        self.publications = 0
        self.coalesced = 0
        self.fenced = 0
        self.frames_written = 0
        self.bytes_written = 0
        self.write_failures = 0
        self.resyncs = 0
        self.repairs = 0
        self.peak_queued_frames = 0


class SendQueue:
    """The FIFO of one connection, with per-lifetime known state. Pure and synchronous."""

    def __init__(
        self,
        *,
        protocol_version: int = 2,
        v1_meta_mode: V1MetaMode = "merged",
        coalesce: bool = True,
        capacity: int = 256,
        max_frame_bytes: int = 1 << 20,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._v1_meta_mode: V1MetaMode = v1_meta_mode
        self._coalesce = coalesce
        self.protocol_version = protocol_version
        self.capacity = capacity
        self.max_frame_bytes = max_frame_bytes
        self.sessions: dict[str, LifetimeState] = {}
        self.counters = QueueCounters()
        self._queue: collections.deque[_Entry] = collections.deque()
        self._counted = 0
        self._queued_frames = 0
        self._current: Iterator[bytes] | None = None
        self._current_entry: _Entry | None = None
        self._appended = 0
        self._finished = 0
        self._direct_pos = 0  # position of a frame from publish_now not yet reported; 0: none
        # A frame was handed out (next_frame, publish_now) and not yet reported (written, lost,
        # dropped). It may be half on the wire: nothing counts as flushed until it is reported.
        self._unreported = False
        self._repairing: set[LifetimeState] = set()  # lost a frame, repair not yet delivered
        # Lifetimes whose state changed since the owner last stored it (None: no store).
        self.dirty: dict[LifetimeState, None] | None = None

    # -- configuration -------------------------------------------------------------------
    @property
    def protocol_version(self) -> int:
        """The connection's ACP protocol version (1 or 2); the owner sets it at ``initialize``."""
        return self._protocol_version

    @protocol_version.setter
    def protocol_version(self, version: int) -> None:
        self._protocol_version = version
        # Whether publications may be merged: coalescing on, and not v1 pass-through.
        self.merging = self._coalesce and not (version == 1 and self._v1_meta_mode == "passthrough")

    @property
    def coalesce(self) -> bool:
        return self._coalesce

    @property
    def v1_meta_mode(self) -> V1MetaMode:
        return self._v1_meta_mode

    # -- lifetimes -----------------------------------------------------------------------
    def open_lifetime(
        self,
        session_id: str,
        seed: EncodedUpdate | None = None,
        restore: Callable[[LifetimeState], None] | None = None,
    ) -> LifetimeState:
        """Start a lifetime; ``seed`` is applied as known state without sending anything.

        ``restore`` first fills the new state from a store (a resumed lifetime).
        """
        if session_id in self.sessions:
            raise SessionExistsError(f"session {session_id!r} already has an open lifetime")
        state = LifetimeState(session_id)
        if restore is not None:
            restore(state)
            size = state.snapshot_size()
            if size > self.max_frame_bytes:
                raise FrameTooLargeError(
                    f"stored session {session_id!r} holds about {size} bytes of session info, "
                    f"over the frame limit of {self.max_frame_bytes} bytes"
                )
        if seed is not None:
            self._check_sizes(state, seed)
            state.apply(seed)
            self.mark_dirty(state)
        self.sessions[session_id] = state
        return state

    def mark_dirty(self, state: LifetimeState) -> None:
        """Note that ``state`` changed and must be stored before its next frame is written."""
        if self.dirty is not None and not state.closed:
            self.dirty[state] = None

    def close_lifetime(self, state: LifetimeState) -> int:
        """End a lifetime (R6): drop its queued frames, and the rest of an entry of it being
        written. A frame already handed out is still finished and reported (never cut); the
        count returned is of the frames dropped."""
        if state.closed:
            return 0
        state.closed = True
        self._repairing.discard(state)
        if self.dirty is not None:
            self.dirty.pop(state, None)
        state.open_entry = None
        state.resync_entry = None
        if self.sessions.get(state.session_id) is state:
            del self.sessions[state.session_id]
        kept: collections.deque[_Entry] = collections.deque()
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
                # Its frame being written is finished (a line is never cut); nothing after it.
                self._current = iter(())
            else:
                dropped += 1
                self._finish_current()
        self.counters.fenced += dropped
        return dropped

    # -- producers -----------------------------------------------------------------------
    def has_room(self) -> bool:
        """Whether an entry that counts against capacity can be appended now."""
        return self._counted < self.capacity

    def publication_needs_room(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Whether publishing ``update`` now would append an entry that counts against capacity."""
        if update.notification_meta is not None or not self.merging:
            return True
        entry = state.open_entry
        if not isinstance(entry, _Info):
            return False
        return entry.patch_size + update.patch_size > self.max_frame_bytes // 2

    def publish(
        self, state: LifetimeState, update: EncodedUpdate, needs_room: bool | None = None
    ) -> bool:
        """Accept one publication: fold it into the known state and queue it.

        Returns ``False`` (and counts it as fenced) for a closed lifetime. Raises
        :class:`FrameTooLargeError` before changing anything if the frame or the resulting
        snapshot would exceed the frame limit. The caller checks room first (see
        :meth:`publication_needs_room`, whose answer it may pass as ``needs_room``); this method
        never refuses for lack of room.
        """
        if state.closed:
            self.counters.fenced += 1
            return False
        if needs_room is None:
            needs_room = self.publication_needs_room(state, update)
        self._fold(state, update)
        entry = state.open_entry
        if not needs_room and isinstance(entry, _Info):
            before = self._frames_of(entry)
            entry.merge(update)
            entry.frames = self._frames_of(entry)
            self._queued_frames += entry.frames - before
            if self._queued_frames > self.counters.peak_queued_frames:
                self.counters.peak_queued_frames = self._queued_frames
            self.counters.coalesced += 1
            return True
        new = _Info(state, update, counted=needs_room)
        new.frames = self._frames_of(new)
        self._append(new)
        state.open_entry = new if (self.merging and update.notification_meta is None) else None
        return True

    def publish_now(self, state: LifetimeState, update: EncodedUpdate) -> bytes | None:
        """Accept a publication whose frame can skip the queue, and return that frame.

        It can when nothing is queued or being written, its lifetime is open and needs no
        repair, and it renders to one frame: no entry could precede it or merge with it, so it
        is the frame the queue would render next. The caller writes it now (or makes sure the
        writer finishes it before anything else) and reports it with :meth:`written`.
        Otherwise returns ``None`` having changed nothing, and the caller uses :meth:`publish`.
        Raises like :meth:`publish`.
        """
        if self._queue or self._current is not None or self._unreported:
            return None
        if state.closed or state.needs_repair:
            return None
        if self._frame_count(update.meta_clear, update.meta_patch) != 1:
            return None
        self._fold(state, update)
        self._appended += 1
        self._direct_pos = self._appended
        self._unreported = True
        frames = self._info_frames(
            state,
            update.title,
            update.updated_at,
            update.meta_clear,
            update.meta_patch,
            update.notification_meta,
        )
        return frames[0]

    def resync(self, state: LifetimeState, *, repair_only: bool = False) -> bool:
        """Queue a resync of one lifetime (R4): ``_meta: null`` then the snapshot at write time.

        A resync already pending for the lifetime serves this request too (its snapshot is
        taken later still). Returns ``False`` for a closed lifetime.
        """
        if state.closed:
            self.counters.fenced += 1
            return False
        pending = state.resync_entry
        if isinstance(pending, _Resync):
            if not repair_only:
                pending.repair_only = False
            self.counters.coalesced += 1
            return True
        entry = _Resync(state, repair_only)
        entry.frames = 2 if self.protocol_version >= 2 else 1
        self._append(entry)
        state.resync_entry = entry
        state.open_entry = None
        return True

    def check_frame_size(self, frame: bytes) -> None:
        """Raise :class:`FrameTooLargeError` if ``frame`` is over the limit."""
        if len(frame) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"frame of {len(frame)} bytes exceeds the limit of {self.max_frame_bytes} bytes"
            )

    def raw(self, frame: bytes) -> None:
        """Queue any other frame (a response, another notification). Counts against capacity."""
        self.check_frame_size(frame)
        self._append(_Raw(frame))

    # -- the writer ----------------------------------------------------------------------
    def next_frame(self) -> Outgoing | None:
        """The next frame to write, or ``None`` when nothing is queued.

        The caller reports each frame (:meth:`written`, :meth:`lost` or :meth:`dropped`) before
        asking for the next: a resync's snapshot is rendered only then (R4).
        """
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

    def written(self, out: Outgoing) -> None:
        """The writer reports that ``out`` was written whole."""
        self.counters.frames_written += 1
        self.counters.bytes_written += len(out.frame)
        self._reported()

    def _reported(self) -> None:
        self._unreported = False
        if self._direct_pos:
            if self._direct_pos > self._finished:
                self._finished = self._direct_pos
            self._direct_pos = 0

    def dropped(self, out: Outgoing) -> None:
        """The writer reports that it dropped ``out`` unwritten, its lifetime having ended (R6)."""
        self.counters.fenced += 1
        self._reported()

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
        self.mark_dirty(lifetime)
        if self._current_entry is not None and self._current_entry.lifetime is lifetime:
            self._finish_current()
        if self.protocol_version == 1 and self.v1_meta_mode == "passthrough":
            return  # pass-through sends no resync frames, so there is no repair either
        self._repairing.add(lifetime)
        self.resync(lifetime, repair_only=True)

    def is_flushed(self, target: int) -> bool:
        """Whether every entry appended up to position ``target`` has been written or dropped,
        and every client view damaged by a lost frame has been repaired since."""
        if self._repairing or self._unreported:
            return False
        if self._finished >= target:
            return True
        return not self._queue and self._current is None

    @property
    def position(self) -> int:
        """The position of the newest entry (a target for :meth:`is_flushed`)."""
        return self._appended

    @property
    def queued_entries(self) -> int:
        in_flight = self._current is not None or self._unreported
        return len(self._queue) + (1 if in_flight else 0)

    @property
    def queued_frames(self) -> int:
        return self._queued_frames

    # -- internals -----------------------------------------------------------------------
    def _fold(self, state: LifetimeState, update: EncodedUpdate) -> None:
        """Fold an accepted publication into the known state (R1), once its sizes are checked."""
        self._check_sizes(state, update)
        state.apply(update)
        if self.dirty is not None:
            self.dirty[state] = None
        self.counters.publications += 1

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

    def _frames_of(self, entry: _Info) -> int:
        return self._frame_count(entry.cleared, entry.patch)

    def _frame_count(self, cleared: bool, patch: Mapping[str, str | None] | None) -> int:
        """How many frames :meth:`_info_frames` renders (a clear with members takes two)."""
        if (
            cleared
            and patch
            and not (self._protocol_version == 1 and self._v1_meta_mode == "merged")
        ):
            return 2
        return 1

    def _append(self, entry: _Entry) -> None:
        self._appended += 1
        entry.pos = self._appended
        self._queue.append(entry)
        if entry.counted:
            self._counted += 1
        self._queued_frames += entry.frames
        if self._queued_frames > self.counters.peak_queued_frames:
            self.counters.peak_queued_frames = self._queued_frames

    def _forget(self, entry: _Entry) -> None:
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

    def _finish_current(self) -> None:
        entry = self._current_entry
        if entry is not None and entry.pos > self._finished:
            self._finished = entry.pos
        self._current = None
        self._current_entry = None
        if not self._queue and not self._direct_pos:
            self._finished = self._appended

    def _render(self, entry: _Entry) -> Iterator[bytes]:
        """The frames of an entry the writer takes. Everything but a resync is rendered at
        once; a resync's snapshot frame only once its ``null`` frame is written (R4)."""
        if isinstance(entry, _Info):
            if entry.lifetime.needs_repair:
                return self._repaired_info_frames(entry)
            return iter(self._entry_frames(entry))
        if isinstance(entry, _Raw):
            return iter((entry.frame,))
        if entry.repair_only and not entry.lifetime.needs_repair:
            return iter(())
        return self._resync_frames(entry.lifetime)

    def _repaired_info_frames(self, entry: _Info) -> Iterator[bytes]:
        yield from self._resync_frames(entry.lifetime)
        yield from self._entry_frames(entry)

    def _resync_frames(self, state: LifetimeState) -> Iterator[bytes]:
        if state.needs_repair:
            self.counters.repairs += 1
            state.needs_repair = False
            self.mark_dirty(state)
        if self.protocol_version == 1:
            if self.v1_meta_mode == "passthrough":
                return
            self.counters.resyncs += 1
            yield info_frame(
                state.prefix,
                title=state.title,
                updated_at=state.updated_at,
                meta=state.meta_text() or "{}",
                notification_meta=None,
            )
            self._repairing.discard(state)  # reached only once the frame was written
            return
        self.counters.resyncs += 1
        yield info_frame(
            state.prefix, title=None, updated_at=None, meta=NULL, notification_meta=None
        )
        # Rendered only now, after the clear went out: the snapshot is as new as it can be.
        if not state.is_empty():
            yield info_frame(
                state.prefix,
                title=state.title,
                updated_at=state.updated_at,
                meta=state.meta_text(),
                notification_meta=None,
            )
        self._repairing.discard(state)  # reached only once every frame above was written

    def _entry_frames(self, entry: _Info) -> list[bytes]:
        return self._info_frames(
            entry.lifetime,
            entry.title,
            entry.updated_at,
            entry.cleared,
            entry.patch,
            entry.notification_meta,
        )

    def _info_frames(
        self,
        state: LifetimeState,
        title: str | None,
        updated_at: str | None,
        cleared: bool,
        patch: Mapping[str, str | None] | None,
        notification_meta: str | None,
    ) -> list[bytes]:
        """The frames of a publication (or merged publications), in normal form.

        Called after the known state has the publication folded in: on v1 (merged) every frame
        carries the whole object, as v1 cannot express a clear or a removal (R10).
        """
        prefix = state.prefix
        if self._protocol_version == 1 and self._v1_meta_mode == "merged":
            frame = info_frame(
                prefix,
                title=title,
                updated_at=updated_at,
                meta=state.meta_text() or "{}",
                notification_meta=notification_meta,
            )
            return [frame]
        if cleared:
            frames = [
                info_frame(
                    prefix,
                    title=title,
                    updated_at=updated_at,
                    meta=NULL,
                    notification_meta=notification_meta,
                )
            ]
            if patch:
                frames.append(
                    info_frame(
                        prefix,
                        title=None,
                        updated_at=None,
                        meta=_patch_text(patch),
                        notification_meta=None,
                    )
                )
            return frames
        frame = info_frame(
            prefix,
            title=title,
            updated_at=updated_at,
            meta=None if patch is None else _patch_text(patch),
            notification_meta=notification_meta,
        )
        return [frame]
