"""Running one prompt line on the trio reference agent: the replies both agents share
(:mod:`agent_meta.agents._common._replies`), plus ``/burst`` as a background task of the session
(closing the session stops it) and ``/ask`` through the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio

from agent_meta import ClientRequestError, ConnectionClosedError

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
    publication,
    published_reply,
    reply_to_line,
    run_lifetime_command,
)

if TYPE_CHECKING:
    from agent_meta import RequestContext, SessionLifetime

__all__ = ["Foreground", "run_line"]


class Foreground(Protocol):
    """Where a turn reports its foreground state (ACP v2 ``state_update``)."""

    async def report(self, state: str) -> None: ...


async def run_line(
    ctx: RequestContext, lifetime: SessionLifetime, foreground: Foreground, line: str
) -> str:
    """Run one prompt line; return the agent's reply (errors are replies too)."""
    return await reply_to_line(line, lambda command: _execute(ctx, lifetime, foreground, command))


async def _execute(
    ctx: RequestContext, lifetime: SessionLifetime, foreground: Foreground, command: Command
) -> str:
    if isinstance(command, MetaSet | MetaRemove | MetaPatchCommand | MetaClear | SetTitle):
        fields, what = publication(command)
        return published_reply(await lifetime.publish(**fields), what)
    if isinstance(command, LifetimeCommand):
        return await run_lifetime_command(lifetime, command)
    match command:
        case Burst(count, key):
            ctx.connection.start_background(
                lambda: _burst(lifetime, key, count),
                name=f"burst {key} x{count}",
                session_id=lifetime.session_id,
            )
            return f"ok: burst of {count} publications of {key} started"
        case Ask(text):
            return await _ask(ctx, lifetime.session_id, foreground, text)
        case Trace(traceparent, key, value):
            done = await lifetime.publish(
                meta={key: value}, notification_meta={"traceparent": traceparent}
            )
            return published_reply(done, f"_meta.{key} set with trace {traceparent}")
    raise AssertionError(f"unhandled command {command!r}")  # pragma: no cover


async def _ask(ctx: RequestContext, session_id: str, foreground: Foreground, text: str) -> str:
    """``session/request_permission`` with allow / reject; the turn waits for the answer.

    While it waits the session's foreground state is ``requires_action`` (v2), and ``running``
    again once answered. If the turn is cancelled meanwhile (``session/cancel``, ``session/close``)
    the connection tells the client with ``$/cancel_request``.
    """
    params: dict[str, object] = {"options": ASK_OPTIONS}
    if ctx.protocol_version >= 2:
        params["title"] = text
    else:
        tool_call_id = f"ask-{ctx.request_id}-{len(text)}"
        params["toolCall"] = {"toolCallId": tool_call_id, "title": text, "kind": "other"}
    await foreground.report("requires_action")
    try:
        result = await ctx.connection.request_permission(session_id, params)
    except ClientRequestError as exc:
        reply = f"not answered: the client refused ({exc.code} {exc.message})"
    except ConnectionClosedError:
        return "not answered: the connection closed"
    else:
        reply = permission_reply(result)
    await foreground.report("running")
    return reply


async def _burst(lifetime: SessionLifetime, key: str, count: int) -> None:
    """Publish ``{key: 1}`` .. ``{key: count}`` as fast as the owner accepts them.

    Stops early once the lifetime is closed (the owner refuses and counts the publication).
    A checkpoint after each publication lets this race the client's next requests.
    """
    for value in range(1, count + 1):
        if not await lifetime.publish(meta={key: value}):
            return
        await trio.lowlevel.checkpoint()
