"""Printing the demo's steps: each received frame on one line, bursts elided, and what the
client holds after them (``agent-meta demo``, both protocol versions)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..testing import ClientMirror

__all__ = ["SHOWN_AT_EACH_END", "is_info", "kind_of", "print_frames"]

Message = dict[str, Any]

SHOWN_AT_EACH_END = 3
"""A burst prints this many frames at each end and elides the middle."""


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


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _frame_line(message: Message, requests: dict[Any, str]) -> str:
    """One received frame: session-info updates verbatim, everything else summarized."""
    if "method" not in message:
        method = requests.get(message.get("id"), "?")
        body = message["error"] if "error" in message else message.get("result")
        return f"response to {method}  {_short(json.dumps(body), 80)}"
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(update, dict):
        return f"{message['method']}  {_short(json.dumps(params), 80)}"
    extra = f"  params._meta={json.dumps(params['_meta'])}" if "_meta" in params else ""
    if is_info(message):
        return f"update  {json.dumps(update)}{extra}"
    if update.get("sessionUpdate") == "state_update":
        reason = f" ({update['stopReason']})" if "stopReason" in update else ""
        return f"update  state_update {update.get('state')}{reason}"
    content = update.get("content")
    said = content.get("text") if isinstance(content, dict) else None
    detail = f"  {json.dumps(_short(said))}" if isinstance(said, str) else ""
    return f"update  {update.get('sessionUpdate')}{detail}{extra}"


def _shown(received: list[Message]) -> list[tuple[int, Message] | int]:
    """Frames to print, with runs elided (an int is "this many frames left out").

    Session-info frames and responses are what the demo is about, so they are kept, except in
    the middle of a long run of them (a burst); other frames keep only the first of a run.
    """
    shown: list[tuple[int, Message] | int] = []
    run: list[tuple[int, Message]] = []
    run_is_status = False

    def flush() -> None:
        if run_is_status and len(run) > 2 * SHOWN_AT_EACH_END + 1:
            shown.extend(run[:SHOWN_AT_EACH_END])
            shown.append(len(run) - 2 * SHOWN_AT_EACH_END)
            shown.extend(run[-SHOWN_AT_EACH_END:])
        elif not run_is_status and len(run) > 2:
            shown.append(run[0])
            shown.append(len(run) - 1)
        else:
            shown.extend(run)
        run.clear()

    for index, message in enumerate(received):
        status = is_info(message) or "method" not in message or kind_of(message) == "state_update"
        if run and status != run_is_status:
            flush()
        run_is_status = status
        run.append((index, message))
    flush()
    return shown


def print_frames(
    console: Console,
    title: str,
    why: str,
    received: list[Message],
    requests: dict[Any, str],
    mirror: ClientMirror,
    session_id: str,
) -> None:
    """One step of a story: its frames as received, then what the client holds."""
    from rich.markup import escape

    console.rule(f"[bold]{escape(title)}")
    console.print(f"[dim]{escape(why)}")
    for item in _shown(received):
        if isinstance(item, int):
            console.print(f"  [dim]     ... {item} more ...")
            continue
        index, message = item
        style = "cyan" if is_info(message) else ("green" if "method" not in message else "dim")
        console.print(f"  [{style}]{index + 1:>3}  {escape(_frame_line(message, requests))}")
    info = mirror.info(session_id)
    console.print(
        f"  [bold]client holds[/] title={escape(json.dumps(_plain(info.title)))} "
        f"_meta={escape(json.dumps(info.meta))}"
    )


def _plain(value: object) -> object:
    return value if value is None or isinstance(value, str) else "<never told>"
