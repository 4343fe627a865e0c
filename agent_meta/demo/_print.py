"""Printing the demo's steps: each request the client sent, each frame it received (every one,
in wire order, on one line), and what the client holds after them (``agent-meta demo``, both
protocol versions)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..testing import ClientMirror

__all__ = ["NEVER_TOLD", "is_info", "kind_of", "print_frames", "print_legend"]

Message = dict[str, Any]

NEVER_TOLD = "<never told>"
"""What the client holds as a title that no frame has mentioned yet (unlike ``null``, which a
frame said)."""


def is_info(message: Message) -> bool:
    """Whether ``message`` is a ``session_info_update``."""
    return (
        message.get("method") == "session/update"
        and message["params"]["update"].get("sessionUpdate") == "session_info_update"
    )


def kind_of(message: Message) -> str | None:
    """The ``sessionUpdate`` kind of a ``session/update``, else ``None``."""
    if message.get("method") != "session/update":
        return None
    kind = message["params"]["update"].get("sessionUpdate")
    return kind if isinstance(kind, str) else None


def print_legend(console: Console) -> None:
    """How to read a step, and the words the steps use, once before the first story."""
    from rich.markup import escape

    for line in (
        "How to read a step: [magenta]sent[/] lines are the requests the client wrote; then every "
        "frame the agent wrote back, numbered in wire order ([cyan]session_info_update[/] frames "
        "whole, [green]responses[/] whole, other updates by kind); then what the client holds "
        "after folding those frames.",
        "Session info is a session's title and its _meta, an object that many writers share. "
        f'title="{escape(NEVER_TOLD)}" means no frame has mentioned a title yet (title=null: a '
        "frame said there is none).",
        "The rules the steps name (the README lists them): R4 resync on load and resume, R5 the "
        "info belongs to the session's lifetime, R6 nothing is written after close (fenced), "
        "R7 a failure is cleared only by its own id and revision, R8 an extension edits inside "
        "its own key, R10 v1 frames carry the whole object, v2 frames only what changed.",
        "On v2 a prompt is answered at once with its messageId; the turn then goes on as "
        "updates (user_message, agent_message, state_update running ... idle): the foreground "
        "state is the state_update a client shows while a turn runs.",
    ):
        console.print(f"[dim]{line}")


def _sent_line(message: Message) -> str:
    """One request the client sent: its method and its params, whole."""
    if "method" not in message:
        return f"sent  response  {json.dumps(message)}"
    return f"sent  {message['method']}  {json.dumps(message.get('params'))}"


def _frame_line(message: Message, requests: dict[Any, str]) -> str:
    """One received frame: session-info updates and responses whole, other updates by kind."""
    if "method" not in message:
        method = requests.get(message.get("id"), "?")
        body = message["error"] if "error" in message else message.get("result")
        return f"response to {method}  {json.dumps(body)}"
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(update, dict):
        return f"{message['method']}  {json.dumps(params)}"
    extra = f"  params._meta={json.dumps(params['_meta'])}" if "_meta" in params else ""
    if is_info(message):
        return f"update  {json.dumps(update)}{extra}"
    if update.get("sessionUpdate") == "state_update":
        reason = f" ({update['stopReason']})" if "stopReason" in update else ""
        return f"update  state_update {update.get('state')}{reason}"
    content = update.get("content")
    said = content.get("text") if isinstance(content, dict) else None
    detail = f"  {json.dumps(said)}" if isinstance(said, str) else ""
    return f"update  {update.get('sessionUpdate')}{detail}{extra}"


def print_frames(
    console: Console,
    title: str,
    why: str,
    traffic: list[tuple[bool, Message]],
    requests: dict[Any, str],
    mirror: ClientMirror,
    session_id: str,
) -> None:
    """One step of a story: every message the client sent and received, in wire order (the
    received ones numbered), then what the client holds."""
    from rich.markup import escape

    console.rule(f"[bold]{escape(title)}")
    console.print(f"[dim]{escape(why)}")
    index = 0
    for sent, message in traffic:
        if sent:
            console.print(f"  [magenta]     {escape(_sent_line(message))}")
            continue
        index += 1
        style = "cyan" if is_info(message) else ("green" if "method" not in message else "dim")
        console.print(f"  [{style}]{index:>3}  {escape(_frame_line(message, requests))}")
    info = mirror.info(session_id)
    console.print(
        f"  [bold]client holds[/] title={escape(json.dumps(_plain(info.title)))} "
        f"_meta={escape(json.dumps(info.meta))}"
    )


def _plain(value: object) -> object:
    return value if value is None or isinstance(value, str) else NEVER_TOLD
