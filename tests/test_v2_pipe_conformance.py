"""ACP v2 conformance of the connection and the reference agent, over a real pipe (issue 12).

Every test starts ``python -m agent_meta agent`` as a child process and plays the client with
raw NDJSON lines, asserting what the ACP text requires; each runs on both runtimes (trio, and
``--runtime sdk`` where the official SDK has its v2 side, 1.0 on; :data:`SDK_GAPS` lists what the
SDK runtime does not do yet). Sources are cited per test:

* ``spec``: ``agentclientprotocol/agent-client-protocol`` at ``b7f00054`` (2026-08-22), paths
  under ``docs/protocol/v2/``;
* ``sdk``: ``@agentclientprotocol/sdk`` 2.4.0 as installed by ``integration/node`` (``npm ci``):
  its bundled ``schema/v2/schema.json`` is newer than the spec commit and wins where they differ.

These tests were written before the fixes: each one fails on the code it was written against.

**A prompt that is provably still running.** ``/ask TEXT`` sends ``session/request_permission``
and cannot go on until the client answers; the test holds the answer. So when the test sends
``session/close`` or ``session/resume``, the prompt is running, whatever the scheduling, and every
ordering assertion is deterministic. ``/burst N KEY`` cannot do this: it runs in a background task,
the prompt that starts it ends at once, and its frames race the client's requests, so it never
proves that a *prompt* is running when the next request arrives. The price: while ``/ask`` does
not exist, the close and resume tests fail at their precondition (no permission request).

No sleeps: a wait reads frames until a condition holds, bounded by :data:`WAIT`; running out of
time, or the output ending, is a failure that names what was awaited and the last frames read.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_meta import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from pathlib import Path

WAIT = 20.0
"""Bound on any one wait for the agent (its start-up included), in seconds."""
TOTAL = 90.0
"""Bound on one agent process's whole conversation, in seconds."""
CWD = "/tmp/agent-meta-v2-pipe"
"""An absolute working directory for sessions (the agent never touches it)."""
FOREGROUND = ("running", "requires_action")
"""The v2 states that mean foreground work is in progress."""

# A frame is one parsed NDJSON line: an object, or an array (a batch response).
Frame = Any


