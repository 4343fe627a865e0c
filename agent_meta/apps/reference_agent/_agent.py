"""The reference agent: a real ACP agent whose prompts drive the session-info owner.

It is built only on the public API (a :class:`~agent_meta.MetaOwner` reached through the
connection) and shows the intended embedding, above all in :meth:`ReferenceAgent.resume_session`:
replay history, then ``lifetime.resync()``, then respond. Because every frame goes through
the owner's FIFO, "replay, then ``_meta: null`` and the snapshot, then the response" holds by
construction, even while a ``/burst`` is publishing concurrently.

Sessions (id, cwd, conversation) live in this object; session-info state lives in the owner's
lifetimes. A closed session can be resumed: it gets a fresh lifetime (R5) and keeps its history.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import uuid
from typing import TYPE_CHECKING, Any, Literal

import trio

from ..._version import __version__
from ...acp._connection import AgentConnection, BaseAgent, RequestContext
from ...core._errors import AgentMetaError, OwnerClosedError, TransportBrokenError
from ...wire._jsonrpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
    optional_str,
    require_object_list,
    require_str,
)
from ._commands import (
    COMMANDS,
    Burst,
    Command,
    CommandError,
    DomainRemove,
    DomainSet,
    Fail,
    MetaClear,
    MetaPatchCommand,
    MetaRemove,
    MetaSet,
    Resolve,
    SetTitle,
    parse_line,
)
from ._storage import HistoryStore

if TYPE_CHECKING:
    from ...core._json import JsonObject, JsonValue
    from ...owner._lifetime import SessionLifetime
    from ...owner._sqlite import SQLiteStore

__all__ = ["AGENT_NAME", "ReferenceAgent"]

AGENT_NAME = "agent-meta-reference"


@dataclasses.dataclass(slots=True)
class _Message:
    role: Literal["user", "agent"]
    message_id: str
    text: str


@dataclasses.dataclass(slots=True)
class _Session:
    session_id: str
    cwd: str
    updated_at: str
    history: list[_Message] = dataclasses.field(default_factory=list)
    last_info: JsonObject = dataclasses.field(default_factory=dict)
    prompts: set[trio.CancelScope] = dataclasses.field(default_factory=set)
    counter: int = 0

    def next_id(self, role: str) -> str:
        self.counter += 1
        return f"{role}-{self.counter}"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ReferenceAgent(BaseAgent):
    """The ``agent-meta agent`` agent. One instance serves one connection.

    Prompt lines are commands (see :mod:`agent_meta.reference_agent`) or are echoed. A command
    error becomes an agent message explaining it; it never fails the request.
    """

    def __init__(self, history: HistoryStore | None = None) -> None:
        self._sessions: dict[str, _Session] = {}
        self._ids = itertools.count(1)
        self._history = history

    @classmethod
    async def with_store(cls, store: SQLiteStore) -> ReferenceAgent:
        """An agent that keeps sessions and history in ``store``'s file (``--store``).

        Pass the same store to the owner (``open_owner(..., store=store)``) so that a fresh
        process resumes both the conversation and the session-info lifetimes.
        """
        history = HistoryStore(store)
        agent = cls(history)
        for session_id, cwd, updated_at, last_info, counter, messages in await history.load():
            session = _Session(session_id, cwd, updated_at, last_info=last_info, counter=counter)
            session.history = [_Message(role, mid, text) for role, mid, text in messages]  # type: ignore[arg-type]
            agent._sessions[session_id] = session
        return agent

    async def _save_session(self, session: _Session) -> None:
        if self._history is not None:
            await self._history.save_session(
                session.session_id,
                session.cwd,
                session.updated_at,
                session.last_info,
                session.counter,
            )

    async def _add_message(self, session: _Session, message: _Message) -> None:
        session.history.append(message)
        if self._history is not None:
            await self._history.add_message(
                session.session_id,
                len(session.history),
                message.role,
                message.message_id,
                message.text,
            )

    # ----------------------------------------------------------------------- setup

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        info: JsonObject = {"name": AGENT_NAME, "title": "agent_meta reference agent"}
        info["version"] = __version__
        if ctx.protocol_version >= 2:
            return {"info": info, "capabilities": {"session": {}}, "authMethods": []}
        return {
            "agentInfo": info,
            "agentCapabilities": {
                "loadSession": True,
                "sessionCapabilities": {"resume": {}, "close": {}, "list": {}},
            },
            "authMethods": [],
        }

    async def new_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        cwd = require_str(params, "cwd")
        session_id = f"sess-{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        session = _Session(session_id=session_id, cwd=cwd, updated_at=_now())
        await self._save_session(session)
        ctx.owner.open_lifetime(session_id)
        self._sessions[session_id] = session

        async def advertise() -> None:
            await ctx.connection.session_update(session_id, self._commands_update(ctx))

        ctx.after_response(advertise)
        return {"sessionId": session_id}

    def _commands_update(self, ctx: RequestContext) -> JsonObject:
        commands: list[JsonValue] = []
        for name, description, hint in COMMANDS:
            if ctx.protocol_version >= 2:
                commands.append(
                    {
                        "type": "command",
                        "name": name,
                        "description": description,
                        "input": {"type": "text", "hint": hint},
                    }
                )
            else:
                commands.append({"name": name, "description": description, "input": {"hint": hint}})
        return {"sessionUpdate": "available_commands_update", "availableCommands": commands}

    async def list_sessions(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        cwd = optional_str(params, "cwd")
        entries: list[JsonValue] = []
        for session in self._sessions.values():
            if cwd is not None and session.cwd != cwd:
                continue
            entry: JsonObject = {"sessionId": session.session_id, "cwd": session.cwd}
            entry["updatedAt"] = session.updated_at
            info = self._info(ctx, session)
            # A snapshot, never a patch: null values inside are data (see the RFD).
            entry.update(info)
            entries.append(entry)
        return {"sessions": entries}

    def _info(self, ctx: RequestContext, session: _Session) -> JsonObject:
        if ctx.owner.has_lifetime(session.session_id):
            snapshot = ctx.owner.lifetime(session.session_id).snapshot()
        else:
            stored = ctx.owner.stored_snapshot(session.session_id)  # a restarted agent
            if stored is None:
                return session.last_info
            snapshot = stored
        info: JsonObject = {}
        if isinstance(snapshot.title, str):
            info["title"] = snapshot.title
        if snapshot.meta is not None:
            info["_meta"] = snapshot.meta
        return info

    # ----------------------------------------------------------------------- resume / load

    async def resume_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session = self._session(params)
        require_str(params, "cwd")
        replay = False
        if ctx.protocol_version >= 2:
            replay_from = params.get("replayFrom")
            if isinstance(replay_from, dict) and replay_from.get("type") == "start":
                replay = True
            elif replay_from is not None:
                raise JsonRpcError(
                    INVALID_PARAMS,
                    f"unsupported replayFrom {replay_from!r}: only {{'type': 'start'}} is known",
                )
        await self._restore(ctx, session, replay=replay)
        return {}

    async def load_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        if ctx.protocol_version >= 2:
            raise JsonRpcError(
                METHOD_NOT_FOUND, "session/load is not part of ACP v2: use session/resume"
            )
        session = self._session(params)
        require_str(params, "cwd")
        await self._restore(ctx, session, replay=True)
        return {}

    async def _restore(self, ctx: RequestContext, session: _Session, *, replay: bool) -> None:
        """The resume embedding: keep an open lifetime (R5) or open a fresh one, replay, then
        resync. Each step only enqueues, so the response the connection sends next is behind
        the snapshot on the wire, and any ``/burst`` frame enqueued meanwhile lands either
        before the ``_meta: null`` (and is overwritten by the snapshot) or after the snapshot."""
        owner = ctx.owner
        if owner.has_lifetime(session.session_id):
            lifetime = owner.lifetime(session.session_id)
        else:
            lifetime = owner.open_lifetime(session.session_id)
        if replay:
            for message in session.history:
                await ctx.connection.session_update(
                    session.session_id, self._replayed(ctx, message)
                )
        if ctx.protocol_version >= 2:
            await ctx.connection.session_update(
                session.session_id, {"sessionUpdate": "state_update", "state": "idle"}
            )
        lifetime.resync()

    def _replayed(self, ctx: RequestContext, message: _Message) -> JsonObject:
        content: JsonObject = {"type": "text", "text": message.text}
        if ctx.protocol_version >= 2:
            return {
                "sessionUpdate": f"{message.role}_message",
                "messageId": message.message_id,
                "content": [content],
            }
        return {"sessionUpdate": f"{message.role}_message_chunk", "content": content}

    # ----------------------------------------------------------------------- close / cancel

    async def close_session(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session = self._session(params)
        if ctx.owner.has_lifetime(session.session_id):
            session.last_info = self._info(ctx, session)
            await self._save_session(session)
            ctx.owner.close_lifetime(session.session_id)
        for scope in session.prompts:
            scope.cancel()
        return {}

    async def cancel(self, connection: AgentConnection, params: JsonObject) -> None:
        session = self._sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
        if session is not None:
            for scope in session.prompts:
                scope.cancel()

    def _session(self, params: JsonObject) -> _Session:
        session_id = require_str(params, "sessionId")
        session = self._sessions.get(session_id)
        if session is None:
            raise JsonRpcError(
                RESOURCE_NOT_FOUND, f"unknown session {session_id!r}", {"sessionId": session_id}
            )
        return session

    # ----------------------------------------------------------------------- prompt

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        session = self._session(params)
        blocks = require_object_list(params, "prompt")
        if not ctx.owner.has_lifetime(session.session_id):
            raise JsonRpcError(
                RESOURCE_NOT_FOUND,
                f"session {session.session_id!r} is closed: resume it first",
                {"sessionId": session.session_id},
            )
        lifetime = ctx.owner.lifetime(session.session_id)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        v2 = ctx.protocol_version >= 2
        user_id = session.next_id("user")
        agent_id = session.next_id("agent")
        session.updated_at = _now()
        # The id counter is stored before the message: a cancellation between the two leaves a
        # gap in the ids, never an id that a restarted agent would hand out again.
        await self._save_session(session)
        await self._add_message(session, _Message("user", user_id, text))
        sid = session.session_id
        if v2:
            echo = {"sessionUpdate": "user_message", "messageId": user_id, "content": blocks}
            await ctx.connection.session_update(sid, echo)
            await ctx.connection.session_update(
                sid, {"sessionUpdate": "state_update", "state": "running"}
            )
        replies: list[str] = []
        with trio.CancelScope() as scope:
            session.prompts.add(scope)
            try:
                for line in text.splitlines():
                    if not line.strip():
                        continue
                    reply = await self._run_line(ctx, lifetime, line)
                    replies.append(reply)
                    chunk: JsonObject = {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": reply + "\n"},
                    }
                    if v2:
                        chunk["messageId"] = agent_id
                    await ctx.connection.session_update(sid, chunk)
            finally:
                session.prompts.discard(scope)
        stop_reason = "cancelled" if scope.cancelled_caught else "end_turn"
        if replies:
            await self._add_message(session, _Message("agent", agent_id, "\n".join(replies)))
        if v2:
            await ctx.connection.session_update(
                sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop_reason}
            )
            return {"messageId": user_id}
        return {"stopReason": stop_reason}

    async def _run_line(self, ctx: RequestContext, lifetime: SessionLifetime, line: str) -> str:
        """Run one prompt line; return the agent's reply (errors are replies too)."""
        try:
            command = parse_line(line)
        except CommandError as exc:
            return f"error: {exc}"
        if command is None:
            return line
        try:
            return await self._execute(ctx, lifetime, command)
        except (OwnerClosedError, TransportBrokenError):
            raise
        except AgentMetaError as exc:
            return f"error: {exc}"

    async def _execute(
        self, ctx: RequestContext, lifetime: SessionLifetime, command: Command
    ) -> str:
        if isinstance(command, MetaSet | MetaRemove | MetaPatchCommand | MetaClear | SetTitle):
            fields, what = _publication(command)
            return _published(await lifetime.publish(**fields), what)
        match command:
            case DomainSet(key, path, value):
                done = await lifetime.domain(key).set(path, value)
                return _published(done, f"{key}.{'.'.join(path)} set")
            case DomainRemove(key, path):
                done = await lifetime.domain(key).remove(path)
                return _published(done, f"{key}.{'.'.join(path)} removed")
            case Fail(incident_id, revision, title):
                record: JsonObject = {
                    "id": incident_id,
                    "revision": revision,
                    "title": title or f"incident {incident_id}",
                    "severity": "error",
                }
                done = await lifetime.report_failure(incident_id, revision, record)
                return (
                    f"ok: failure {incident_id} rev {revision} reported"
                    if done
                    else f"not reported: failure {incident_id} rev {revision} was refused"
                )
            case Resolve(incident_id, revision):
                done = await lifetime.resolve_failure(incident_id, revision)
                return (
                    f"ok: failure {incident_id} rev {revision} resolved"
                    if done
                    else f"not resolved: {incident_id} rev {revision} is not the current incident"
                )
            case Burst(count, key):
                ctx.connection.start_background(
                    lambda: _burst(lifetime, key, count), name=f"burst {key} x{count}"
                )
                return f"ok: burst of {count} publications of {key} started"
        raise AssertionError(f"unhandled command {command!r}")  # pragma: no cover


def _publication(
    command: MetaSet | MetaRemove | MetaPatchCommand | MetaClear | SetTitle,
) -> tuple[dict[str, Any], str]:
    """The ``publish`` arguments of a plain publication command, and what it did."""
    match command:
        case MetaSet(key, value):
            return {"meta": {key: value}}, f"_meta.{key} set"
        case MetaRemove(key):
            return {"meta": {key: None}}, f"_meta.{key} removed"
        case MetaPatchCommand(patch):
            return {"meta": patch}, "_meta patched"
        case MetaClear():
            return {"meta": None}, "_meta cleared"
        case SetTitle(title):
            return {"title": title}, "title cleared" if title is None else "title set"


def _published(done: bool, what: str) -> str:
    return f"ok: {what}" if done else f"not published ({what}): the session is closed"


async def _burst(lifetime: SessionLifetime, key: str, count: int) -> None:
    """Publish ``{key: 1}`` .. ``{key: count}`` as fast as the owner accepts them.

    Stops early once the lifetime is closed (the owner refuses and counts the publication).
    A checkpoint after each publication lets this race the client's next requests.
    """
    for value in range(1, count + 1):
        if not await lifetime.publish(meta={key: value}):
            return
        await trio.lowlevel.checkpoint()
