"""What becomes of each message between the client and the child: :class:`Relay`.

Every line the child sends reaches the client through the owner's one FIFO, in order: a
``session_info_update`` as a publication into its session's lifetime (rendered for the
negotiated version), anything else as the child's own bytes. Every line of the client reaches
the child as the client's own bytes. Around them, the connection shell every agent_meta
connection answers through (:class:`~agent_meta.owner._shell.ConnectionShell`):

- its inbound gate refuses what ACP refuses before an agent sees it, with the errors
  ``agent-meta agent`` answers (``-32700``, ``-32600``, ``-32602``); malformed lines never
  reach the child;
- its lifetime policy opens a session's lifetime at ``session/new``'s response and at a load
  or resume request (from the store, with ``--store``), resyncs before a load or resume
  response, and ends it before a ``session/close`` response, so nothing of a closed session
  reaches the client (R6); it serves ``session/set_title`` for a child without it (R13);
- the replay windows (:class:`~agent_meta.sansio.inbound._replay.ReplayWindows`) tell the child's
  replay from its own resync and its live state, and what the client lacks at the response.

What the child sends that cannot be state (a line that is not JSON or too long, a
``session_info_update`` the owner refuses, stale replay) is not forwarded: it is reported,
counted in :class:`RelayStatistics`, and the session goes on.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Final, Literal, final

import trio

from ..core._envelope import (
    EnvelopeFault,
    LineParseError,
    batch_entries,
    envelope_fault,
    parse_line,
)
from ..core._errors import FrameTooLargeError, MetaValueError
from ..core._jsonrpc import ErrorCode, is_request_id, session_of
from ..core._patch import replacement_patch
from ..core._session_info import SessionInfo, SessionInfoPatch
from ..owner._lifetime import (
    encoded_headroom,
    publish_encoded,
    publish_encoded_nowait,
)
from ..owner._shell import ConnectionShell
from ..sansio._encode import encode_update
from ..sansio._frames import join_response_frames
from ..sansio.inbound._batch import PublicationBatch
from ..sansio.inbound._replay import ReplayWindows, Verdict
from ..sansio.inbound._tracker import (
    LifetimeStep,
    OpeningStart,
    ReplayStart,
    info_update_of,
)
from ..sansio.inbound._v1_objects import WholeObjectHint, v1_meta_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..owner._lifetime import SessionLifetime
    from ..owner._shell import Admitted, Intake
    from ..owner._trio import MetaOwner
    from ..sansio._encode import EncodedUpdate
    from ..sansio.inbound._gate import Answer, InboundGate, Undecodable
    from ..sansio.inbound._tracker import InfoUpdate, OutboundPlan

__all__ = ["Relay", "RelayStatistics"]

_INFO: Final = "session_info_update"


@final
@dataclasses.dataclass(slots=True)
class RelayStatistics:
    """What a :class:`Relay` did with the lines of both sides (the owner counts its frames)."""

    client_lines: int = 0
    """Lines of the client forwarded to the child."""
    refused_client_lines: int = 0
    """Lines of the client answered with an error (or dropped: a malformed response) instead."""
    child_lines: int = 0
    """Lines of the child taken (forwarded, published or settled)."""
    bad_child_lines: int = 0
    """Lines of the child that are not JSON, or too long: not forwarded."""
    published: int = 0
    """``session_info_update`` frames of the child published into their lifetime."""
    malformed_updates: int = 0
    """``session_info_update`` frames the owner refused (a ``_meta`` that is no object, a title
    that is no string, too large ...): not forwarded."""
    replayed: int = 0
    """``session_info_update`` frames of a load or resume window forwarded as sent."""
    stale: int = 0
    """``session_info_update`` frames of history replayed after the response: not forwarded."""
    passed_through: int = 0
    """``session_info_update`` frames forwarded as sent: no lifetime was open for their session
    (sent before ``session/new`` answered, say: kept for the lifetime its response opens), or
    they carry fields the owner does not know."""
    resyncs: int = 0
    """Load and resume responses the owner's full resync preceded."""
    patched: int = 0
    """Load and resume responses a patch of what the client lacked preceded."""
    fenced_requests: int = 0
    """Requests of the child about a closed session: not forwarded, answered with an error."""
    unanswered: int = 0
    """Requests of the client answered with an error because the child exited first."""