class Peer:
    """The client end of the agent's pipes: writes NDJSON lines, reads and records frames."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""
        self._ids = itertools.count(1)
        self.frames: list[Frame] = []
        """Every frame received, in wire order."""

    # ------------------------------------------------------------------- sending

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        await self._stdin.send_all(data)

    def next_id(self) -> int:
        return next(self._ids)

    async def request(self, method: str, params: Any) -> int:
        """Send a request; return its id."""
        request_id = self.next_id()
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def respond(self, request_id: Any, result: Any) -> None:
        """Answer a request the agent sent."""
        await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # ------------------------------------------------------------------- receiving

    def mark(self) -> int:
        """The position of the next frame to arrive (to slice :attr:`frames` later)."""
        return len(self.frames)

    async def _receive(self) -> Frame | None:
        while b"\n" not in self._buffer:
            chunk = await self._stdout.receive_some(65536)
            if not chunk:
                assert not self._buffer.strip(), f"partial frame at EOF: {self._buffer[:200]!r}"
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame = json.loads(line)
        self.frames.append(frame)
        return frame

    async def until(
        self,
        what: str,
        predicate: Callable[[Frame], bool],
        *,
        fail_if: Callable[[Frame], str | None] | None = None,
        serve: Callable[[Frame], Awaitable[None]] | None = None,
    ) -> Frame:
        """Read frames until one satisfies ``predicate``; return it.

        ``serve`` sees every frame first (to answer the agent's requests while waiting);
        ``fail_if`` returns a reason when a frame proves that ``what`` can no longer come.
        """
        with trio.move_on_after(WAIT):
            while True:
                frame = await self._receive()
                if frame is None:
                    raise AssertionError(f"the agent's output ended before {what}{self.tail()}")
                if serve is not None:
                    await serve(frame)
                if predicate(frame):
                    return frame
                if fail_if is not None and (reason := fail_if(frame)) is not None:
                    raise AssertionError(f"{reason}, before {what}{self.tail()}")
        raise AssertionError(f"timed out after {WAIT} s waiting for {what}{self.tail()}")

    async def response(self, request_id: int, what: str = "") -> dict[str, Any]:
        frame: dict[str, Any] = await self.until(
            what or f"the response to request {request_id}", lambda f: is_response(f, request_id)
        )
        return frame

    async def next_reply(self, what: str) -> Frame:
        """The next frame that is not a message from the agent (a response, or an array)."""
        return await self.until(
            what, lambda f: isinstance(f, list) or (isinstance(f, dict) and "method" not in f)
        )

    async def finish(self) -> int:
        """Close the agent's input, read its output to the end, and return its exit code."""
        await self._stdin.aclose()
        with trio.move_on_after(WAIT):
            while await self._receive() is not None:
                pass
            return await self.process.wait()
        raise AssertionError(f"the agent did not finish within {WAIT} s of EOF{self.tail()}")

    def tail(self, count: int = 8) -> str:
        lines = "\n".join(json.dumps(frame)[:400] for frame in self.frames[-count:])
        return f"\nlast frames received:\n{lines}" if lines else "\n(no frame received)"


RUNTIMES = ("trio", "sdk")
"""``agent-meta agent --runtime``: every test runs against both (see :func:`runtime`)."""

SDK_HAS_NO_V2 = (
    "the installed official Python SDK has no ACP v2 side (acp.experimental.v2, 1.0 on): "
    "--runtime sdk speaks ACP v1 only"
)

SDK_GAPS: dict[str, str] = {}
"""Tests the SDK runtime fails for what the SDK's v2 side does not do and the adapter does not
do yet: expected failures there (strict: one that passes must leave this list)."""


def _release_gaps() -> dict[str, str]:
    """What the installed SDK release's connection lacks (1.0.0rc2 withdraws no request)."""
    try:
        from agent_meta.sdk._release import installed_release

        release = installed_release()
    except ImportError:
        return {}
    if not release.v2 or release.cancels_requests:
        return {}
    return {
        "test_close_during_a_running_prompt_finishes_it_before_the_response": (
            f"agent-client-protocol {release.version}'s connection does not withdraw a "
            "cancelled request to the client with $/cancel_request (1.0.0rc3 on)"
        )
    }


SDK_GAPS.update(_release_gaps())

_runtime = "trio"


def _sdk_speaks_v2() -> bool:
    try:
        return importlib.util.find_spec("acp.experimental.v2") is not None
    except ModuleNotFoundError:  # no SDK, or no acp.experimental
        return False


@pytest.fixture(params=RUNTIMES, autouse=True)
def runtime(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test against ``agent-meta agent`` on each runtime: trio, and the official
    Python SDK 1.0 (``--runtime sdk``) where it has its v2 side."""
    global _runtime  # one test at a time: set here, restored after
    chosen: str = request.param
    if chosen == "sdk" and not _sdk_speaks_v2():
        pytest.skip(SDK_HAS_NO_V2)
    gap = SDK_GAPS.get(request.function.__name__)
    if chosen == "sdk" and gap is not None:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True))
    previous, _runtime = _runtime, chosen
    try:
        yield chosen
    finally:
        _runtime = previous


@asynccontextmanager
async def agent(*args: str) -> AsyncIterator[Peer]:
    """The reference agent as a child process over pipes (stderr is inherited), on the runtime
    the :func:`runtime` fixture chose."""
    flags = [] if _runtime == "trio" else ["--runtime", _runtime]
    command = [sys.executable, "-m", "agent_meta", "agent", *flags, *args]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        with trio.fail_after(TOTAL):
            yield Peer(process)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()


# --------------------------------------------------------------------------- frame predicates


def is_response(frame: Frame, request_id: Any) -> bool:
    return (
        isinstance(frame, dict)
        and "method" not in frame
        and frame.get("id") == request_id
        and ("result" in frame or "error" in frame)
    )


def is_message(frame: Frame, method: str) -> bool:
    return isinstance(frame, dict) and frame.get("method") == method


def update_of(frame: Frame, session_id: str, kind: str) -> dict[str, Any] | None:
    """The ``update`` of a ``session/update`` of ``kind`` for ``session_id``, else ``None``."""
    if not is_message(frame, "session/update"):
        return None
    params = frame.get("params") or {}
    update = params.get("update")
    if params.get("sessionId") != session_id or not isinstance(update, dict):
        return None
    return update if update.get("sessionUpdate") == kind else None


def is_idle(frame: Frame, session_id: str) -> bool:
    state = update_of(frame, session_id, "state_update")
    return state is not None and state.get("state") == "idle"


def stop_reason(frame: Frame, session_id: str) -> object:
    """The ``stopReason`` of an idle ``state_update`` for ``session_id`` (``None`` if absent)."""
    state = update_of(frame, session_id, "state_update")
    assert state is not None, f"not a state_update of {session_id}: {frame!r}"
    assert state.get("state") == "idle", f"not an idle state_update: {frame!r}"
    return state.get("stopReason")


def states(frames: list[Frame], session_id: str) -> list[dict[str, Any]]:
    found = (update_of(frame, session_id, "state_update") for frame in frames)
    return [state for state in found if state is not None]


def error_code(frame: Frame) -> int:
    assert isinstance(frame, dict), f"expected one error response, got {frame!r}"
    assert "error" in frame, f"expected an error response, got {frame!r}"
    error = frame["error"]
    assert isinstance(error.get("message"), str), frame
    code = error.get("code")
    assert isinstance(code, int), frame
    return code


def reply_text(frames: list[Frame], session_id: str) -> str:
    """All agent text of ``agent_message_chunk`` / ``agent_message`` updates, joined."""
    parts: list[str] = []
    for frame in frames:
        chunk = update_of(frame, session_id, "agent_message_chunk")
        if chunk is not None:
            parts.append(str(chunk.get("content", {}).get("text", "")))
        message = update_of(frame, session_id, "agent_message")
        if message is not None:
            parts.extend(str(block.get("text", "")) for block in message.get("content") or [])
    return "".join(parts)


# --------------------------------------------------------------------------- conversation steps


def initialize_params(version: int) -> dict[str, Any]:
    if version >= 2:
        return {
            "protocolVersion": version,
            "info": {"name": "v2-pipe-conformance", "version": "0"},
            "capabilities": {},
        }
    return {
        "protocolVersion": version,
        "clientInfo": {"name": "v2-pipe-conformance", "version": "0"},
        "clientCapabilities": {},
    }


async def initialize(peer: Peer, version: int) -> None:
    request_id = await peer.request("initialize", initialize_params(version))
    frame = await peer.response(request_id, f"the initialize (v{version}) response")
    assert frame.get("result", {}).get("protocolVersion") == version, frame


async def new_session(peer: Peer) -> str:
    request_id = await peer.request("session/new", {"cwd": CWD, "mcpServers": []})
    frame = await peer.response(request_id, "the session/new response")
    session_id = frame["result"]["sessionId"]
    assert isinstance(session_id, str), frame
    return session_id


async def prompt(peer: Peer, session_id: str, text: str) -> int:
    return await peer.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )


async def wait_for_permission_request(
    peer: Peer, session_id: str, prompt_id: int, *, v2: bool = True
) -> dict[str, Any]:
    """The ``session/request_permission`` that ``/ask`` sends; fails fast if the turn ends."""

    def turn_ended(frame: Frame) -> str | None:
        if is_idle(frame, session_id):
            return "the /ask prompt's turn ended (idle state_update) without asking; is /ask there?"
        if not v2 and is_response(frame, prompt_id):
            return "the /ask prompt was answered without asking; is /ask implemented?"
        return None

    frame: dict[str, Any] = await peer.until(
        "a session/request_permission from /ask",
        lambda f: is_message(f, "session/request_permission") and "id" in f,
        fail_if=turn_ended,
    )
    assert frame["params"]["sessionId"] == session_id, frame
    return frame


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


# --------------------------------------------------------------------------- point 1: batches


async def test_batches_are_processed_entry_by_entry() -> None:
    """Point 1. spec ``transports.mdx:23-24``: a stdio message may be "a batch array";
    ``transports.mdx:45-75``: follow the JSON-RPC 2.0 batch rules: an empty array gets one
    ``-32600`` with ``id: null`` (not an array); the receiver SHOULD answer with one array of the
    responses (any order, matched by id); MUST NOT reply to notifications, so a
    notification-only batch gets nothing; invalid entries get their own ``-32600`` with
    ``id: null``. ``migration.mdx:705``, ``:726``. rust-sdk ``md/transport-architecture.md:
    167-192`` does the same for v1 and v2. Conflict: sdk 2.4.0 ``dist/v2/acp.d.ts:46-47`` says
    "ACP does not use JSON-RPC batches" and its schema dropped the batch types that 2.0.0 had;
    this test follows the issue (process batches), which no 2.4.0 client is hurt by.
    """
    async with agent() as peer:
        # A one-entry batch holding initialize (typescript-sdk PR #223, "Accept single-entry
        # initialize batches"; rust-sdk transport-architecture.md:198-203).
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": initialize_params(2),
        }
        await peer.send([init])
        reply = await peer.next_reply("the reply to a batch holding initialize")
        assert isinstance(reply, list), f"a batch call must get a response array, got {reply!r}"
        assert [r.get("id") for r in reply] == [1], reply
        assert reply[0]["result"]["protocolVersion"] == 2, reply

        # Two requests and a notification: one array with exactly the two responses.
        await peer.send(
            [
                {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}},
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}},
                {"jsonrpc": "2.0", "id": 3, "method": "_agent_meta/no_such_method", "params": {}},
            ]
        )
        reply = await peer.next_reply("the reply to a batch of two requests")
        assert isinstance(reply, list), reply
        by_id = {r["id"]: r for r in reply}
        assert sorted(by_id) == [2, 3], reply
        assert by_id[2]["result"]["sessions"] == [], reply
        assert error_code(by_id[3]) == -32601

        # Notifications only: no reply at all. The next reply must be the one to request 4.
        await peer.send(
            [
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}},
                {"jsonrpc": "2.0", "method": "_agent_meta/nothing", "params": {}},
            ]
        )
        list_id = await peer.request("session/list", {})
        reply = await peer.next_reply("the reply to the request after a notification-only batch")
        assert is_response(reply, list_id), f"a notification-only batch got a reply: {reply!r}"

        # Invalid entries: each gets its own -32600 with id null; the valid sibling still runs.
        await peer.send(
            [
                {"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}},
                42,
                {"foo": "bar"},
            ]
        )
        reply = await peer.next_reply("the reply to a batch with invalid entries")
        assert isinstance(reply, list), reply
        assert len(reply) == 3, reply
        valid = [r for r in reply if r.get("id") == 5]
        assert len(valid) == 1, reply
        assert "result" in valid[0], reply
        invalid = [r for r in reply if r.get("id", "absent") is None]
        assert [error_code(r) for r in invalid] == [-32600, -32600], reply

        # An empty array: one -32600 with id null, not an array.
        await peer.send([])
        reply = await peer.next_reply("the reply to an empty batch")
        assert isinstance(reply, dict), f"an empty batch must get one error, not {reply!r}"
        assert reply.get("id", "absent") is None, reply
        assert error_code(reply) == -32600

        # A batch that is not JSON: one -32700 with id null.
        await peer.send_raw(b'[{"jsonrpc": "2.0", "method": "session/list"\n')
        reply = await peer.next_reply("the reply to a batch that is not JSON")
        assert isinstance(reply, dict), reply
        assert reply.get("id", "absent") is None, reply
        assert error_code(reply) == -32700
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 2: close


async def test_close_during_a_running_prompt_finishes_it_before_the_response() -> None:
    """Point 2. sdk ``schema/v2/schema.json:6918`` (``CloseSessionRequest``): close cancels the
    work "as if ``session/cancel`` was called"; "When closing cancels active foreground work,
    the Agent MUST send the final updates for that work and the idle ``state_update`` with
    ``stopReason: "cancelled"`` before responding successfully"; "After the close response,
    the Agent sends no other messages for the session"; an inserted prompt is answered
    successfully with its ``messageId``, and that response "need not precede the close
    response". ``schema.json:146``: the agent SHOULD cancel the pending permission request with
    ``$/cancel_request``; sdk ``dist/v2/acp.js:1091-1092``: "On ``session/close``, the Agent
    cancels every pending permission request in the session with ``$/cancel_request``".
    """
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask May I close the session?")
        ask = await wait_for_permission_request(peer, session_id, prompt_id)

        close_id = await peer.request("session/close", {"sessionId": session_id})
        start = peer.mark()
        cancel_requests: list[Any] = []

        async def serve(frame: Frame) -> None:
            if is_message(frame, "$/cancel_request"):
                cancel_requests.append(frame["params"]["requestId"])
                await peer.respond(
                    frame["params"]["requestId"], {"outcome": {"outcome": "cancelled"}}
                )

        close = await peer.until(
            "the session/close response", lambda f: is_response(f, close_id), serve=serve
        )
        assert "result" in close, close
        end = peer.frames.index(close)
        assert await peer.finish() == 0

    before = peer.frames[start:end]
    final = states(before, session_id)
    assert final, f"no state_update between the close request and its response{peer.tail(30)}"
    last = final[-1]
    assert (last.get("state"), last.get("stopReason")) == ("idle", "cancelled"), (
        f"the last state before the close response is {last!r}, not idle/cancelled"
    )
    assert cancel_requests == [ask["id"]], (
        f"the pending permission request {ask['id']!r} must be cancelled with $/cancel_request "
        f"before the close response; cancelled: {cancel_requests!r}"
    )
    after = peer.frames[end + 1 :]
    for frame in after:
        params = frame.get("params") if isinstance(frame, dict) else None
        assert not (isinstance(params, dict) and params.get("sessionId") == session_id), (
            f"a message for the closed session after the close response: {frame!r}"
        )
        assert not is_message(frame, "$/cancel_request"), f"{frame!r} after the close response"
    answers = [f for f in peer.frames if is_response(f, prompt_id)]
    assert len(answers) == 1, f"the prompt got {len(answers)} responses: {answers!r}"
    user = [u for u in (update_of(f, session_id, "user_message") for f in peer.frames) if u]
    assert user, "the /ask prompt's user message was never echoed"
    assert answers[0].get("result", {}).get("messageId") == user[0]["messageId"], answers[0]


# --------------------------------------------------------------------------- point 3: resume


async def test_resume_reports_the_running_prompt_state_before_its_response() -> None:
    """Point 3. sdk ``schema/v2/schema.json:3939`` (``ResumeSessionResponse``): "The agent MUST
    send a current ``state_update`` after any requested history replay and before this
    response, even without replay. The update reports foreground state after resuming. The
    response alone does not imply ``idle``." ``schema.json:5321`` (``StateUpdate``): "Resume MUST
    send a current-state snapshot after any replay and before its response"; "The agent MUST
    report ``idle`` when no foreground activity remains" (so exactly once, when ``/ask`` ends).
    """
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask Resume while I wait?")
        ask = await wait_for_permission_request(peer, session_id, prompt_id)
        live = states(peer.frames, session_id)
        assert live, "the /ask prompt reported no foreground state before asking"
        assert live[-1].get("state") in FOREGROUND, f"live states: {live!r}"

        resume_id = await peer.request(
            "session/resume",
            {"sessionId": session_id, "cwd": CWD, "replayFrom": {"type": "start"}},
        )
        start = peer.mark()
        resumed = await peer.until(
            "the session/resume response",
            lambda f: is_response(f, resume_id),
            fail_if=lambda f: (
                "an idle state_update while /ask still waits for its answer"
                if is_idle(f, session_id)
                else None
            ),
        )
        assert "result" in resumed, resumed
        end = peer.frames.index(resumed)
        snapshot = states(peer.frames[start:end], session_id)
        assert snapshot, "resume sent no state_update before its response"
        assert snapshot[-1].get("state") in FOREGROUND, f"resume reported {snapshot[-1]!r}"

        await peer.respond(ask["id"], selected("allow"))
        idle = await peer.until(
            "the idle state_update that ends the /ask prompt", lambda f: is_idle(f, session_id)
        )
        assert stop_reason(idle, session_id) == "end_turn", idle
        assert await peer.finish() == 0
    idles = [f for f in peer.frames[end + 1 :] if is_idle(f, session_id)]
    assert len(idles) == 1, f"after the resume response: {len(idles)} idle updates: {idles!r}"


# --------------------------------------------------------------------------- point 4: timestamps

LOWERCASE_STAMP = "2026-07-20t01:00:00z"
UPPERCASE_STAMP = "2026-07-20T01:00:00Z"


async def test_lowercase_rfc3339_timestamp_is_sent_upper_case(tmp_path: Path) -> None:
    """Point 4. sdk ``schema/v2/schema.json:5915``: ``updatedAt`` is an "RFC 3339 timestamp"
    (``format: date-time``). RFC 3339 section 5.6 allows lower-case ``t``/``z`` and says
    "Applications that generate this format SHOULD use upper case letters". The TS v2 client
    drops a lower-case one (``dist/v2/schema/zod.gen.js:1782``: ``z.iso.datetime({offset:
    true})`` under ``defaultOnError(..., () => undefined)``), so the sent form must be upper case.

    The reference agent has no prompt command that publishes ``updatedAt``; a stored lifetime is
    the one way an arbitrary stamp reaches its wire: one written with a lower-case stamp (as
    the owner used to accept and store it) is restored by the resync after ``session/resume``.
    """
    store_path = tmp_path / "sessions.sqlite"
    async with agent("--store", str(store_path)) as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        await peer.response(await prompt(peer, session_id, "/title Stamped"))
        assert await peer.finish() == 0

    async with await SQLiteStore.open(store_path) as store:
        record = await store.claim(session_id, "by hand")  # a write needs the holder's epoch
        assert record is not None, f"no stored lifetime for {session_id}"
        stamped = dataclasses.replace(record, updated_at=json.dumps(LOWERCASE_STAMP))
        assert await store.write([stamped], [], holder="by hand") == frozenset()

    async with agent("--store", str(store_path)) as peer:
        await initialize(peer, 2)
        resume_id = await peer.request("session/resume", {"sessionId": session_id, "cwd": CWD})
        start = peer.mark()
        resumed = await peer.response(resume_id, "the session/resume response")
        assert "result" in resumed, resumed
        infos = [update_of(f, session_id, "session_info_update") for f in peer.frames[start:]]
        stamps = [info["updatedAt"] for info in infos if info is not None and "updatedAt" in info]
        assert stamps, f"the resync did not restore the stored updatedAt{peer.tail()}"
        assert stamps == [UPPERCASE_STAMP] * len(stamps), f"updatedAt sent as {stamps!r}"
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 5: -32022


async def test_unsupported_protocol_version_is_refused_with_32022() -> None:
    """Point 5. sdk ``schema/v2/schema.json:2796`` (``InitializeResponse.protocolVersion``): "The
    highest protocol version supported by the agent that is at or below the version requested
    by the client. If no such version exists, initialization fails with error code -32022."
    ``schema.json:4157``, ``:4194-4220``: its ``data`` is ``{"requested": <int>, "supported":
    [<int>...]}``. sdk ``dist/protocol-router.js:20-31``: such a failure does not close the
    connection; the client may send ``initialize`` again.
    """
    async with agent() as peer:
        request_id = await peer.request("initialize", initialize_params(0))
        refused = await peer.response(request_id, "the response to initialize with version 0")
        assert "error" in refused, f"version 0 was accepted: {refused!r}"
        assert error_code(refused) == -32022
        data = refused["error"].get("data")
        assert isinstance(data, dict), refused
        assert data.get("requested") == 0, refused
        assert sorted(data.get("supported", [])) == [1, 2], refused

        await initialize(peer, 2)
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 6: close unknown


async def test_closing_an_unknown_session_succeeds() -> None:
    """Point 6. sdk ``schema/v2/schema.json:6918`` (``CloseSessionRequest``): "Closing a session
    that does not exist or is not active SHOULD succeed, and Clients SHOULD treat a ``-32002``
    response as a successful close." (spec ``session-setup.mdx:254`` still says MAY error.)
    """
    async with agent() as peer:
        await initialize(peer, 2)
        request_id = await peer.request("session/close", {"sessionId": "sess-never-existed"})
        closed = await peer.response(request_id, "the response to closing an unknown session")
        assert "result" in closed, f"closing an unknown session failed: {closed!r}"
        assert isinstance(closed["result"], dict), closed
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 7: session/list


async def test_session_list_pages_and_rejects_an_invalid_cursor() -> None:
    """Point 7. spec ``session-list.mdx:147-154``: cursor-based pagination, the response has
    ``nextCursor`` "when more results are available", "Agents SHOULD return an error if the
    cursor is invalid". sdk ``schema/v2/schema.json:6755-6756``, ``:3850-3851``, ``:3920``:
    ``cursor`` and ``nextCursor`` are strings (omitted or ``null``: first page / no more). An
    invalid cursor is a bad param: ``-32602``.
    """
    async with agent() as peer:
        await initialize(peer, 2)
        created = {await new_session(peer) for _ in range(3)}

        listed: list[str] = []
        cursor: str | None = None
        for _ in range(len(created) + 2):
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            page = await peer.response(await peer.request("session/list", params))
            listed.extend(s["sessionId"] for s in page["result"]["sessions"])
            cursor = page["result"].get("nextCursor")
            assert cursor is None or isinstance(cursor, str), page
            if cursor is None:
                break
        assert cursor is None, "session/list kept returning nextCursor"
        assert sorted(listed) == sorted(created), f"pages listed {listed!r}, created {created!r}"

        for bad in ("not-a-cursor-this-agent-issued", 42):
            request_id = await peer.request("session/list", {"cursor": bad})
            answer = await peer.response(request_id, f"the response to cursor {bad!r}")
            assert "error" in answer, f"cursor {bad!r} was accepted: {answer!r}"
            assert error_code(answer) == -32602, answer
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 8: prompt


async def test_v2_prompt_response_acknowledges_before_the_turn_ends() -> None:
    """Point 8. spec ``migration.mdx:249-251``: "In v2, the Agent MUST respond to
    ``session/prompt`` as soon as it has accepted the prompt"; ``migration.mdx:12``,
    ``:236-237``: the stop reason moved to the idle ``state_update``. sdk
    ``schema/v2/schema.json:4036-4040`` (``PromptResponse``): it acknowledges insertion, "does
    not indicate ... that the agent has finished processing it", and carries the inserted
    user message's ``messageId``. v1 (``migration.mdx:241-244``) is unchanged: the response
    ends the turn and carries ``stopReason``.
    """
    async with agent() as peer:
        await initialize(peer, 1)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "hello v1")
        start = peer.mark()
        answer = await peer.response(prompt_id, "the v1 prompt response")
        assert answer.get("result") == {"stopReason": "end_turn"}, answer
        assert "hello v1" in reply_text(peer.frames[start:], session_id)
        assert states(peer.frames, session_id) == [], "v1 has no state_update"
        assert await peer.finish() == 0

    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        start = peer.mark()
        prompt_id = await prompt(peer, session_id, "hello v2")
        idle = await peer.until(
            "the idle state_update ending the v2 prompt", lambda f: is_idle(f, session_id)
        )
        assert stop_reason(idle, session_id) == "end_turn", idle
        turn = peer.frames[start:]
        answers = [f for f in turn if is_response(f, prompt_id)]
        assert answers, "the v2 prompt response came after the idle state_update ending its turn"
        result = answers[0].get("result")
        assert isinstance(result, dict), answers[0]
        assert "stopReason" not in result, f"a v2 prompt response carries a stop reason: {result}"
        user = [u for u in (update_of(f, session_id, "user_message") for f in turn) if u]
        assert user, "the v2 prompt's user message was never echoed"
        assert result.get("messageId") == user[0]["messageId"], (result, user)
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- point 9: array params


async def test_array_params_are_invalid_params() -> None:
    """Point 9. ``docs/agent.md:110-113`` promises ``-32602`` "for bad params". JSON-RPC 2.0
    section 4.2 allows ``params`` to be an array or an object, so an array is a valid Request
    whose params do not fit the method (every ACP method takes an object): ``-32602``
    (sdk ``schema/v2/schema.json:4120-4125``, "Invalid method parameter(s)"). A notification
    with array params gets no reply. A scalar ``params`` is not a valid Request: ``-32600``.
    """
    async with agent() as peer:
        await initialize(peer, 2)
        for method, params in (("session/new", [CWD]), ("session/list", [])):
            request_id = await peer.request(method, params)
            answer = await peer.response(request_id, f"the response to {method} with {params!r}")
            assert error_code(answer) == -32602, answer

        await peer.notify("session/cancel", ["sess-none"])
        list_id = await peer.request("session/list", {})
        reply = await peer.next_reply("the reply after a notification with array params")
        assert is_response(reply, list_id), f"a notification got a reply: {reply!r}"

        request_id = await peer.request("session/list", 42)
        assert error_code(await peer.response(request_id)) == -32600
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- /ask


async def test_ask_round_trip_v2() -> None:
    """``/ask TEXT`` (issue 12): the agent sends ``session/request_permission`` with options
    ``allow`` / ``reject``, the prompt stays running until the client answers, and the reply
    names the chosen option id. sdk ``schema/v2/schema.json:198-248``: params ``sessionId``,
    ``title`` (string, required), ``options`` (``optionId``, ``name``, ``kind``, at least one);
    ``:7229-7357``: the answer is ``{"outcome": {"outcome": "selected", "optionId": ...}}``.
    The v2 prompt response is due at acceptance (point 8), so it arrives while the question
    is pending.
    """
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        question = "Deploy the release now?"
        start = peer.mark()
        prompt_id = await prompt(peer, session_id, f"/ask {question}")
        ask = await wait_for_permission_request(peer, session_id, prompt_id)
        params = ask["params"]
        assert isinstance(params.get("title"), str), ask
        assert question in params["title"] + str(params.get("description") or ""), ask
        options = {o["optionId"]: o for o in params["options"]}
        assert sorted(options) == ["allow", "reject"], ask
        assert options["allow"]["kind"].startswith("allow_"), ask
        assert options["reject"]["kind"].startswith("reject_"), ask
        assert all(isinstance(o["name"], str) and o["name"] for o in options.values()), ask
        if not any(is_response(f, prompt_id) for f in peer.frames):
            await peer.until(
                "the v2 prompt response while /ask waits",
                lambda f: is_response(f, prompt_id),
                fail_if=lambda f: "the turn ended" if is_idle(f, session_id) else None,
            )
        assert not any(is_idle(f, session_id) for f in peer.frames[start:]), "idle before answer"

        await peer.respond(ask["id"], selected("reject"))
        idle = await peer.until(
            "the idle state_update after the answer", lambda f: is_idle(f, session_id)
        )
        assert stop_reason(idle, session_id) == "end_turn", idle
        assert "reject" in reply_text(peer.frames[start:], session_id), peer.tail(20)
        assert await peer.finish() == 0


async def test_ask_round_trip_v1() -> None:
    """``/ask`` on v1, as the Python SDK 0.12.1 client sees it: v1 ``RequestPermissionRequest``
    requires ``sessionId``, ``toolCall`` (with ``toolCallId``) and ``options`` (sdk
    ``schema/v1/schema.json:340-374``); the client answers ``{"outcome": {"outcome":
    "selected", "optionId": ...}}``. The v1 prompt response ends the turn with ``stopReason``.
    """
    async with agent() as peer:
        await initialize(peer, 1)
        session_id = await new_session(peer)
        start = peer.mark()
        prompt_id = await prompt(peer, session_id, "/ask Run the migration?")
        ask = await wait_for_permission_request(peer, session_id, prompt_id, v2=False)
        params = ask["params"]
        assert isinstance(params.get("toolCall", {}).get("toolCallId"), str), ask
        assert sorted(o["optionId"] for o in params["options"]) == ["allow", "reject"], ask

        await peer.respond(ask["id"], selected("allow"))
        answer = await peer.response(prompt_id, "the v1 prompt response after the answer")
        assert answer.get("result") == {"stopReason": "end_turn"}, answer
        assert "allow" in reply_text(peer.frames[start:], session_id), peer.tail(20)
        assert await peer.finish() == 0


async def test_ask_unanswered_when_the_input_ends_does_not_hang() -> None:
    """Agent→client requests: "a clear error when the client never answers and the connection
    ends" (issue 12). When the client's input ends with ``/ask`` still waiting, the pending
    request fails and the agent shuts down on its own, exiting 0 as at any end of input.
    """
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask Will anyone answer?")
        await wait_for_permission_request(peer, session_id, prompt_id)
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- review: cancellation


async def serve_cancelled_asks(peer: Peer, frame: Frame) -> None:
    """Answer every ``$/cancel_request`` of the agent with the ``cancelled`` outcome."""
    if is_message(frame, "$/cancel_request"):
        await peer.respond(frame["params"]["requestId"], {"outcome": {"outcome": "cancelled"}})


async def test_cancel_request_after_insertion_ends_a_v1_turn_cancelled() -> None:
    """The insertion rule of ``session/prompt`` (sdk ``schema/v2/schema.json``: "An error
    response means the user message was not inserted. Once it is inserted, the Agent MUST NOT
    answer with an error"), kept on v1, where the prompt is answered at the end of its turn: a
    ``$/cancel_request`` for a prompt whose ``/ask`` waits (its message is inserted) ends the
    turn with ``stopReason: "cancelled"``. It used to be answered ``-32800``.
    """
    async with agent() as peer:
        await initialize(peer, 1)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask Cancel me?")
        await wait_for_permission_request(peer, session_id, prompt_id, v2=False)
        await peer.notify("$/cancel_request", {"requestId": prompt_id})
        answer = await peer.until(
            "the prompt's answer",
            lambda f: is_response(f, prompt_id),
            serve=lambda f: serve_cancelled_asks(peer, f),
        )
        assert answer.get("result") == {"stopReason": "cancelled"}, answer
        assert await peer.finish() == 0


async def test_cancel_request_for_an_answered_prompt_is_ignored() -> None:
    """sdk ``schema/v2/schema.json`` (``CancelRequestNotification``): "Receivers MUST ignore
    this notification for an unknown or already-answered request ID". A v2 prompt is answered
    (``{"messageId"}``) once inserted, so a later ``$/cancel_request`` for its id must leave
    the turn running (``session/cancel`` is how a client stops it). It used to cancel the
    turn: the agent withdrew its permission request and ended the turn ``cancelled``.
    """
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask Keep going?\nafter")
        ask = await wait_for_permission_request(peer, session_id, prompt_id)
        if not any(is_response(f, prompt_id) for f in peer.frames):
            await peer.response(prompt_id, "the v2 prompt response while /ask waits")
        start = peer.mark()
        await peer.notify("$/cancel_request", {"requestId": prompt_id})
        await peer.respond(ask["id"], selected("allow"))
        idle = await peer.until(
            "the idle state_update ending the turn",
            lambda f: is_idle(f, session_id),
            fail_if=lambda f: (
                "the agent withdrew its permission request"
                if is_message(f, "$/cancel_request")
                else None
            ),
        )
        assert stop_reason(idle, session_id) == "end_turn", idle
        text = reply_text(peer.frames[start:], session_id)
        assert "answer: allow" in text, text
        assert "after" in text, text
        assert await peer.finish() == 0


@pytest.mark.parametrize("version", [2, 1])
async def test_an_answer_that_is_not_an_outcome_ends_the_ask(version: int) -> None:
    """JSON-RPC 2.0 section 5: a response's ``result`` may be any JSON value, and a response
    is never answered. ``{"result": "allow"}`` to the agent's ``session/request_permission`` is
    a valid response but not a ``RequestPermissionResponse``: ``/ask`` must not take it for an
    approval, must reply that it got no valid answer, and the turn must end. The agent used to
    answer the client's answer with ``-32600`` under its own request id (which the client read
    as the answer to *its* request of that id), and ``/ask`` waited forever.
    """
    async with agent() as peer:
        await initialize(peer, version)
        session_id = await new_session(peer)
        prompt_id = await prompt(peer, session_id, "/ask Allow?")
        ask = await wait_for_permission_request(peer, session_id, prompt_id, v2=version == 2)
        start = peer.mark()
        await peer.respond(ask["id"], "allow")
        await peer.until(
            "the end of the turn",
            lambda f: is_idle(f, session_id) if version == 2 else is_response(f, prompt_id),
            fail_if=lambda f: (
                f"the agent answered the client's answer: {f}"
                if isinstance(f, dict) and "method" not in f and f.get("id") == ask["id"]
                else None
            ),
        )
        text = reply_text(peer.frames[start:], session_id)
        assert "not answered" in text, text
        assert "answer: allow" not in text, text
        assert await peer.finish() == 0


# --------------------------------------------------------------------------- review: foreground


async def test_the_foreground_state_covers_every_turn_of_the_session() -> None:
    """sdk ``schema/v2/schema.json`` (``StateUpdate``): "The agent SHOULD report
    ``requires_action`` when the foreground workflow as a whole cannot progress without user
    action" and "MUST report ``idle`` when no foreground activity remains"; resume reports
    "foreground state after resuming". Two prompts on one session: the second one ends while
    the first waits for permission, so the session is neither idle nor merely running: no
    ``idle`` until the first turn ends, and a resume reports ``requires_action``. The second
    turn used to report ``running`` and then ``idle`` (``end_turn``) while the first still
    waited, and the resume reported ``idle``.
    """
    session_id = ""

    def not_idle(frame: Frame) -> str | None:
        return "an idle state_update while /ask still waits" if is_idle(frame, session_id) else None

    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        first = await prompt(peer, session_id, "/ask Go on?")
        ask = await wait_for_permission_request(peer, session_id, first)
        start = peer.mark()
        await prompt(peer, session_id, "hello")
        await peer.until(
            "the second turn's reply",
            lambda f: "hello" in reply_text([f], session_id),
            fail_if=not_idle,
        )
        resume_id = await peer.request("session/resume", {"sessionId": session_id, "cwd": CWD})
        await peer.until(
            "the resume response", lambda f: is_response(f, resume_id), fail_if=not_idle
        )
        during = states(peer.frames[start:], session_id)
        assert during, "resume sent no state_update"
        assert all(s.get("state") == "requires_action" for s in during), during
        await peer.respond(ask["id"], selected("allow"))
        idle = await peer.until("the end of the first turn", lambda f: is_idle(f, session_id))
        assert stop_reason(idle, session_id) == "end_turn", idle
        assert await peer.finish() == 0


def folded_meta(frames: list[Frame], session_id: str) -> dict[str, Any]:
    """The ``_meta`` a v2 client holds after ``frames``: every patch folded (a ``null`` clears,
    a key set to ``null`` is removed)."""
    held: dict[str, Any] = {}
    for frame in frames:
        update = update_of(frame, session_id, "session_info_update")
        if update is None or "_meta" not in update:
            continue
        if update["_meta"] is None:
            held = {}
            continue
        for key, value in update["_meta"].items():
            if value is None:
                held.pop(key, None)
            else:
                held[key] = value
    return held


async def test_a_turn_running_on_after_its_answer_finishes_when_the_input_ends() -> None:
    """Issue 27 (d). ``migration.mdx``: the prompt is answered as soon as it is accepted and
    the turn ends with an idle ``state_update``; the input ending meanwhile does not cut it
    short. A prompt of 3,000 ``/meta set`` lines, then the end of the input right after the
    early answer, before the client reads on: the turn's output is far more than the pipe
    holds, so it runs when the input ends, whatever the scheduling. Every key reaches the
    client, then the idle ``state_update``, and the agent exits 0. The SDK runtime used to hand
    the SDK the end of the input as soon as no request was in flight: the SDK closed its
    connection under the running turn, which died at its next send (no idle, keys lost)."""
    count = 3000  # far more output than the pipe holds: the turn cannot end before the EOF
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        start = peer.mark()
        lines = "\n".join(f"/meta set k{n:04d} {n}" for n in range(count))
        answer = await peer.response(await prompt(peer, session_id, lines))
        assert "messageId" in answer.get("result", {}), answer
        assert await peer.finish() == 0
        frames = peer.frames[start:]
    assert any(is_idle(frame, session_id) for frame in frames), peer.tail()
    held = folded_meta(frames, session_id)
    assert held == {f"k{n:04d}": n for n in range(count)}, f"{len(held)} of {count} keys"


def nested(depth: int) -> str:
    """A JSON value of ``depth`` levels: ``depth - 1`` objects around ``1``."""
    value = "1"
    for _ in range(depth - 1):
        value = '{"a":' + value + "}"
    return value


@pytest.mark.parametrize("depth", [240, 245, 253])
async def test_a_deep_value_is_served_or_refused_by_the_limits_and_the_turn_ends(
    depth: int,
) -> None:
    """Issue 27 (e). ``/meta set deep VALUE``: a value the owner's limits accept (nested 240
    levels, with the key 241: the limit) is published; one they refuse is answered with their
    error; either way the turn ends with an idle ``state_update``. The SDK runtime used to hand
    the value to the SDK's serializer first: at 253 levels pydantic raised, and the turn died
    without an idle; at 245 the SDK sent it, the adapter refused it, and the agent said "ok"."""
    async with agent() as peer:
        await initialize(peer, 2)
        session_id = await new_session(peer)
        start = peer.mark()
        await prompt(peer, session_id, f"/meta set deep {nested(depth)}")
        await peer.until("the idle state_update", lambda f: is_idle(f, session_id))
        frames = peer.frames[start:]
        reply = reply_text(frames, session_id)
        if depth <= 240:
            assert reply.startswith("ok"), reply
            assert "deep" in folded_meta(frames, session_id), peer.tail()
        else:
            assert "nested deeper than" in reply, reply
            assert "deep" not in folded_meta(frames, session_id), peer.tail()
        assert await peer.finish() == 0
