"""A fake OpenAI Responses server on loopback, so that Codex runs offline (stdlib only).

    python fake_responses.py        # prints the port it listens on as its first stdout line

Codex makes one ``POST /v1/responses`` per turn (``"stream": true``, the whole history in
``input``), one more for a session's title after its first successful turn (a ``json_schema``
``text.format`` with a ``title`` property), and for clients that announce JetBrains AIR one for
a suggested next prompt. Each is answered with a ``text/event-stream`` holding one assistant
message: ``echo: <last user text>``, ``{"title": "Title: <first words>"}`` or
``{"suggestion": ...}``. ``GET /v1/models`` answers an empty list.

The last user text may hold triggers: ``FAIL`` answers HTTP 500 (the turn fails),
``NOTITLE`` answers 500 to the title request only (Codex then skips its five-second wait for
the title's echo before a later load or resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from typing import Any

SUGGESTION = "This is an app-generated request for a suggested next user message"


def user_texts(body: dict[str, Any]) -> list[str]:
    """The texts of the user messages of a request's ``input``, in order."""
    texts = []
    for item in body.get("input") or []:
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("".join(c.get("text", "") for c in content or [] if isinstance(c, dict)))
    return texts


def is_title_request(body: dict[str, Any]) -> bool:
    text_format = (body.get("text") or {}).get("format") or {}
    properties = (text_format.get("schema") or {}).get("properties", {})
    return text_format.get("type") == "json_schema" and "title" in properties


def answer(body: dict[str, Any]) -> str | None:
    """The assistant's text for one request, or ``None`` for an HTTP 500."""
    texts = user_texts(body) or [""]
    last = texts[-1]
    if "FAIL" in last or ("NOTITLE" in last and is_title_request(body)):
        return None
    if is_title_request(body):
        first = last.rsplit("User's first message:\n", 1)[-1]
        return json.dumps({"title": "Title: " + " ".join(first.split()[:6])})
    if last.startswith(SUGGESTION):
        earlier = [text for text in texts[:-1] if not text.startswith("<")]
        return json.dumps({"suggestion": "Suggested after: " + (earlier or [""])[-1][:80]})
    return f"echo: {last}"


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def stream(number: int, text: str, model: str) -> list[bytes]:
    """The events of one streamed response carrying ``text``."""
    response: dict[str, Any] = {"id": f"resp_fake_{number}", "object": "response"}
    response["model"] = model
    response["created_at"] = int(time.time())
    message_id = f"msg_fake_{number}"
    empty: dict[str, Any] = {"type": "message", "id": message_id, "role": "assistant"}
    empty["status"] = "in_progress"
    empty["content"] = []
    done = {**empty, "status": "completed"}
    done["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    created = {**response, "status": "in_progress", "output": []}
    completed = {**response, "status": "completed", "output": [done], "usage": usage}
    delta = {"item_id": message_id, "output_index": 0, "content_index": 0, "delta": text}
    return [
        event("response.created", {"type": "response.created", "response": created}),
        event(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": empty},
        ),
        event("response.output_text.delta", {"type": "response.output_text.delta", **delta}),
        event(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": done},
        ),
        event("response.completed", {"type": "response.completed", "response": completed}),
    ]


def plain(status: int, payload: bytes) -> bytes:
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    return head.encode() + payload


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return method, target, await reader.readexactly(int(headers.get("content-length", "0")))
    body = b""
    while size := int((await reader.readline()).strip().split(b";")[0], 16):
        body += (await reader.readexactly(size + 2))[:-2]
    await reader.readexactly(2)
    return method, target, body


class Server:
    """Numbers the requests it serves, for the ids of its responses."""

    def __init__(self) -> None:
        self.served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.served += 1
        try:
            method, target, raw = await read_request(reader)
            path = target.split("?", 1)[0]
            if method == "POST" and path.endswith("/responses"):
                body = json.loads(raw or b"{}")
                text = answer(body)
                print(json.dumps({"n": self.served, "ok": text is not None}), file=sys.stderr)
                if text is None:
                    writer.write(plain(500, b'{"error":{"message":"fake failure"}}'))
                else:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
                    )
                    for chunk in stream(self.served, text, body.get("model", "fake")):
                        writer.write(chunk)
            elif method == "GET" and path.endswith("/models"):
                writer.write(plain(200, b'{"object":"list","data":[],"models":[]}'))
            else:
                writer.write(plain(404, b'{"error":{"message":"not found"}}'))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # Codex gave up on the request
        finally:
            writer.close()


async def main() -> None:
    server = await asyncio.start_server(Server().handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
