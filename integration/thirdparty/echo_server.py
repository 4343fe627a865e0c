"""A local OpenAI-compatible model that echoes: the only thing stubbed under the real agents.

Stdlib only. It answers ``GET /v1/models`` (and ``/v1/models/<id>``) and
``POST /v1/chat/completions``, plain or streamed (server-sent events ending with a usage chunk
and ``[DONE]``), with ``"echo: <the last user message>"``. Any other path gets a JSON 404 (hermes
probes a few while it guesses the server kind). mistral-vibe, hermes-agent and kimi-cli point
their OpenAI-compatible provider at it; fast-agent needs no server (``--model passthrough``).

In a test: ``with serving() as base_url: ...`` (a free port on 127.0.0.1, a daemon thread).
By hand: ``python integration/thirdparty/echo_server.py --port 8765``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

MODEL: Final = "echo-model"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def reply_to(messages: Any) -> str:
    """``"echo: "`` and the text of the last user message."""
    users = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
    return "echo: " + (_text(users[-1].get("content")) if users else "")


class EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the agents' stderr is the test's evidence, not this server's."""

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        path = self._path()
        if path in ("/v1/models", "/models"):
            model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "echo"}
            self._json(200, {"object": "list", "data": [model]})
        elif "/models/" in path:
            model_id = path.split("/models/", 1)[1]
            self._json(200, {"id": model_id, "object": "model", "created": 0, "owned_by": "echo"})
        else:
            self._json(404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if self._path() not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}})
            return
        reply = reply_to(body.get("messages"))
        prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": max(1, len(reply) // 4),
            "total_tokens": prompt_tokens + max(1, len(reply) // 4),
        }
        head = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "created": int(time.time()),
            "model": body.get("model") or MODEL,
        }
        if not body.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            completion = {**head, "object": "chat.completion", "choices": [choice]}
            self._json(200, {**completion, "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        words = reply.split(" ")
        deltas = [{"role": "assistant", "content": ""}]
        deltas += [{"content": word if i == 0 else " " + word} for i, word in enumerate(words)]
        for delta in deltas:
            self._event(head, [{"index": 0, "delta": delta, "finish_reason": None}])
        self._event(head, [{"index": 0, "delta": {}, "finish_reason": "stop"}])
        self._event(head, [], usage=usage)  # sent when stream_options.include_usage asks
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, head: dict[str, Any], choices: list[Any], **extra: Any) -> None:
        chunk = {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.flush()


@contextlib.contextmanager
def serving(host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve in a daemon thread for the duration of the block; yields the ``/v1`` base URL.
    The socket is bound before the block starts, so a client can connect at once."""
    server = ThreadingHTTPServer((host, port), EchoHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="echo-model", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="a local OpenAI-compatible echo model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), EchoHandler)
    server.daemon_threads = True
    print(f"echo model on http://{args.host}:{server.server_address[1]}/v1", file=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
