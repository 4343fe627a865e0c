"""What a connection answers before its agent sees a message, when someone else's stack routes.

An agent on another JSON-RPC stack (the official ACP Python SDK) validates and routes messages
itself, and some of its decisions are not ACP's: its v1 side serves ``session/new`` before
``initialize``, its v2 side answers ``-32602`` to any version but 2, no release takes a batch,
releases before 1.0 ignore ``$/cancel_request``. agent_meta's own connection decides these as
the spec says. :class:`InboundGate` makes the same decisions in front of the SDK, so that both
runtimes answer alike; the adapter only carries them out:

- a request before ``initialize`` has been answered is refused ``-32600``;
- a request whose id is that of a request still unanswered is refused ``-32600``;
- under ACP v2 (negotiated, or an ``initialize`` that negotiates it) a request id must not be
  ``null``: ``-32600``;
- params that are an array are refused ``-32602`` (ACP params are an object);
- a ``sessionId`` holding a NUL character or a lone surrogate is refused ``-32602``: no
  store can hold it (PostgreSQL's text has no NUL), nor UTF-8 carry a lone surrogate;
- when the versions the runtime serves are known (:attr:`InboundGate.versions`), an
  ``initialize`` asking for less than all of them is refused ``-32022`` with ``data:
  {"requested", "supported"}``, and one asking for more than the highest is passed on as
  asking for the highest (a v2 runtime refuses any other version; ACP says to offer ours);
- under v2, a ``session/resume`` whose ``replayFrom`` is neither ``null`` nor an object with a
  string ``type`` is refused ``-32602`` (the SDK would resume without replay instead);
- ``session/new``, ``session/load`` and ``session/resume`` without ``mcpServers`` get ``[]``
  (the v1 schema requires the field, the SDK refuses the request without it; v2 and
  agent_meta's connection take it as empty);
- where the runtime ignores ``$/cancel_request`` (:attr:`InboundGate.cancels_prompts`), one for
  a running ``session/prompt`` becomes that session's ``session/cancel``, which the agent
  answers by ending the turn ``cancelled``;
- each entry of a batch is admitted on its own; the responses of its requests are held
  until the last one is in, then written as one array (:meth:`InboundGate.outbound`).

The gate also follows what is in flight for the end of the input: :attr:`InboundGate.may_stop`
says when no request of the client is still being answered, so that the runtime is not torn
down under a running prompt (agent_meta's connection answers it too).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

from ..core._errors import shown_id
from ..core._jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    JsonRpcError,
    negotiate_version,
)
from ._seam import is_request_id

if TYPE_CHECKING:
    from collections.abc import Container, Mapping, Sequence

__all__ = [
    "Admission",
    "BatchAdmission",
    "GateStatistics",
    "InboundGate",
    "InvalidEntry",
    "Release",
    "refusal",
]

_RequestId: TypeAlias = int | str | None

_NEEDS_SERVERS: Final = frozenset({"session/new", "session/load", "session/resume"})


@final
@dataclasses.dataclass(frozen=True, slots=True)
class InvalidEntry:
    """A batch entry that is not a JSON-RPC message: the error its place in the answer holds."""

    error: dict[str, Any]
    request_id: _RequestId = None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Admission:
    """What to do with one message from the client: pass ``message`` to the agent (it may differ
    from the one received), or answer ``request_id`` with ``error``, or neither (dropped)."""

    message: Mapping[str, Any] | None = None
    error: dict[str, Any] | None = None
    request_id: _RequestId = None


@final
@dataclasses.dataclass(frozen=True, slots=True)
class BatchAdmission:
    """A batch: the messages to pass to the agent one by one, in order, and the answer to write
    at once when no request of it reaches the agent (else ``None``: the answer is assembled as
    the agent responds)."""

    messages: tuple[Mapping[str, Any], ...]
    answer: list[dict[str, Any]] | None


class Release(enum.Enum):
    """What becomes of a response the agent sends (:meth:`InboundGate.outbound`)."""

    WRITE = "write"
    """Write it as it is."""
    HOLD = "hold"
    """It belongs to a batch still waiting for other responses: the gate keeps it."""
    BATCH = "batch"
    """It completed its batch: write :attr:`InboundGate.completed` (one array) instead."""


@final
@dataclasses.dataclass(slots=True)
class GateStatistics:
    """Counters of an :class:`InboundGate`."""

    refused_requests: int = 0
    """Requests answered with an error by the gate instead of reaching the agent."""
    completed_params: int = 0
    """Requests passed on with a field the agent's stack requires filled in (``mcpServers``)."""
    translated_cancels: int = 0
    """``$/cancel_request`` notifications passed on as the prompt's ``session/cancel``."""
    batches: int = 0
    """JSON-RPC batches admitted."""


