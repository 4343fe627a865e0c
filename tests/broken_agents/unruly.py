"""Breaks nearly every rule at once, the way agents in the wild do: the child that
``agent-meta own`` must tame (``tests/test_own.py``).

- On v1 it sends each publication's partial ``_meta`` as it is (as codex-acp 2.6.0 does), so a
  v1 client that receives it directly keeps only the last key published.
- Its replay re-sends the session info of the session's creation, and it never resyncs.
- Right after a ``session/close`` response it publishes once more, sends an
  ``available_commands_update`` and asks the client for a permission about the closed session
  (as the Rust codex-acp 0.16 sends late updates).
- Prompt lines beyond the base agent's: ``/raw TEXT`` writes TEXT on stdout as a line of its
  own (junk a client must never see); ``/huge N`` writes a JSON line of N bytes;
  ``/bad-meta`` publishes a ``_meta`` that is an array; ``/ask`` asks the client for a
  permission (its answer, as the raw line received, is the reply to ``/answers``); ``/late``
  makes the next replay send the rest of the history after the response, and then the session
  info of the session's creation again; ``/die N`` exits with status N at once, leaving the
  prompt unanswered;
  ``/spam N KEY`` publishes ``{KEY: 1}`` ... ``{KEY: N}`` as fast as it can write;
  ``/metas JSON_ARRAY`` publishes one update per ``_meta`` object of the array, all in one
  write (so that they arrive in one read; a value ``"x*N"`` stands for N x's); ``/deep N``
  publishes a ``_meta`` whose value nests N arrays deep (inside the line limit, past the
  owner's depth limit).
- It takes a ``session/load`` or ``session/resume`` of a session it does not know as a session
  with no history (an agent restarted without its sessions' info).
- An extension request ``_unruly/echo`` is answered with the raw line it came in; a batch is
  answered with one array.
- With ``--publish-in-new``, its ``session/new`` handler publishes ``{"handler": 1}`` for the
  session it creates before it answers (as pydantic-acp does).
- With ``--publish-before-close``, its ``session/close`` handler publishes ``{"step": 1}`` ...
  ``{"step": 50}`` and ``{"closing": true}`` for the session before it answers (the last
  updates of work that ends with the session).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.broken_agents._base import Agent, Json, Session, main


class Unruly(Agent):
    name = "broken-unruly"

    def __init__(self) -> None:
        super().__init__()
        self.raw_line = ""
        self.answers: list[str] = []
        self.asked = 0
        self.late = False
        self.deferred: list[tuple[Session, Json]] = []
        self.publish_in_new = "--publish-in-new" in sys.argv[1:]
        self.publish_before_close = "--publish-before-close" in sys.argv[1:]

    def on_session_new(self, params: Json) -> Json:
        result = super().on_session_new(params)
        if self.publish_in_new:
            update = {"sessionUpdate": "session_info_update", "_meta": {"handler": 1}}
            session = self.sessions[result["sessionId"]]
            session.history.append(self.publish(session, update))
        return result

    def on_session_close(self, params: Json) -> Json:
        session = self.sessions.get(params["sessionId"])
        if self.publish_before_close and session is not None:
            for step in range(1, 51):
                self.publish(
                    session, {"sessionUpdate": "session_info_update", "_meta": {"step": step}}
                )
            self.publish(
                session, {"sessionUpdate": "session_info_update", "_meta": {"closing": True}}
            )
        return super().on_session_close(params)

    def run(self) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            self.raw_line = line.rstrip("\n")
            message = json.loads(line)
            if isinstance(message, list):  # a batch: its requests answered in one array
                requests = [m for m in message if "method" in m and "id" in m]
                sys.stdout.write(json.dumps([self.answer(m) for m in requests]) + "\n")
                sys.stdout.flush()
                for request in requests:
                    self.after_response(request["method"], request.get("params") or {})
                continue
            if "method" not in message:
                self.answers.append(self.raw_line)  # a client's answer to one of our requests
                continue
            if "id" not in message:
                continue
            self.send(self.answer(message))
            self.after_response(message["method"], message.get("params") or {})

    def answer(self, message: Json) -> Json:
        """The response to one request."""
        method = message["method"]
        handler = getattr(self, "on_" + method.replace("/", "_"), None)
        if handler is None:
            error = {"code": -32601, "message": f"no method {method}"}
            return {"jsonrpc": "2.0", "id": message["id"], "error": error}
        result = handler(message.get("params") or {})
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    # ------------------------------------------------------------------ breaking the rules

    def info_frame(self, session: Session, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(patch)  # partial objects on v1 too

    def resync(self, session: Session) -> None:
        return None

    def restore(self, params: Json, *, replay: bool) -> Json:
        session_id = params["sessionId"]
        if session_id not in self.sessions:
            self.sessions[session_id] = Session(session_id, params.get("cwd", "/"))
        session = self.sessions[session_id]
        session.closed = False
        if replay and self.late:
            self.late = False
            half = len(session.history) // 2
            for update in session.history[:half]:
                self.update(session, update)
            rest = session.history[half:] + session.history[:1]  # its info again, last
            self.deferred = [(session, update) for update in rest]
            return {}
        return super().restore(params, replay=replay)

    def after_response(self, method: str, params: Json) -> None:
        super().after_response(method, params)
        for session, update in self.deferred:
            self.update(session, update)
        self.deferred = []
        if method != "session/close":
            return
        session = self.sessions[params["sessionId"]]
        self.update(session, {"sessionUpdate": "session_info_update", "_meta": {"closed": True}})
        self.update(
            session, {"sessionUpdate": "available_commands_update", "availableCommands": []}
        )
        self.ask(session, "after close")

    def ask(self, session: Session, title: str) -> None:
        self.asked += 1
        params = {
            "sessionId": session.session_id,
            "toolCall": {"toolCallId": f"t{self.asked}", "title": title},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
        }
        request = {
            "jsonrpc": "2.0",
            "id": f"ask-{self.asked}",
            "method": "session/request_permission",
        }
        self.send({**request, "params": params})

    def command(self, session: Session, line: str) -> str:
        word, _, rest = line.partition(" ")
        if word == "/raw":
            sys.stdout.write(rest + "\n")
            sys.stdout.flush()
            return "raw"
        if word == "/huge":
            padding = "x" * max(0, int(rest) - 40)
            self.send({"jsonrpc": "2.0", "method": "_unruly/huge", "params": {"p": padding}})
            return "huge"
        if word == "/bad-meta":
            bad = {"sessionUpdate": "session_info_update", "_meta": [1, 2]}
            self.update(session, bad)
            return "bad"
        if word == "/ask":
            self.ask(session, rest or "May I?")
            return "asked"
        if word == "/answers":
            return json.dumps(self.answers)
        if word == "/late":
            self.late = True
            return "late"
        if word == "/spam":
            count, key = rest.split(" ")
            for value in range(1, int(count) + 1):
                self.update(
                    session, {"sessionUpdate": "session_info_update", "_meta": {key: value}}
                )
            return "spammed"
        if word == "/metas":  # one write, so that they arrive in one read
            lines = []
            for meta in json.loads(rest):
                for key, value in meta.items():  # "x*N": N x's (a line of the client is short)
                    if isinstance(value, str) and value.startswith("x*"):
                        meta[key] = "x" * int(value[2:])
                update = {"sessionUpdate": "session_info_update", "_meta": meta}
                params = {"sessionId": session.session_id, "update": update}
                message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
                lines.append(json.dumps(message, separators=(",", ":")) + "\n")
            sys.stdout.write("".join(lines))
            sys.stdout.flush()
            return "sent"
        if word == "/deep":
            deep = "[" * int(rest) + "]" * int(rest)
            sid = json.dumps(session.session_id)
            line = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid
            line += ',"update":{"sessionUpdate":"session_info_update","_meta":{"deep":'
            sys.stdout.write(line + deep + "}}}}\n")
            sys.stdout.flush()
            return "deep"
        if word == "/die":
            sys.stdout.flush()
            os._exit(int(rest))
        return super().command(session, line)

    def on__unruly_echo(self, params: Json) -> Json:
        return {"line": self.raw_line}


if __name__ == "__main__":
    main(Unruly())
