"""Running one prompt line of the SDK agent: a command, or an echo.

The point of this agent is the split. What the SDK can say goes through the SDK, as any SDK
agent would write it: ``conn.session_update(sid, SessionInfoUpdate(...))`` for a title or a
``_meta`` patch (``/meta set``, ``rm``, ``patch``, ``/title TEXT``, ``/trace`` with its
notification ``_meta`` as keyword arguments), and the adapter absorbs it into the lifetime.
What the SDK cannot say goes through the lifetime handle: a cleared ``_meta`` or title (the SDK
drops ``None`` fields), domain edits and failure incidents. Both paths end in the same owner, so
a client folds the same state as with the trio reference agent.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import acp
import pydantic
from acp.schema import PermissionOption, SessionInfoUpdate, ToolCallUpdate

from .._common._commands import (
    Ask,
    Burst,
    Command,
    MetaClear,
    MetaPatchCommand,
    MetaRemove,
    MetaSet,
    SetTitle,
    Trace,
)
from .._common._replies import (
    ASK_OPTIONS,
    LifetimeCommand,
    permission_reply,
    published_reply,
    reply_to_line,
    run_lifetime_command,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_meta import JsonValue, SessionLifetime

__all__ = ["LineContext", "run_line"]


@dataclasses.dataclass(frozen=True, slots=True)
class LineContext:
    """What a prompt line may act on: the SDK connection and the session's lifetime."""

    client: acp.Client
    """The SDK's connection to the client (``AgentSideConnection``)."""
    lifetime: SessionLifetime
    """The session's lifetime, for what the SDK cannot express."""
    start_burst: Callable[[str, int], str]
    """Starts ``/burst`` as a task of the session; returns the reply."""
    next_tool_call_id: Callable[[], str]
    """A fresh ``toolCallId`` for ``/ask``."""


async def run_line(ctx: LineContext, line: str) -> str:
    """Run one prompt line; return the agent's reply (errors are replies too)."""
    return await reply_to_line(line, lambda command: _execute(ctx, command))


async def _execute(ctx: LineContext, command: Command) -> str:
    lifetime = ctx.lifetime
    match command:
        case MetaSet(key, value):
            return await _say(ctx, {"field_meta": {key: value}}, f"_meta.{key} set")
        case MetaRemove(key):
            return await _say(ctx, {"field_meta": {key: None}}, f"_meta.{key} removed")
        case MetaPatchCommand(patch):
            return await _say(ctx, {"field_meta": patch}, "_meta patched")
        case SetTitle(str() as title):
            return await _say(ctx, {"title": title}, "title set")
        case SetTitle(None):  # the SDK drops a None title: only the lifetime can clear it
            return published_reply(await lifetime.publish(title=None), "title cleared")
        case MetaClear():  # likewise a None _meta
            return published_reply(await lifetime.publish(meta=None), "_meta cleared")
        case Trace(traceparent, key, value):
            what = f"_meta.{key} set with trace {traceparent}"
            return await _say(ctx, {"field_meta": {key: value}}, what, traceparent=traceparent)
    return await _execute_on_lifetime(ctx, command)


async def _execute_on_lifetime(ctx: LineContext, command: Command) -> str:
    """The commands the SDK has no words for: domain edits, incidents, a burst, a question."""
    if isinstance(command, LifetimeCommand):
        return await run_lifetime_command(ctx.lifetime, command)
    match command:
        case Burst(count, key):
            return ctx.start_burst(key, count)
        case Ask(text):
            return await _ask(ctx, text)
    raise AssertionError(f"unhandled command {command!r}")  # pragma: no cover


async def _say(
    ctx: LineContext, fields: dict[str, Any], what: str, **notification_meta: str
) -> str:
    """Send a ``session_info_update`` the plain SDK way; the adapter makes it a publication
    (an owner error, such as a frame over the limit, raises out of ``session_update``)."""
    lifetime = ctx.lifetime
    if lifetime.closed:  # the SDK call cannot say whether it was fenced; the handle can
        return published_reply(False, what)
    update = SessionInfoUpdate(session_update="session_info_update", **fields)
    await ctx.client.session_update(lifetime.session_id, update, **notification_meta)
    return published_reply(True, what)


async def _ask(ctx: LineContext, text: str) -> str:
    """``session/request_permission`` (v1: a ``toolCall``) through the SDK; the turn waits."""
    options = [PermissionOption.model_validate(option) for option in ASK_OPTIONS]
    tool_call = ToolCallUpdate(tool_call_id=ctx.next_tool_call_id(), title=text, kind="other")
    try:
        response = await ctx.client.request_permission(
            session_id=ctx.lifetime.session_id, tool_call=tool_call, options=options
        )
    except acp.RequestError as exc:
        return f"not answered: the client refused ({exc.code} {exc})"
    except ConnectionError:
        return "not answered: the connection closed"
    except pydantic.ValidationError as exc:
        # A result that is not a permission response ({}, null): valid JSON-RPC, no answer.
        return permission_reply(_answered(exc))
    return permission_reply(response.model_dump(mode="json", by_alias=True))


def _answered(error: pydantic.ValidationError) -> JsonValue:
    """What the client answered, as far as the SDK's failed validation shows it: the value it
    could not take (the whole result for ``{}`` or ``null``)."""
    problems = error.errors()
    value: JsonValue = problems[0].get("input") if problems else None
    return value