@final
class Relay:
    """The messages of one client and one child, through one owner."""

    def __init__(
        self,
        owner: MetaOwner,
        child_stdin: trio.abc.SendStream,
        report: Callable[[str, str], None],
        *,
        child_meta: Literal["patch", "replace"] | None = None,
        coalesce: bool = True,
    ) -> None:
        self._owner = owner
        self._child_stdin = child_stdin
        self._to_child = trio.StrictFIFOLock()  # both pumps write to the child
        self._child_gone = False
        self._report = report
        self._shell = ConnectionShell(owner)
        self._windows = ReplayWindows(replace_meta=child_meta == "replace")
        # --child-meta not given: the child's initialize result may say what its v1 objects
        # mean; if it does not, objects that look whole are said once (_v1_objects.py).
        self._child_meta = child_meta
        self._whole = WholeObjectHint()
        # Sessions with publications that may still be queued: a frame of theirs forwarded as
        # sent waits until those are written (_forward_info).
        self._queued: set[str] = set()
        self._coalesce = coalesce
        self._batch: PublicationBatch | None = None
        # Unanswered session/new and session/fork requests, by id: what the child sends for a
        # session with no lifetime meanwhile is kept for the lifetime a response opens.
        self._openings: dict[int | str, int] = {}
        self.statistics = RelayStatistics()

    @property
    def gate(self) -> InboundGate:
        return self._shell.gate

    # -- the client's lines ----------------------------------------------------------------
    async def client_line(self, line: bytes) -> None:
        """One line of the client: answered here, or forwarded to the child as it is."""
        try:
            data = parse_line(line)
        except LineParseError as exc:
            await self.refuse_client(exc)
            return
        if isinstance(data, list):
            await self._client_batch(line, data)
            return
        fault = envelope_fault(data)
        if fault is not None:
            await self.refuse_client(fault)
            return
        intake = self._shell.take(data)
        self._note(intake)
        await self._send_answer(intake.answer)
        if intake.messages and await self._serve(intake.messages[0]):
            await self._send_child(line)

    async def refuse_client(self, failure: Undecodable) -> None:
        """Answer a line of the client that never reaches the child (not JSON, not a JSON-RPC
        message, too long), as the inbound gate answers it for ``agent-meta agent``: a malformed
        response is dropped (JSON-RPC never answers one)."""
        self.statistics.refused_client_lines += 1
        self._report("client", f"refused a line ({failure.code}): {failure}")
        await self._send_answer(self._shell.take(failure).answer)

    async def client_ended(self) -> None:
        """The client's input ended: so does the child's."""
        async with self._to_child:
            self._child_gone = True
            await self._child_stdin.aclose()

    async def _client_batch(self, line: bytes, data: list[Any]) -> None:
        """A JSON-RPC batch: forwarded as it is when the child may see every entry; otherwise
        the entries answered here (refused, or a ``session/set_title`` the child does not
        serve, R13) are answered in one array and the rest forwarded as a batch of their own
        (``docs/agent.md``: the one way ``own``'s batches differ)."""
        entries = batch_entries(data)
        if isinstance(entries, EnvelopeFault):  # an empty array
            await self.refuse_client(entries)
            return
        intake = self._shell.take_forwarded_batch(entries)
        self._note(intake)
        answers = [] if intake.answer is None else [intake.answer]
        here: list[Answer] = []
        passed: list[Mapping[str, Any]] = []
        for message in intake.messages:
            answer = await self._answered_here(message)
            if answer is None:
                passed.append(message)
            else:
                here.append(answer)
        answers.extend(answer.frame for answer in here if answer.frame is not None)
        if answers:
            await self.flush()  # the child's updates taken so far go first
            await self._send_answer(join_response_frames(answers))
        for answer in here:
            self._shell.sent(answer)
        if len(passed) == len(data):
            await self._send_child(line)
        elif passed:
            await self._send_child(json.dumps(passed, separators=(",", ":")).encode())

    async def _serve(self, message: Mapping[str, Any]) -> bool:
        """A message of the client the gate let through: whether it goes on to the child, or
        was answered here."""
        answer = await self._answered_here(message)
        if answer is None:
            return True
        await self.flush()  # the child's updates taken so far go first
        await self._send_answer(answer.frame)
        self._shell.sent(answer)
        return False

    async def _answered_here(self, message: Mapping[str, Any]) -> Answer | None:
        """Admit a message the gate let through; the answer it gets here instead of reaching
        the child (a store that failed, a ``session/set_title`` for a child without it, R13),
        or ``None`` when it goes on (its replay window or opening then noted)."""
        admitted = await self._shell.admit(message)
        if admitted.answer is not None:
            self.statistics.refused_client_lines += 1
            return admitted.answer
        if self._shell.answers_here(message):
            return await self._shell.answer_here(message)
        self._follow(admitted)
        return None

    def _note(self, intake: Intake) -> None:
        """Report what the gate refused or dropped of a client's line."""
        if intake.refused is not None:
            self.statistics.refused_client_lines += 1
            self._report("client", intake.refused)
        if intake.ignored is not None:
            self.statistics.refused_client_lines += 1
            self._report("client", f"dropped a notification: {intake.ignored}")

    def _follow(self, admitted: Admitted) -> None:
        """A request goes on to the child: what its replay window or its opening needs."""
        start = admitted.start
        message = admitted.message
        if isinstance(start, ReplayStart):
            self._windows.opened(
                start.session_id, message["id"], held=start.held, replays=start.replays
            )
            return
        if isinstance(start, OpeningStart):
            self._openings[message["id"]] = start.token
        if "id" in message and "method" in message:
            session_id = session_of(message.get("params"))  # a fork's: the session it forks
            if session_id is not None:
                self._windows.asked(session_id)

    async def _send_answer(self, frame: bytes | None) -> None:
        if frame is not None:
            await self._owner.send_encoded(frame, None)

    async def _send_child(self, line: bytes) -> None:
        """Write one line to the child (dropped once its input is closed)."""
        async with self._to_child:
            if self._child_gone:
                return
            try:
                await self._child_stdin.send_all(line + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._child_gone = True
                self._report("agent", "the agent's input is closed: nothing more reaches it")
                return
        self.statistics.client_lines += 1

    # -- the child's lines -------------------------------------------------------------------
    async def child_line(self, line: bytes) -> None:
        """One line of the child: published, settled or forwarded."""
        try:
            message = parse_line(line)
        except LineParseError as exc:
            self.child_bad_line(f"not forwarded, not JSON: {exc}: {_shown(line)}")
            return
        if not isinstance(message, dict | list):
            self.child_bad_line(f"not forwarded, not a JSON-RPC message: {_shown(line)}")
            return
        self.statistics.child_lines += 1
        if type(message) is dict and message.get("method") == "session/update":
            await self._child_update(message, line)
            return
        await self.flush()
        frame = line + b"\n"
        if isinstance(message, list):
            await self._child_batch(message, frame)
        elif "method" not in message:
            await self._child_response(message, frame)
        elif "id" in message:
            await self._child_request(message, frame)
        else:
            await self._owner.send_encoded(frame, session_of(message.get("params")))

    async def flush(self) -> None:
        """Publish the updates composed so far (the pump calls it once it has taken what the
        child wrote: before it waits for more)."""
        batch = self._batch
        if batch is None:
            return
        self._batch = None
        lifetime = self._owner.lifetime(batch.session_id)
        for each in batch.take(encoded_headroom(lifetime)):
            await self._submit(lifetime, each.update, each.count, each.line)

    def child_bad_line(self, why: str) -> None:
        """A line of the child that cannot be forwarded (not JSON, too long): said and counted."""
        self.statistics.bad_child_lines += 1
        self._report("agent", why)

    async def child_ended(self, status: int) -> None:
        """The child's output ended and it exited with ``status``: the client's requests it
        left unanswered are answered with an error."""
        for request_id in self._shell.gate.unanswered():
            self.statistics.unanswered += 1
            error = {
                "code": ErrorCode.INTERNAL_ERROR,
                "message": f"internal error: the agent exited (status {status}) before answering",
            }
            answer = await self._shell.respond({"jsonrpc": "2.0", "id": request_id, "error": error})
            await self._send_answer(answer.frame)
            self._shell.sent(answer)

    async def _child_batch(self, entries: list[Any], frame: bytes) -> None:
        """An array from the child (the answer to a batch): each response is rewritten and
        planned as one, and the array forwarded as it is unless a response was rewritten."""
        rewritten: list[Any] = []
        for entry in entries:
            if isinstance(entry, dict) and "method" not in entry:
                entry = await self._before_response(entry)
            rewritten.append(entry)
        if any(new is not old for new, old in zip(rewritten, entries, strict=True)):
            frame = _encoded(rewritten)
        await self._owner.send_encoded(frame, None)

    async def _child_response(self, message: dict[str, Any], frame: bytes) -> None:
        rewritten = await self._before_response(message)
        if rewritten is not message:  # the child's bytes, except what the client must see
            frame = _encoded(rewritten)
        await self._owner.send_encoded(frame, None)

    def _initialized(self, message: Mapping[str, Any]) -> None:
        """The child answered ``initialize``: whether it says what its v1 objects mean."""
        result = message.get("result")
        meaning = v1_meta_of(result) if isinstance(result, dict) else None
        if self._child_meta is None and meaning is not None:
            self._windows.replace_meta = meaning == "whole"
            self._report("agent", f"its v1 _meta objects are read as it says: {meaning}")

    async def _before_response(self, message: dict[str, Any]) -> Mapping[str, Any]:
        """What must happen before a response of the child is queued: the response as the
        client must get it (R13, the shell's rewrite), then the lifetime policy's step (open,
        resync, close), after what a load or resume window needs. Returns the response to
        forward (``message`` itself when nothing changed)."""
        if self._shell.policy.answering(message) == "initialize":
            self._initialized(message)
        rewritten = await self._shell.rewrite_forwarded(message)
        if "error" in rewritten and "error" not in message:
            self._report("store", f"the client's titles cannot be read: {rewritten['error']}")
        plan = await self._settle(rewritten)
        self._shell.policy.carry_out(plan)
        if plan.protocol_version is not None:
            self._windows.protocol_version = self._owner.protocol_version
        if plan.step is LifetimeStep.CLOSE and plan.session_id is not None:
            self._windows.closed(plan.session_id)
        return rewritten

    async def _settle(self, message: Mapping[str, Any]) -> OutboundPlan:
        """Plan a response of the child; at a load or resume response, make the lifetime the
        child's state and queue what the client lacks (the plan keeps its resync only if the
        client lacks everything)."""
        request_id = message.get("id")
        if isinstance(request_id, int | str):
            self._openings.pop(request_id, None)  # the tracker ends its mark with the plan
        session_id = self._windows.answering(request_id) if is_request_id(request_id) else None
        plan = self._shell.forwarded(message)
        if session_id is None:
            return plan
        success = plan.step is LifetimeStep.RESYNC
        if not self._owner.has_lifetime(session_id):
            self._windows.answered(session_id, success=False, known=SessionInfo())
            return plan
        lifetime = self._owner.lifetime(session_id)
        settled = self._windows.answered(session_id, success=success, known=lifetime.snapshot())
        if settled is None:
            return plan
        if settled.seed is not None:
            seed = settled.seed
            lifetime.seed(title=seed.title, updated_at=seed.updated_at, meta=seed.meta)
        missing = settled.missing
        if missing.resync:
            self.statistics.resyncs += 1
            return plan
        if missing.patch is not None:
            self.statistics.patched += 1
            patch = missing.patch
            await lifetime.publish(title=patch.title, updated_at=patch.updated_at, meta=patch.meta)
            self._queued.add(session_id)
        return dataclasses.replace(plan, step=None)

    async def _child_request(self, message: dict[str, Any], frame: bytes) -> None:
        """A request of the child to the client: forwarded, unless its session has ended (the
        child is then answered, so that it does not wait for ever)."""
        if is_request_id(message.get("id")):
            self._shell.gate.sent_request(message["id"])
        session_id = session_of(message.get("params"))
        if await self._owner.send_encoded(frame, session_id):
            return
        self.statistics.fenced_requests += 1
        self._report("agent", f"dropped {message['method']!r}: session {session_id!r} is closed")
        error = {
            "code": ErrorCode.RESOURCE_NOT_FOUND,
            "message": f"session {session_id!r} is closed",
        }
        answer = {"jsonrpc": "2.0", "id": message.get("id"), "error": error}
        await self._send_child(json.dumps(answer, separators=(",", ":")).encode())

    async def _child_update(self, message: dict[str, Any], line: bytes) -> None:
        """A ``session/update`` notification of the child (``line``, without its newline):
        composed into the batch, published, or forwarded as it is."""
        if "id" in message:  # a request named session/update: not the client's to ignore
            await self.flush()
            await self._child_request(message, line + b"\n")
            return
        params = message.get("params")
        session_id = session_of(params)
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if session_id is None or kind != _INFO or not isinstance(update, dict):
            await self.flush()
            if session_id is not None:
                self._windows.other(session_id, kind)
            await self._owner.send_encoded(line + b"\n", session_id)
            return
        owner = self._owner
        assert isinstance(params, dict)  # session_of found a session id in it
        info = None
        if owner.has_lifetime(session_id):
            info = info_update_of(params, update, offset_timestamps=owner.offset_timestamps)
        frame = line + b"\n"
        if info is None:  # no lifetime, or fields the owner would not reproduce: as sent
            await self.flush()
            self.statistics.passed_through += 1
            self._keep_for_opening(session_id, message)
            await self._forward_info(session_id, frame)
            return
        if self._windows.watching(session_id):
            await self.flush()
            verdict = self._verdict(session_id, info, frame)
            if verdict is Verdict.REPLAY:
                self.statistics.replayed += 1
                await self._forward_info(session_id, frame)
                return
            if verdict is not Verdict.LIVE:
                return
        await self._publish(session_id, info, frame)

    def _keep_for_opening(self, session_id: str, message: Mapping[str, Any]) -> None:
        """An update for a session with no lifetime, while a ``session/new`` or
        ``session/fork`` is unanswered: the child may be sending it from that request's
        handler, so each opening keeps it, and the one whose response opens the session seeds
        its lifetime with it (issue 27's first rule, for a child that has no handler marks)."""
        if not self._openings or self._owner.has_lifetime(session_id):
            return
        kept: list[Mapping[str, Any]] = [message]
        update = message["params"]["update"]
        if self._windows.replaces and isinstance(update.get("_meta"), dict):
            # --child-meta replace: the object is the whole _meta, so it follows a clear.
            cleared = {"sessionUpdate": _INFO, "_meta": None}
            params = {**message["params"], "update": cleared}
            kept.insert(0, {**message, "params": params})
        for token in self._openings.values():
            for each in kept:
                self._shell.policy.plan(each, handling=token)

    async def _forward_info(self, session_id: str, frame: bytes) -> None:
        """Forward a ``session_info_update`` of the child as it is. Publications of its session
        still queued are written first: a later publication merged into one queued before this
        frame would reach the client before it, and this frame could undo it (R3 holds across
        frames the owner did not render only if nothing merges across them)."""
        if session_id in self._queued:
            await self._owner.wait_flushed()
            self._queued.clear()
        await self._owner.send_encoded(frame, session_id)

    def _composes(self, session_id: str, update: EncodedUpdate) -> bool:
        """Whether a live update joins the batch of the updates composed so far."""
        if not self._coalesce or self._windows.replaces or self._windows.watching(session_id):
            return False
        return PublicationBatch.composable(update)

    def _verdict(self, session_id: str, info: InfoUpdate, frame: bytes) -> Verdict | None:
        """The windows' verdict on an update (``None``: malformed, reported)."""
        try:
            patch = SessionInfoPatch(
                title=info.title,  # type: ignore[arg-type]  # checked here (R12)
                updated_at=info.updated_at,  # type: ignore[arg-type]
                meta=info.meta,  # type: ignore[arg-type]
            )
        except MetaValueError as exc:
            self._malformed(session_id, exc, frame)
            return None
        lifetime = self._owner.lifetime(session_id)  # asked only where a lifetime is open
        verdict = self._windows.info(session_id, patch, lambda: lifetime.snapshot().updated_at)
        if verdict is Verdict.STALE:
            self.statistics.stale += 1
            self._report(
                "agent",
                f"dropped stale session info of session {session_id!r}: history replayed after "
                f"the load or resume response: {_shown(frame)}",
            )
        return verdict

    async def _publish(self, session_id: str, info: InfoUpdate, frame: bytes) -> None:
        """Publish an update of the child into its session's lifetime: checked and encoded
        first (R12), so a value the owner refuses is refused on its own, then composed into the
        batch or published at once."""
        lifetime = self._owner.lifetime(session_id)
        meta = info.meta
        try:
            if self._windows.replaces and isinstance(meta, dict):
                meta = replacement_patch(lifetime.snapshot().meta, meta)
            update = encode_update(
                title=info.title,
                updated_at=info.updated_at,
                meta=meta,
                notification_meta=info.notification_meta,
                offset_timestamps=self._owner.offset_timestamps,
            )
        except MetaValueError as exc:
            self._malformed(session_id, exc, frame)
            return
        if self._child_meta is None and isinstance(info.meta, dict):  # a valid object now
            self._notice_whole_objects(session_id, info.meta)
        batch = self._batch
        if batch is not None and batch.session_id != session_id:
            await self.flush()
            batch = None
        if self._composes(session_id, update):
            if batch is None:
                batch = self._batch = PublicationBatch(session_id)
            batch.add(update, frame)
            return
        await self.flush()
        await self._submit(lifetime, update, 1, frame)

    def _notice_whole_objects(self, session_id: str, meta: Mapping[str, object]) -> None:
        """Say once when a v1 child that did not say what its objects mean sends objects that
        look whole while they are read as patches (a key it removes would stay)."""
        windows = self._windows
        if windows.protocol_version >= 2 or windows.replace_meta:
            return
        missing = self._whole.seen(session_id, meta)
        if missing is not None:
            self._report(
                "agent",
                f"its v1 _meta objects look whole (one repeats what it sent before and leaves "
                f"out {missing!r}), but they are read as patches, so a key it removes stays: "
                "if it sends whole objects, run own with --child-meta replace",
            )

    async def _submit(
        self, lifetime: SessionLifetime, update: EncodedUpdate, count: int, frame: bytes = b""
    ) -> None:
        """Publish an encoded update standing for ``count`` updates of the child (a refusal:
        only a size the frame limit cannot carry is left to refuse)."""
        try:
            try:
                publish_encoded_nowait(lifetime, update)
            except trio.WouldBlock:
                await publish_encoded(lifetime, update)
        except FrameTooLargeError as exc:
            self._malformed(lifetime.session_id, exc, frame, count)
            return
        self.statistics.published += count
        self._queued.add(lifetime.session_id)

    def _malformed(
        self, session_id: str, exc: Exception, frame: bytes = b"", count: int = 1
    ) -> None:
        self.statistics.malformed_updates += count
        shown = f": {_shown(frame)}" if frame else ""
        self._report(
            "agent",
            f"not forwarded: a session_info_update of session {session_id!r} that is not "
            f"session info ({exc}){shown}",
        )


def _encoded(message: object) -> bytes:
    """A message (or an array of them) ``own`` changed, as a line for the client."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _shown(line: bytes, limit: int = 300) -> str:
    text = line.decode("utf-8", "replace").rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "..."
