"""A minimal ACP agent on stdio (raw NDJSON, stdlib only) that keeps every session-info rule.

Each broken agent next to it subclasses :class:`Agent` and breaks exactly one rule, so that
``agent-meta check`` must fail it by that rule's name. ``correct.py`` runs this agent as is:
the control that shows a failure comes from the break, not from the scaffolding.

It speaks v1 and v2 (whichever ``initialize`` asks for), offers load (v1), resume, close and
list (unless ``offers_list`` is off), and replays a conversation whose first entry is the
session info it published when the session was created (``{"title": "New session", "_meta":
{"stage": "new"}}``): replay over newer metadata is what a resync must repair. Prompt lines
are commands:

- ``/meta set KEY JSON``, ``/meta rm KEY``, ``/meta clear``, ``/title TEXT``,
  ``/updated TIMESTAMP``;
- anything else is echoed.

A v1 frame carries the complete merged ``_meta`` (``{}`` when empty), as v1 has no patches.
"""

from __future__ import annotations

import json
import sys
from typing import Any

Json = dict[str, Any]


class Session:
    """One session lifetime: its info (v2-folded) and the conversation to replay."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.title: str | None = None
        self.meta: Json = {}
        self.history: list[Json] = []
        self.closed = False
        self.messages = 0


class Agent:
    """The correct agent; subclasses override one method to break one rule."""

    name = "broken-agents-base"
    list_meta = True
    """Whether session/list entries carry the session's ``_meta``."""
    offers_list = True
    """Whether it offers session/list at all (v1 advertises it; v2, where it is baseline,
    answers ``-32601`` without it)."""

    def __init__(self) -> None:
        self.version = 1
        self.sessions: dict[str, Session] = {}
        self.after: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ wire

    def send(self, message: Json) -> None:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def update(self, session: Session, update: Json) -> None:
        params = {"sessionId": session.session_id, "update": update}
        self.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def run(self) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            method = message.get("method")
            if not isinstance(method, str) or "id" not in message:
                continue  # notifications and responses need no answer here
            handler = getattr(self, "on_" + method.replace("/", "_"), None)
            if handler is None or (method == "session/list" and not self.offers_list):
                error = {"code": -32601, "message": f"no method {method}"}
                self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
                continue
            result = handler(message.get("params") or {})
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            self.after_response(method, message.get("params") or {})

    def after_response(self, method: str, params: Json) -> None:
        if method == "session/prompt" and self.version >= 2:
            # A v2 turn ends with an idle state_update carrying the stop reason.
            idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
            self.update(self.sessions[params["sessionId"]], idle)
        if method == "session/new":
            session = self.sessions[self.last_new]
            created: Json = {"sessionUpdate": "session_info_update", "title": "New session"}
            created["_meta"] = {"stage": "new"}
            session.history.append(self.publish(session, created))

    # ------------------------------------------------------------------ session info

    def publish(self, session: Session, patch: Json) -> Json:
        """Fold ``patch`` (v2 rule) into the session, then send it as the version requires."""
        if "title" in patch:
            session.title = patch["title"]
        if "_meta" in patch:
            meta = patch["_meta"]
            if meta is None:
                session.meta = {}
            else:
                for key, value in meta.items():
                    if value is None:
                        session.meta.pop(key, None)
                    else:
                        session.meta[key] = value
        sent = self.info_frame(session, patch)
        self.update(session, sent)
        return sent

    def info_frame(self, session: Session, patch: Json) -> Json:
        """The update to send for ``patch``: as is on v2, the whole merged ``_meta`` on v1."""
        if self.version >= 2 or "_meta" not in patch:
            return dict(patch)
        return {**patch, "_meta": dict(session.meta)}

    def resync(self, session: Session) -> None:
        """After replay, before the response: the client's view made the agent's again."""
        if self.version >= 2:
            self.resync_with_clear(session)
        else:
            self.update(session, self.snapshot(session))

    def resync_with_clear(self, session: Session) -> None:
        """The v2 form: ``_meta: null``, then the state (when there is any)."""
        self.update(session, {"sessionUpdate": "session_info_update", "_meta": None})
        if session.meta or session.title is not None:
            self.update(session, self.snapshot(session))

    def snapshot(self, session: Session) -> Json:
        snapshot: Json = {"sessionUpdate": "session_info_update", "_meta": dict(session.meta)}
        if session.title is not None:
            snapshot["title"] = session.title
        return snapshot

    # ------------------------------------------------------------------ methods

    def on_initialize(self, params: Json) -> Json:
        self.version = 2 if params.get("protocolVersion") == 2 else 1
        info = {"name": self.name, "version": "0"}
        if self.version == 2:
            return {"protocolVersion": 2, "info": info, "capabilities": {"session": {}}}
        sessions: Json = {"resume": {}, "close": {}}
        if self.offers_list:
            sessions["list"] = {}
        capabilities = {"loadSession": True, "sessionCapabilities": sessions}
        return {"protocolVersion": 1, "agentInfo": info, "agentCapabilities": capabilities}

    def on_session_new(self, params: Json) -> Json:
        session_id = f"broken-{len(self.sessions) + 1}"
        self.sessions[session_id] = Session(session_id, params.get("cwd", "/"))
        self.last_new = session_id
        return {"sessionId": session_id}

    def on_session_list(self, params: Json) -> Json:
        entries = []
        for session in self.sessions.values():
            entry: Json = {"sessionId": session.session_id, "cwd": session.cwd}
            if session.title is not None:
                entry["title"] = session.title
            if self.list_meta and session.meta:
                entry["_meta"] = dict(session.meta)
            entries.append(entry)
        return {"sessions": entries}

    def on_session_prompt(self, params: Json) -> Json:
        session = self.sessions[params["sessionId"]]
        text = "".join(block.get("text", "") for block in params.get("prompt", []))
        session.messages += 1
        message_id = f"m{session.messages}"
        user: Json = {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": text},
        }
        session.history.append(user)
        for line in text.splitlines():
            reply = self.command(session, line)
            chunk: Json = {"sessionUpdate": "agent_message_chunk"}
            chunk["content"] = {"type": "text", "text": reply + "\n"}
            if self.version >= 2:
                chunk["messageId"] = message_id
            self.update(session, chunk)
            session.history.append(chunk)
        return {"messageId": message_id} if self.version >= 2 else {"stopReason": "end_turn"}

    def command(self, session: Session, line: str) -> str:
        words = line.split(" ", 3)
        info: Json = {"sessionUpdate": "session_info_update"}
        if words[:2] == ["/meta", "set"] and len(words) == 4:
            info["_meta"] = {words[2]: json.loads(words[3])}
        elif words[:2] == ["/meta", "rm"] and len(words) == 3:
            info["_meta"] = {words[2]: None}
        elif words[:2] == ["/meta", "clear"]:
            info["_meta"] = None
        elif words[0] == "/title":
            info["title"] = line.partition(" ")[2] or None
        elif words[0] == "/updated":
            info["updatedAt"] = line.partition(" ")[2] or None
        else:
            return line
        self.publish(session, info)
        return "ok"

    def restore(self, params: Json, *, replay: bool) -> Json:
        session = self.sessions[params["sessionId"]]
        if session.closed:  # a reopen: a fresh lifetime with the same conversation
            session.closed, session.title, session.meta = False, None, {}
        if replay:
            for update in session.history:
                self.update(session, update)
        if self.version >= 2:
            self.update(session, {"sessionUpdate": "state_update", "state": "idle"})
        self.resync(session)
        return {}

    def on_session_load(self, params: Json) -> Json:
        return self.restore(params, replay=True)

    def on_session_resume(self, params: Json) -> Json:
        replay = self.version >= 2 and params.get("replayFrom") is not None
        return self.restore(params, replay=replay)

    def on_session_close(self, params: Json) -> Json:
        self.sessions[params["sessionId"]].closed = True
        return {}


def main(agent: Agent) -> None:
    agent.run()
