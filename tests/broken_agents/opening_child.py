"""A scripted child for ``agent-meta own``'s openings (``tests/test_own_openings.py``): raw
NDJSON, one behaviour per mode (``python -m tests.broken_agents.opening_child MODE``).

- ``two``: holds the first ``session/new``; at the second, publishes ``{"h": 1}`` for ``s1``
  (the held one's session), answers the second (``s2``), then the first (``s1``).
- ``replace``: its ``session/new`` handler sends ``{"a": 1}`` then ``{"b": 2}`` for ``s1``,
  whole objects (a child run with ``--child-meta replace``).
- ``fork-tail``: a load or resume replays nothing before its answer and one message chunk
  after it; its ``session/fork`` handler publishes ``{"live": 1}`` for the parent.
- ``fork-seed``: its ``session/fork`` handler publishes ``{"fk": 1}`` for the fork, ``f1``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else ""


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(session_id: str, body: dict[str, Any]) -> None:
    params = {"sessionId": session_id, "update": body}
    send({"jsonrpc": "2.0", "method": "session/update", "params": params})


def info(session_id: str, meta: dict[str, Any]) -> None:
    update(session_id, {"sessionUpdate": "session_info_update", "_meta": meta})


def answer(request_id: object, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    news = 0
    held: list[object] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            capabilities = {"loadSession": True, "sessionCapabilities": {"resume": {}, "fork": {}}}
            version = params["protocolVersion"]
            answer(request_id, {"protocolVersion": version, "agentCapabilities": capabilities})
        elif method == "session/new":
            news += 1
            if MODE == "two" and news == 1:
                held.append(request_id)
                continue
            if MODE == "two":
                info("s1", {"h": 1})
                answer(request_id, {"sessionId": "s2"})
                answer(held.pop(), {"sessionId": "s1"})
                continue
            if MODE == "replace":
                info("s1", {"a": 1})
                info("s1", {"b": 2})
            answer(request_id, {"sessionId": f"s{news}"})
        elif method in ("session/load", "session/resume"):
            answer(request_id, {})
            if MODE == "fork-tail":
                chunk = {"type": "text", "text": "late history"}
                update(
                    params["sessionId"], {"sessionUpdate": "agent_message_chunk", "content": chunk}
                )
        elif method == "session/fork":
            if MODE == "fork-seed":
                info("f1", {"fk": 1})
            else:
                info(params["sessionId"], {"live": 1})
            answer(request_id, {"sessionId": "f1"})
        elif method == "session/prompt":
            answer(request_id, {"stopReason": "end_turn"})
        elif request_id is not None and method is not None:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    main()
