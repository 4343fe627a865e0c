"""What a connection answers before a handler runs, decided once for both connections.

agent_meta's trio connection and the official-SDK adapter read the client's messages their own
way and run handlers their own way (trio tasks in cancel scopes; the SDK's asyncio tasks). What
to answer before any handler runs, and what a response becomes on its way out, is decided here
for both, by one :class:`InboundGate` per connection: the connection hands it every message it
reads (:meth:`~InboundGate.admit`, :meth:`~InboundGate.admit_batch`, :meth:`~InboundGate.refuse`)
and every response it is about to write (:meth:`~InboundGate.respond`), and writes what it says.

- A line or a batch entry that is no JSON-RPC message (not JSON, over the line limit, cut short
  by the end of the input, not a message) is answered ``-32700`` or ``-32600``, with its id when
  it can still be read, else ``null``; a malformed response is never answered.
- A request before ``initialize`` has been answered is refused ``-32600``, as is one whose id is
  that of a request still unanswered, one whose id is no string, integer or ``null``, and, under
  ACP v2 (negotiated, or an ``initialize`` that negotiates it), one whose id is ``null``.
- Params that are an array are refused ``-32602`` (ACP params are an object); a notification
  with array params is dropped (a notification is never answered), as is a ``session/cancel``
  whose ``sessionId`` is no string.
- A ``sessionId`` holding a NUL character or a lone surrogate is refused ``-32602``: no store can
  hold it (PostgreSQL's text has no NUL), nor UTF-8 carry a lone surrogate.
- A second ``initialize`` is refused ``-32600`` where the runtime takes one only
  (:attr:`InboundGate.initializes_once`: the SDK's connection).
- When the versions the runtime serves are known (:attr:`InboundGate.versions`), ``initialize``
  is negotiated here: below all of them ``-32022`` with ``data: {"requested", "supported"}``, a
  version that is no ``uint16`` ``-32602``, and the handler sees the version to answer.
- Under v2, a ``session/resume`` whose ``replayFrom`` is no cursor is refused ``-32602``
  (:func:`~agent_meta.core._replay.replay_of`).
- ``$/cancel_request`` targets the request still unanswered that it names (answered: its
  response is queued, or held in its batch); one for an unknown or already-answered id is
  dropped (ACP v2: "Receivers MUST ignore this notification for an unknown or already-answered
  request ID"). Where the runtime ignores it
  (:attr:`InboundGate.cancels_prompts`), one for a running ``session/prompt`` becomes that
  session's ``session/cancel``, and any other is dropped.
- Where the runtime needs it (:attr:`InboundGate.completes_params`), ``session/new``,
  ``session/load`` and ``session/resume`` without ``mcpServers`` get ``[]`` (the v1 schema
  requires the field; the SDK refuses the request without it).
- A response whose result cannot be sent (not JSON, over the frame limit) is replaced by
  ``-32603``, and an error whose data cannot be sent loses its data: a bad result costs that
  request, never the connection (R12).
- Each entry of a batch is admitted on its own; the batch is answered with one array once the
  last of its requests is (an array only of what the gate refused, at once).
- After the end of the input, the runtime stops once no request nor ACP v2 turn still runs
  (:attr:`InboundGate.may_stop`, :mod:`agent_meta.sansio.inbound._turns`).

What an exception out of a handler earns is :mod:`agent_meta.sansio.inbound._handler_errors`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeGuard, final

from ...core._errors import AgentMetaError, FrameTooLargeError, shown_id
from ...core._jsonrpc import (
    ErrorCode,
    JsonRpcError,
    RequestId,
    is_request_id,
    negotiate_version,
    session_of,
)
from ...core._replay import Replay, replay_of
from .._frames import build_response, join_response_frames
from ._turns import RunningTurns

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Admission",
    "Answer",
    "BatchAdmission",
    "GateStatistics",
    "InboundGate",
    "Undecodable",
]

_NEEDS_SERVERS: Final = frozenset({"session/new", "session/load", "session/resume"})
_ERROR_NAMES: Final[dict[int, str]] = {
    ErrorCode.PARSE_ERROR: "Parse error",
    ErrorCode.INVALID_REQUEST: "Invalid Request",
}
_SHOWN_ERROR_TEXT: Final = 1000
"""Characters of an error message kept when the error has to be sent without its data."""


class Undecodable(Protocol):
    """A line, or an entry of a batch, that is no JSON-RPC message, as the reader reports it:
    :class:`~agent_meta.wire.MessageDecodeError`, or the line splitter's
    :class:`~agent_meta.sansio._lines.LineTooLongError` and ``IncompleteLineError``. Its text
    says what is wrong."""

    @property
    def code(self) -> int:
        """The JSON-RPC error code it earns."""
        ...

    @property
    def request_id(self) -> int | str | None:
        """The message's id, when it can still be read."""
        ...

    @property
    def is_response(self) -> bool:
        """It is shaped like a response: never answered."""
        ...


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Admission:
    """What to do with one message from the client: pass ``message`` to the handlers (it may
    differ from the one received), or write ``answer`` (an error response) instead, or neither:
    ``ignored`` says why it was dropped."""

    message: Mapping[str, Any] | None = None
    answer: bytes | None = None
    ignored: str | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class BatchAdmission:
    """A batch: the messages to pass on one by one, in order, and the frame to write at once
    when no request of it reaches the handlers (else ``None``: :meth:`InboundGate.respond`
    assembles the answer)."""

    messages: tuple[Mapping[str, Any], ...]
    answer: bytes | None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What becomes of a response the agent sends (:meth:`InboundGate.respond`)."""

    response: Mapping[str, Any]
    """The response the client is told: the one given, or the error that replaced it."""
    frame: bytes | None
    """What to write now: the response, or the array of the batch it completed; ``None`` while
    its batch waits for other responses."""
    answered: tuple[RequestId, ...] = ()
    """The requests ``frame`` answers (a batch's, when it completes one)."""
    replaced: str | None = None
    """Why the response was replaced (for the agent's log), if it was."""


@final
@dataclasses.dataclass(slots=True)
class GateStatistics:
    """Counters of an :class:`InboundGate`."""

    refused_lines: int = 0
    """Lines and batch entries that are no JSON-RPC message (answered, unless a response)."""
    refused_requests: int = 0
    """Requests answered with an error by the gate instead of reaching a handler."""
    ignored_notifications: int = 0
    """Notifications dropped: params that are an array, a ``$/cancel_request`` of no request
    still unanswered (or that the runtime cannot cancel), a ``session/cancel`` of no session."""
    completed_params: int = 0
    """Requests passed on with a field the runtime requires filled in (``mcpServers``)."""
    translated_cancels: int = 0
    """``$/cancel_request`` notifications passed on as the prompt's ``session/cancel``."""
    batches: int = 0
    """JSON-RPC batches admitted."""
    replaced_responses: int = 0
    """Responses that could not be sent as they were (a result not JSON or over the frame
    limit, an error whose data could not be sent)."""


@final
class _Batch:
    __slots__ = ("answered", "expected", "frames")

    def __init__(self) -> None:
        self.expected = 0
        self.frames: list[bytes] = []
        self.answered: list[RequestId] = []


@final
class InboundGate:
    """The decisions in front of a connection's handlers (see the module docstring)."""

    __slots__ = (
        "_batches",
        "_in_flight",
        "_input_ended",
        "_outstanding",
        "cancels_prompts",
        "completes_params",
        "initialized",
        "initializes_once",
        "max_frame_bytes",
        "protocol_version",
        "statistics",
        "turns",
        "versions",
    )

    def __init__(
        self,
        *,
        max_frame_bytes: int,
        versions: Sequence[int] | None = None,
        cancels_prompts: bool = False,
        completes_params: bool = False,
        initializes_once: bool = False,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        """The owner's frame limit: a response over it is replaced by ``-32603``."""
        self.versions: tuple[int, ...] | None = None if versions is None else tuple(versions)
        """The protocol versions the runtime serves, ascending (``None``: the agent negotiates
        on its own, and the gate checks no version)."""
        self.cancels_prompts = cancels_prompts
        """Turn a ``$/cancel_request`` for a running ``session/prompt`` into ``session/cancel``
        (for a runtime that ignores ``$/cancel_request``)."""
        self.completes_params = completes_params
        """Fill in ``mcpServers: []`` where the runtime requires it."""
        self.initializes_once = initializes_once
        """The runtime takes one ``initialize``: a second is refused ``-32600`` (the SDK's
        connection); otherwise it is negotiated and answered again."""
        self.initialized = False
        """Whether ``initialize`` has been answered successfully."""
        self.protocol_version: int | None = None
        """The version ``initialize`` was answered with."""
        self.statistics = GateStatistics()
        # Requests passed on and not answered yet: id -> (method, session id).
        self._in_flight: dict[RequestId, tuple[str, str | None]] = {}
        self._batches: dict[RequestId, _Batch] = {}
        # Requests the agent sent the client, still unanswered.
        self._outstanding: set[RequestId] = set()
        self.turns = RunningTurns()  # ACP v2 turns running on after their answer (may_stop)
        self._input_ended = False

    # -- inbound ----------------------------------------------------------------------------
    def refuse(self, failure: Undecodable) -> bytes | None:
        """The frame answering a line that is no JSON-RPC message, or ``None`` for a malformed
        response (JSON-RPC never answers a response)."""
        self.statistics.refused_lines += 1
        if failure.is_response:
            return None
        return build_response(failure.request_id, error=_line_error(failure))

    def admit(self, message: Mapping[str, Any]) -> Admission:
        """Decide one message from the client (a JSON object that is a JSON-RPC message)."""
        method = message.get("method")
        request_id = message.get("id")
        if not isinstance(method, str):
            if is_request_id(request_id):
                self._outstanding.discard(request_id)  # the client answered a request
            return Admission(message)
        if "id" not in message:
            return self._notification(method, message)
        if not is_request_id(request_id):
            refusal = JsonRpcError(
                ErrorCode.INVALID_REQUEST, "a request id is a string, an integer or null"
            )
            return self._refused(None, refusal)
        try:
            admitted = self._request(method, request_id, message)
        except JsonRpcError as refusal:
            return self._refused(request_id, refusal)
        self._in_flight[request_id] = (method, session_of(admitted.get("params")))
        return Admission(admitted)

    def admit_batch(self, entries: Sequence[Mapping[str, Any] | Undecodable]) -> BatchAdmission:
        """Decide the entries of one batch; :meth:`respond` assembles its answer."""
        self.statistics.batches += 1
        batch = _Batch()
        passed: list[Mapping[str, Any]] = []
        for entry in entries:
            if not isinstance(entry, Mapping):
                frame = self.refuse(entry)
                if frame is not None:
                    batch.frames.append(frame)
                continue
            admission = self.admit(entry)
            if admission.answer is not None:
                batch.frames.append(admission.answer)
            if admission.message is None:
                continue
            passed.append(admission.message)
            if "method" in admission.message and "id" in admission.message:
                batch.expected += 1
                self._batches[admission.message["id"]] = batch
        if batch.expected or not batch.frames:
            return BatchAdmission(tuple(passed), None)
        return BatchAdmission(tuple(passed), join_response_frames(batch.frames))

    def _refused(self, request_id: RequestId, refusal: JsonRpcError) -> Admission:
        self.statistics.refused_requests += 1
        return Admission(answer=build_response(request_id, error=refusal.to_error()))

    def _ignored(self, why: str) -> Admission:
        self.statistics.ignored_notifications += 1
        return Admission(ignored=why)

    def _notification(self, method: str, message: Mapping[str, Any]) -> Admission:
        params = message.get("params")
        if isinstance(params, list):
            return self._ignored(f"{method!r}: params are an array, not an object")
        if method == "$/cancel_request":
            return self._cancel(message, params)
        if method == "session/cancel" and session_of(params) is None:
            return self._ignored("session/cancel: its sessionId is not a string")
        return Admission(message)

    def _cancel(self, message: Mapping[str, Any], params: object) -> Admission:
        """``$/cancel_request``: passed on only for a request still unanswered."""
        target = params.get("requestId") if isinstance(params, dict) else None
        running = None
        if type(target) is int or type(target) is str:
            running = self._in_flight.get(target)
        if running is None:
            return self._ignored("$/cancel_request: no request of that id is unanswered")
        if not self.cancels_prompts:
            return Admission(message)  # the runtime cancels it
        method, session_id = running
        if method != "session/prompt" or session_id is None:
            return self._ignored(f"$/cancel_request of {method!r}: the runtime cannot cancel it")
        self.statistics.translated_cancels += 1
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        return Admission(cancel)

    def _request(
        self, method: str, request_id: RequestId, message: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The request to pass on, or the :class:`JsonRpcError` it is refused with."""
        params = message.get("params")
        if request_id in self._in_flight:
            raise JsonRpcError(
                ErrorCode.INVALID_REQUEST, f"request id {request_id!r} is already in flight"
            )
        if isinstance(params, list):
            raise JsonRpcError(ErrorCode.INVALID_PARAMS, "invalid params: ACP params are an object")
        version = self.protocol_version or 1
        if method == "initialize" and self.initialized and self.initializes_once:
            raise JsonRpcError(
                ErrorCode.INVALID_REQUEST, "'initialize' again: the connection is initialized"
            )
        if method == "initialize":
            message, negotiated = self._initialize(message)
            if not self.initialized and negotiated is not None:
                version = negotiated  # the request falls under the rules it negotiates
        elif not self.initialized:
            raise JsonRpcError(ErrorCode.INVALID_REQUEST, f"{method!r} before 'initialize'")
        if request_id is None and version >= 2:
            raise JsonRpcError(ErrorCode.INVALID_REQUEST, "a request id must not be null in ACP v2")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        flaw = _unstorable(session_id) if isinstance(session_id, str) else None
        if flaw is not None:
            raise JsonRpcError(
                ErrorCode.INVALID_PARAMS,
                f"invalid params: 'sessionId' {shown_id(session_id)} holds {flaw}",
            )
        if replay_of(method, params, protocol_version=version) is Replay.MALFORMED:
            raise JsonRpcError(
                ErrorCode.INVALID_PARAMS,
                "invalid params: 'replayFrom' is an object with a string 'type', or null",
            )
        if self.completes_params and method in _NEEDS_SERVERS and _lacks_servers(params):
            self.statistics.completed_params += 1
            return {**message, "params": {**params, "mcpServers": []}}
        return message

    def _initialize(self, message: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None]:
        """``initialize`` asking for the version to answer, and that version (``None``: the
        agent negotiates). Raises ``-32022`` when the runtime serves no version at or below
        the one asked for, ``-32602`` for a version that is no ``uint16``."""
        if self.versions is None:
            return message, None
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        version = negotiate_version(requested, self.versions)
        if version == requested:
            return message, version
        assert isinstance(params, dict)  # negotiate_version took its protocolVersion
        return {**message, "params": {**params, "protocolVersion": version}}, version

    # -- outbound ---------------------------------------------------------------------------
    def respond(self, message: Mapping[str, Any]) -> Answer:
        """Note a response the agent is about to send (``id``, and ``result`` or ``error``),
        and decide what is written: the response as it is, or the error that replaces it when
        it cannot be sent; held while its batch waits for other responses.

        A request whose response is held is answered from now on; one whose response is to be
        written, once :meth:`sent` says it is queued (a ``$/cancel_request`` meanwhile still
        reaches it: its client has no answer yet)."""
        request_id = message.get("id")
        request = self._in_flight.get(request_id) if is_request_id(request_id) else None
        response, frame, replaced = self._checked(message)
        if replaced is not None:
            self.statistics.replaced_responses += 1
        if request is not None and request[0] == "initialize":
            self._initialized(response.get("result"))
        if request is not None:
            result, version = response.get("result"), self.protocol_version or 1
            ok = "result" in response
            # A prompt answered with its stopReason (as v1 answers) has ended its turn.
            ended = isinstance(result, dict) and "stopReason" in result
            self.turns.answered(request_id, *request, ok=ok and not ended, version=version)
        batch = None if request is None else self._batches.pop(request_id, None)
        if batch is None:
            return Answer(response, frame, (request_id,), replaced)
        del self._in_flight[request_id]  # held: answered with its batch
        batch.frames.append(frame)
        batch.answered.append(request_id)
        batch.expected -= 1
        if batch.expected:
            return Answer(response, None, (), replaced)
        return Answer(response, join_response_frames(batch.frames), tuple(batch.answered), replaced)

    def sent(self, answer: Answer) -> None:
        """The frame of ``answer`` is queued: the requests it answers are answered."""
        for request_id in answer.answered:
            self._in_flight.pop(request_id, None)

    def forwarded(self, message: Mapping[str, Any]) -> None:
        """Note a response written as the agent's own bytes, by a proxy that forwards them
        (``agent-meta own``): the request it answers is answered, ``initialize``'s settles the
        version. Nothing is checked or built: those bytes are not the gate's to change."""
        request_id = message.get("id")
        if not is_request_id(request_id):
            return
        request = self._in_flight.pop(request_id, None)
        if request is not None and request[0] == "initialize":
            self._initialized(message.get("result"))

    def sent_request(self, request_id: RequestId) -> None:
        """The agent sent the client a request (see :attr:`may_stop`)."""
        self._outstanding.add(request_id)

    def sent_notification(self, message: Mapping[str, Any]) -> None:
        """The agent sent the client a notification (see :attr:`turns`)."""
        self.turns.notified(message, self._in_flight)

    def _initialized(self, result: object) -> None:
        if isinstance(result, dict):
            version = result.get("protocolVersion")
            self.initialized = True
            self.protocol_version = version if type(version) is int else None

    def _checked(self, message: Mapping[str, Any]) -> tuple[Mapping[str, Any], bytes, str | None]:
        """The response to send, its frame, and why it replaced ``message`` (if it did).

        Raises :class:`~agent_meta.MetaValueError` for an id that is no JSON-RPC id."""
        request_id = message.get("id")
        if "error" in message:
            error = message["error"]
            try:
                return message, self._sized(build_response(request_id, error=error)), None
            except AgentMetaError as exc:  # its data cannot be sent: leave it out
                error = _without_data(error)
                replaced = f"the error response cannot be sent as it is: {exc}"
        else:
            try:
                result = message.get("result")
                return message, self._sized(build_response(request_id, result=result)), None
            except AgentMetaError as exc:
                text = f"internal error: the result cannot be sent ({exc})"
                error = {"code": ErrorCode.INTERNAL_ERROR, "message": text}
                replaced = f"the result cannot be sent: {exc}"
        response = {"jsonrpc": "2.0", "id": request_id, "error": error}
        return response, build_response(request_id, error=error), replaced

    def _sized(self, frame: bytes) -> bytes:
        if len(frame) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"a response of {len(frame)} bytes is over the frame limit of "
                f"{self.max_frame_bytes} bytes"
            )
        return frame

    # -- the end of the input ---------------------------------------------------------------
    def input_ended(self) -> None:
        """The client's input ended."""
        self._input_ended = True

    @property
    def may_stop(self) -> bool:
        """Whether the input has ended and no request of the client nor ACP v2 turn still runs,
        or the agent waits for an answer from the client, which can no longer come."""
        stopped = bool(self._outstanding) or not (self._in_flight or self.turns)
        return self._input_ended and stopped

    @property
    def in_flight(self) -> int:
        """Requests of the client passed on and not answered yet."""
        return len(self._in_flight)

    def unanswered(self) -> list[RequestId]:
        """The ids of the client's requests passed to the agent and not answered yet, oldest
        first (an agent that dies leaves them to be answered by whoever runs it)."""
        return list(self._in_flight)


def _lacks_servers(params: object) -> TypeGuard[dict[str, Any]]:
    """Whether params are an object without ``mcpServers``."""
    return isinstance(params, dict) and "mcpServers" not in params


def _line_error(failure: Undecodable) -> dict[str, Any]:
    """The error a line that is no message earns: its code's name, then what is wrong."""
    name = _ERROR_NAMES.get(failure.code, "Error")
    return {"code": failure.code, "message": f"{name}: {failure}"[:_SHOWN_ERROR_TEXT]}


def _without_data(error: object) -> dict[str, Any]:
    """An error response's ``error`` without its ``data``, its message cut short; ``-32603``
    when it is no error object at all."""
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        if type(code) is int and isinstance(message, str):
            return {"code": code, "message": message[:_SHOWN_ERROR_TEXT]}
    return {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "internal error: an error response not sendable",
    }


def _unstorable(session_id: str) -> str | None:
    """What in a session id no store can hold (PostgreSQL's text has no NUL) nor UTF-8 carry
    (a lone surrogate, which JSON's ``\\ud800`` escape can spell), if anything."""
    if "\0" in session_id:
        return "a NUL character (U+0000)"
    for char in session_id:
        if "\ud800" <= char <= "\udfff":
            return f"a lone surrogate (U+{ord(char):04X})"
    return None
