"""Running one prompt line of an SDK agent: a command, or an echo.

The point of these agents is the split. What the SDK can say goes through the SDK, as any SDK
agent would write it: ``conn.session_update(sid, SessionInfoUpdate(...))`` for a title or a
``_meta`` patch (``/meta set``, ``rm``, ``patch``, ``/title TEXT``, ``/trace`` with its
notification ``_meta`` as keyword arguments), and the adapter absorbs it into the lifetime.
What the SDK cannot say goes through the lifetime handle: domain edits and failure incidents,
and on ACP v1 a cleared ``_meta`` or title (the v1 API drops ``None`` fields; the v2 API keeps
them, so there ``/meta clear`` and ``/title`` with no text go through the SDK too). Both paths
end in the same owner, so a client folds the same state as with the trio reference agent.
``/ask`` is the agent's own (the permission request differs between the versions).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import acp
import pydantic

from agent_meta import OMITTED

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
    LifetimeCommand,
    permission_reply,
    published_reply,
    reply_to_line,
    run_lifetime_command,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_meta import JsonValue, SessionLifetime

__all__ = ["LineContext", "permission_answer", "run_line"]


@dataclasses.dataclass(frozen=True, slots=True)
class LineContext:
    """What a prompt line may act on: the SDK connection and the session's lifetime."""

    send: Callable[..., Awaitable[None]]
    """``session/update`` through the SDK: ``send(session_id, update, **notification_meta)``."""
    lifetime: SessionLifetime
    """The session's lifetime, for what the SDK cannot express."""
    info_update: Callable[..., Any]
    """Builds the SDK's ``SessionInfoUpdate`` from its fields (``field_meta``, ``title``)."""
    clears_through_sdk: bool
    """The SDK keeps ``None`` fields (its v2 API): clearing ``_meta`` or the title goes through
    it too."""
    start_burst: Callable[[str, int], str]
    """Starts ``/burst`` as a task of the session; returns the reply."""
    ask: Callable[[str], Awaitable[str]]
    """``/ask TEXT``: asks the client, waits, returns the reply."""


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
        case SetTitle(None) if ctx.clears_through_sdk:
            return await _say(ctx, {"title": None}, "title cleared")
        case MetaClear() if ctx.clears_through_sdk:
            return await _say(ctx, {"field_meta": None}, "_meta cleared")
        case SetTitle(None):  # the v1 API drops a None title: only the lifetime can clear it
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
            return await ctx.ask(text)
    raise AssertionError(f"unhandled command {command!r}")  # pragma: no cover


async def _say(
    ctx: LineContext, fields: dict[str, Any], what: str, **notification_meta: str
) -> str:
    """Send a ``session_info_update`` the plain SDK way; the adapter makes it a publication.

    The owner's limits are checked first, as the trio agent's ``publish`` applies them: what
    they refuse is answered with their error (the adapter would count and log it, never
    raising into the agent), and a value nested past what the SDK's serializer takes never
    reaches it (pydantic raises out of ``session_update`` there)."""
    lifetime = ctx.lifetime
    if lifetime.closed:  # the SDK call cannot say whether it was fenced; the handle can
        return published_reply(False, what)
    lifetime.check(
        title=fields.get("title", OMITTED),
        meta=fields.get("field_meta", OMITTED),
        notification_meta=notification_meta or None,
    )
    if _unencodable(fields):
        # The SDK's serializer writes U+FFFD for a lone surrogate in a key (legal JSON: a
        # "\ud800" escape) and fails on one in a value; the handle's encoder keeps both.
        meta = fields.get("field_meta", OMITTED)
        title = fields.get("title", OMITTED)
        return published_reply(await lifetime.publish(meta=meta, title=title), what)
    await ctx.send(lifetime.session_id, ctx.info_update(**fields), **notification_meta)
    return published_reply(True, what)


def _unencodable(value: object) -> bool:
    """Whether ``value`` holds a string (a key included) that UTF-8 cannot encode."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_unencodable(key) or _unencodable(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_unencodable(item) for item in value)
    return False


async def permission_answer(request: Awaitable[Any]) -> str:
    """The reply to the client's answer to ``session/request_permission`` (either version's
    SDK call, awaited here); a refusal or a result that is not a permission response is no
    answer. A closed connection raises ``ConnectionError`` (the caller says so)."""
    try:
        response = await request
    except acp.RequestError as exc:
        return f"not answered: the client refused ({exc.code} {exc})"
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
