"""The demo's ACP v2 half: the same reference agent, the same real stdio pipe, a v2 client.

On v2, ``_meta`` is a shallow patch: ``{key: null}`` removes a key and ``_meta: null`` clears
everything, which the official Python SDK (v1 only, and serializing with ``exclude_none``) can
neither send nor receive as such. A resume replays the conversation, reports the foreground
state, then sends ``_meta: null`` and the current state, before its response.

The client is the official TypeScript SDK (``@agentclientprotocol/sdk/experimental/v2``, driven by
``integration/node/ts_client.mjs``, found by :mod:`._node`) when Node.js and that script's
``node_modules`` are there; otherwise a raw NDJSON client folded by
:class:`~agent_meta.testing.ClientMirror`, and the output says so and why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from ..testing import ClientMirror

__all__ = ["V2_STORY", "Exchange", "V2Step", "run_python_client", "run_typescript_client"]

Message = dict[str, Any]
TIMEOUT = 30.0
_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 2,
    "info": {"name": "agent-meta-demo", "version": "0"},  # required by v2 (the SDK 1.0 checks)
    "capabilities": {},
}


@dataclasses.dataclass
class Exchange:
    """What the client sent and received during one step: (sent by the client, message), in
    wire order."""

    traffic: list[tuple[bool, Message]] = dataclasses.field(default_factory=list)

    @property
    def received(self) -> list[Message]:
        return [message for sent, message in self.traffic if not sent]


@dataclasses.dataclass(frozen=True)
class V2Step:
    """One request of the v2 story (an op of ``ts_client.mjs``) and what it must show."""

    title: str
    why: str
    op: dict[str, Any]
    check: Callable[[list[Message], ClientMirror, str], str | None]


def _updates(received: list[Message], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in received
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == kind
    ]


def _expect(condition: bool, message: str) -> str | None:
    return None if condition else message


def _check_new(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    return _expect(bool(sid) and mirror.meta(sid) is None, "no fresh session")


def _check_set(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    return _expect(
        mirror.meta(sid) == {"status": "working", "progress": 0.5}
        and mirror.info(sid).title == "Ship v2",
        "metadata or title not as published",
    )


def _check_remove(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    patches = [u.get("_meta") for u in _updates(received, "session_info_update")]
    return _expect({"progress": None} in patches, "the removal was not sent as a patch") or _expect(
        mirror.meta(sid) == {"status": "working"}, "progress was not removed"
    )


def _check_clear(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    cleared = [u for u in _updates(received, "session_info_update") if u.get("_meta", 0) is None]
    return _expect(bool(cleared), "no _meta: null was sent") or _expect(
        mirror.meta(sid) == {"status": "set again"}, "the clear did not reset the metadata"
    )


def _check_resume(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    kinds = []
    for message in received:
        if message.get("method") != "session/update":
            kinds.append(message.get("method", "response"))
            continue
        update = message["params"]["update"]
        kind = update.get("sessionUpdate")
        if kind == "session_info_update":
            kind = "clear" if update.get("_meta", 0) is None else "snapshot"
        kinds.append(kind)
    wanted = ["user_message", "state_update", "clear", "snapshot", "response"]
    positions = [kinds.index(kind) if kind in kinds else -1 for kind in wanted]
    return _expect(
        -1 not in positions and positions == sorted(positions),
        f"not replay, state, _meta: null, snapshot, response in that order: {kinds}",
    )


def _check_close(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    return _expect(any("result" in m for m in received), "session/close failed")


def _check_reopen(received: list[Message], mirror: ClientMirror, sid: str) -> str | None:
    info = mirror.info(sid)
    return _expect(info.meta is None and info.title is None, "the reopened lifetime is not fresh")


V2_STORY: tuple[V2Step, ...] = (
    V2Step(
        "connect (v2)",
        "initialize (protocolVersion 2) and session/new: the session's first lifetime begins "
        "(the span, until session/close, that the session's info belongs to)",
        {"op": "new"},
        _check_new,
    ),
    V2Step(
        "set metadata",
        "a title and two top-level keys, each sent as a v2 patch: only the keys it changes",
        {
            "op": "prompt",
            "text": '/title Ship v2\n/meta set status "working"\n/meta set progress 0.5',
        },
        _check_set,
    ),
    V2Step(
        "remove a key",
        "a v2 patch {progress: null} removes one key (a v1 client would store the null)",
        {"op": "prompt", "text": "/meta rm progress"},
        _check_remove,
    ),
    V2Step(
        "clear, then set",
        "_meta: null clears everything (the official Python SDK's v1 models cannot send it)",
        {"op": "prompt", "text": '/meta clear\n/meta set status "set again"'},
        _check_clear,
    ),
    V2Step(
        "resume with replay",
        "replay, the foreground state, then the resync (_meta: null, then everything the client "
        "must hold), then the response",
        {"op": "resume", "replay": True},
        _check_resume,
    ),
    V2Step(
        "close",
        "session/close ends the lifetime; it is fenced: nothing more is written for it",
        {"op": "close"},
        _check_close,
    ),
    V2Step(
        "reopen",
        "resuming the closed session starts a fresh lifetime: _meta: null, then title: null",
        {"op": "resume", "replay": False},
        _check_reopen,
    ),
)


def run_typescript_client(
    script: Path, agent: Sequence[str], env: dict[str, str]
) -> tuple[list[Exchange], str]:
    """Play the story with the TypeScript SDK client; each step's exchange (its response
    included) and the session id."""
    steps = [step.op for step in V2_STORY]
    client_env = {**os.environ, **env, "AGENT_META_AGENT": json.dumps(list(agent))}
    client_env["AGENT_META_ACP"] = "2"
    done = subprocess.run(
        ["node", str(script), "steps", json.dumps(steps)],
        env=client_env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [line["error"] for line in lines if line["type"] == "error"]
    if done.returncode != 0 or errors:
        raise RuntimeError(f"the TypeScript client failed: {errors or done.stderr[-500:]}")
    return _by_step(lines)


def _by_step(lines: list[dict[str, Any]]) -> tuple[list[Exchange], str]:
    """What ``ts_client.mjs`` sent and received during each step (``initialize`` goes with the
    first), and the session id."""
    per_step = [Exchange() for _ in V2_STORY]
    current = 0
    session_id = ""
    for line in lines:
        if line["type"] == "step":
            current = line["index"]
        elif line["type"] in ("sent", "recv"):
            per_step[current].traffic.append((line["type"] == "sent", line["message"]))
        elif line["type"] == "response" and line["op"] == "new":
            session_id = line["result"]["sessionId"]
    return per_step, session_id


def run_python_client(agent: Sequence[str], env: dict[str, str]) -> tuple[list[Exchange], str]:
    """Play the story with a raw NDJSON v2 client (no Node.js here)."""
    return trio.run(_python_story, list(agent), env)


async def _python_story(agent: list[str], env: dict[str, str]) -> tuple[list[Exchange], str]:
    process = await trio.lowlevel.open_process(
        agent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, **env}
    )
    client = _RawClient(process)
    try:
        with trio.fail_after(TIMEOUT):
            per_step: list[Exchange] = []
            for step in V2_STORY:
                client.exchange = Exchange()
                if not per_step:  # initialize goes with the first step
                    await client.call("initialize", _INITIALIZE)
                await client.step(step.op)
                per_step.append(client.exchange)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.move_on_after(TIMEOUT):
            await process.wait()
        if process.returncode is None:
            process.kill()
    return per_step, client.session_id


class _RawClient:
    """The client end of the pipe: one request at a time, every line read in order."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""
        self._ids = 0
        self.session_id = ""
        self.exchange = Exchange()

    async def step(self, op: dict[str, Any]) -> None:
        params: dict[str, Any] = {"sessionId": self.session_id, "cwd": os.getcwd()}
        if op["op"] == "new":
            response = await self.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
            self.session_id = response["result"]["sessionId"]
        elif op["op"] == "prompt":
            prompt = [{"type": "text", "text": op["text"]}]
            await self.call("session/prompt", {"sessionId": self.session_id, "prompt": prompt})
            await self._until_turn_ends()
        elif op["op"] == "resume":
            if op.get("replay"):
                params["replayFrom"] = {"type": "start"}
            await self.call("session/resume", params)
        else:
            await self.call("session/close", {"sessionId": self.session_id})

    async def call(self, method: str, params: dict[str, Any]) -> Message:
        """Send one request; its response, after every frame received before it."""
        self._ids += 1
        request = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self.exchange.traffic.append((True, request))
        await self._stdin.send_all(json.dumps(request).encode() + b"\n")
        response = await self._until(lambda m: "method" not in m and m.get("id") == self._ids)
        if "error" in response:
            raise RuntimeError(f"the agent refused {method}: {json.dumps(response['error'])}")
        return response

    async def _until_turn_ends(self) -> None:
        def ended(message: Message) -> bool:
            update = message.get("params", {}).get("update", {}) if "method" in message else {}
            return update.get("sessionUpdate") == "state_update" and "stopReason" in update

        await self._until(ended)

    async def _until(self, done: Callable[[Message], bool]) -> Message:
        """Read frames into the exchange until ``done`` holds for one; that one."""
        while True:
            while b"\n" not in self._buffer:
                chunk = await self._stdout.receive_some(1 << 16)
                if not chunk:
                    raise RuntimeError("the agent's output ended")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            message: Message = json.loads(line)
            self.exchange.traffic.append((False, message))
            if done(message):
                return message