@final
class _Batch:
    __slots__ = ("expected", "responses")

    def __init__(self) -> None:
        self.expected = 0
        self.responses: list[dict[str, Any]] = []


@final
class InboundGate:
    """The decisions in front of an agent's own JSON-RPC stack, for one connection."""

    __slots__ = (
        "_batches",
        "_in_flight",
        "_input_ended",
        "_outstanding",
        "cancels_prompts",
        "completed",
        "initialized",
        "protocol_version",
        "statistics",
        "versions",
    )

    def __init__(
        self, *, versions: Sequence[int] | None = None, cancels_prompts: bool = False
    ) -> None:
        self.versions: tuple[int, ...] | None = None if versions is None else tuple(versions)
        """The protocol versions the runtime serves, ascending (``None``: the agent negotiates
        on its own, and the gate checks no version)."""
        self.cancels_prompts = cancels_prompts
        """Turn a ``$/cancel_request`` for a running ``session/prompt`` into ``session/cancel``
        (for a runtime that ignores ``$/cancel_request``)."""
        self.initialized = False
        """Whether ``initialize`` has been answered successfully."""
        self.protocol_version: int | None = None
        """The version ``initialize`` was answered with."""
        self.completed: list[dict[str, Any]] = []
        """The answer of the batch the last :attr:`Release.BATCH` completed."""
        self.statistics = GateStatistics()
        # Requests passed to the agent and not answered yet: id -> (method, session id).
        self._in_flight: dict[_RequestId, tuple[str, str | None]] = {}
        self._batches: dict[_RequestId, _Batch] = {}
        # Requests the agent sent the client, still unanswered.
        self._outstanding: set[_RequestId] = set()
        self._input_ended = False

    # -- inbound ----------------------------------------------------------------------------
    def admit(self, message: Mapping[str, Any]) -> Admission:
        """Decide one message from the client (a valid JSON-RPC message)."""
        method = message.get("method")
        request_id = message.get("id")
        if not isinstance(method, str):
            if is_request_id(request_id):
                self._outstanding.discard(request_id)  # the client answered a request
            return Admission(message)
        if "id" not in message:
            return Admission(self._notification(method, message))
        if not is_request_id(request_id):
            self.statistics.refused_requests += 1
            refusal = JsonRpcError(INVALID_REQUEST, "a request id is a string, an integer or null")
            return Admission(error=refusal.to_error())
        try:
            admitted = self._request(method, request_id, message)
        except JsonRpcError as refusal:
            self.statistics.refused_requests += 1
            return Admission(error=refusal.to_error(), request_id=request_id)
        params = admitted.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        self._in_flight[request_id] = (method, session_id if isinstance(session_id, str) else None)
        return Admission(admitted)

    def admit_batch(self, entries: Sequence[Mapping[str, Any] | InvalidEntry]) -> BatchAdmission:
        """Decide the entries of one batch; the answer collects what :meth:`outbound` holds."""
        self.statistics.batches += 1
        batch = _Batch()
        passed: list[Mapping[str, Any]] = []
        for entry in entries:
            if isinstance(entry, InvalidEntry):
                batch.responses.append({"id": entry.request_id, "error": entry.error})
                continue
            admission = self.admit(entry)
            if admission.error is not None:
                batch.responses.append({"id": admission.request_id, "error": admission.error})
                continue
            if admission.message is None:
                continue
            passed.append(admission.message)
            if "method" in admission.message and "id" in admission.message:
                batch.expected += 1
                self._batches[admission.message["id"]] = batch
        if batch.expected:
            return BatchAdmission(tuple(passed), None)
        return BatchAdmission(tuple(passed), batch.responses or None)

    def _notification(self, method: str, message: Mapping[str, Any]) -> Mapping[str, Any]:
        if method != "$/cancel_request" or not self.cancels_prompts:
            return message
        params = message.get("params")
        running = self._in_flight.get(params.get("requestId")) if isinstance(params, dict) else None
        if running is None or running[0] != "session/prompt" or running[1] is None:
            return message  # unknown, answered, or not a prompt: the runtime ignores it
        self.statistics.translated_cancels += 1
        return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": running[1]}}

    def _request(
        self, method: str, request_id: _RequestId, message: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The request to pass on, or the :class:`JsonRpcError` it is refused with."""
        params = message.get("params")
        speaks_v2 = (self.protocol_version or 1) >= 2
        if method == "initialize" and not self.initialized:
            message, version = self._initialize(message)
            speaks_v2 = version is not None and version >= 2
        refused = refusal(
            method,
            request_id,
            params,
            in_flight=self._in_flight,
            initialized=self.initialized,
            speaks_v2=speaks_v2,
        )
        if refused is not None:
            raise refused
        if method == "session/resume" and speaks_v2 and _malformed_cursor(params):
            raise JsonRpcError(
                INVALID_PARAMS,
                "invalid params: 'replayFrom' is an object with a string 'type', or null",
            )
        if method in _NEEDS_SERVERS and isinstance(params, dict) and "mcpServers" not in params:
            self.statistics.completed_params += 1
            return {**message, "params": {**params, "mcpServers": []}}
        return message

    def _initialize(self, message: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None]:
        """``initialize`` as the runtime should see it, and the version it negotiates (``None``:
        the agent decides). Raises ``-32022`` when the runtime serves no version at or below
        the one asked for."""
        versions = self.versions
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        if versions is None or type(requested) is not int:
            return message, None  # the agent negotiates (and refuses a version that is no int)
        version = negotiate_version(requested, versions)
        if version == requested or version < 2:
            return message, version
        assert isinstance(params, dict)
        return {**message, "params": {**params, "protocolVersion": version}}, version

    # -- outbound ---------------------------------------------------------------------------
    def outbound(self, message: Mapping[str, Any]) -> Release:
        """Note one message the agent sends; what becomes of it."""
        request_id = message.get("id")
        if not is_request_id(request_id):
            return Release.WRITE
        if "method" in message:
            if "id" in message:
                self._outstanding.add(request_id)
            return Release.WRITE
        request = self._in_flight.pop(request_id, None)
        if request is None:
            return Release.WRITE
        if request[0] == "initialize" and isinstance(message.get("result"), dict):
            version = message["result"].get("protocolVersion")
            self.initialized = True
            self.protocol_version = version if type(version) is int else None
        batch = self._batches.pop(request_id, None)
        if batch is None:
            return Release.WRITE
        response = {key: value for key, value in message.items() if key != "jsonrpc"}
        batch.responses.append(response)
        batch.expected -= 1
        if batch.expected:
            return Release.HOLD
        self.completed = batch.responses
        return Release.BATCH

    # -- the end of the input -----------------------------------------------------------------
    def input_ended(self) -> None:
        """The client's input ended."""
        self._input_ended = True

    @property
    def may_stop(self) -> bool:
        """Whether the runtime may stop after the end of the input: no request of the client is
        still being answered, or the agent waits for an answer from the client, which can no
        longer come."""
        return self._input_ended and (not self._in_flight or bool(self._outstanding))

    @property
    def in_flight(self) -> int:
        """Requests of the client passed to the agent and not answered yet."""
        return len(self._in_flight)

    def unanswered(self) -> list[_RequestId]:
        """The ids of the client's requests passed to the agent and not answered yet, oldest
        first (an agent that dies leaves them to be answered by whoever runs it)."""
        return list(self._in_flight)


def _malformed_cursor(params: object) -> bool:
    """Whether a v2 ``session/resume`` carries a ``replayFrom`` that is no cursor (the SDK's
    v2 side would take it as none, and resume without the replay asked for)."""
    if not isinstance(params, dict) or params.get("replayFrom") is None:
        return False
    cursor = params["replayFrom"]
    return not isinstance(cursor, dict) or not isinstance(cursor.get("type"), str)


def refusal(
    method: str,
    request_id: _RequestId,
    params: object,
    *,
    in_flight: Container[_RequestId],
    initialized: bool,
    speaks_v2: bool,
) -> JsonRpcError | None:
    """Why a request is refused before any handler runs, if it is (both connections ask):
    ``speaks_v2`` says the connection is under ACP v2's rules (negotiated, or an
    ``initialize`` that negotiates v2), whose request ids "MUST NOT be null"."""
    if request_id is None and speaks_v2:
        return JsonRpcError(INVALID_REQUEST, "a request id must not be null in ACP v2")
    if request_id in in_flight:
        return JsonRpcError(INVALID_REQUEST, f"request id {request_id!r} is already in flight")
    if isinstance(params, list):
        return JsonRpcError(INVALID_PARAMS, "invalid params: ACP params are an object")
    if not initialized and method != "initialize":
        return JsonRpcError(INVALID_REQUEST, f"{method!r} before 'initialize'")
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    flaw = _unstorable(session_id) if isinstance(session_id, str) else None
    if flaw is not None:
        return JsonRpcError(
            INVALID_PARAMS, f"invalid params: 'sessionId' {shown_id(session_id)} holds {flaw}"
        )
    return None


def _unstorable(session_id: str) -> str | None:
    """What in a session id no store can hold (PostgreSQL's text has no NUL) nor UTF-8 carry
    (a lone surrogate, which JSON's ``\\ud800`` escape can spell), if anything."""
    if "\0" in session_id:
        return "a NUL character (U+0000)"
    for char in session_id:
        if "\ud800" <= char <= "\udfff":
            return f"a lone surrogate (U+{ord(char):04X})"
    return None
