"""Running one prompt line of the reference agent: a command, or an echo.

Each command drives the session's lifetime through the public API (publish, domain edits,
failure incidents), starts a ``/burst`` as a background task of the session (so closing the
session stops it), or asks the client for permission (``/ask``). Errors become replies; only
the owner stopping ends the turn.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...acp._outbound import ClientRequestError, ConnectionClosedError
from ...core._errors import AgentMetaError, OwnerClosedError, TransportBrokenError
from ._commands import (
    Ask,
    Burst,
    Command,
    CommandError,
    DomainRemove,
    DomainSet,
    Fail,
    MetaClear,
    MetaPatchCommand,
    MetaRemove,
    MetaSet,
    Resolve,
    SetTitle,
    Trace,
    parse_line,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ...acp._agent import RequestContext
    from ...core._json import JsonObject, JsonValue
    from ...owner._lifetime import SessionLifetime

__all__ = [
    "ASK_OPTIONS",
    "Foreground",
    "LifetimeCommand",
    "permission_reply",
    "published_reply",
    "reply_to_line",
    "run_lifetime_command",
    "run_line",
]

ASK_OPTIONS: list[JsonValue] = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
"""The options of ``/ask``'s ``session/request_permission``."""


class Foreground(Protocol):
    """Where a turn reports its foreground state (ACP v2 ``state_update``)."""

    async def report(self, state: str) -> None: ...


async def run_line(
    ctx: RequestContext, lifetime: SessionLifetime, foreground: Foreground, line: str
) -> str:
    """Run one prompt line; return the agent's reply (errors are replies too)."""
    return await reply_to_line(line, lambda command: _execute(ctx, lifetime, foreground, command))


async def reply_to_line(line: str, execute: Callable[[Command], Awaitable[str]]) -> str:
    """The agent's reply to one prompt line, on either runtime: a line that is not a command
    is echoed, a bad command or an owner's refusal (``AgentMetaError``) becomes an ``error:``
    reply; an owner that stopped or a broken transport ends the turn instead."""
    try:
        command = parse_line(line)
    except CommandError as exc:
        return f"error: {exc}"
    if command is None:
        return line
    try:
        return await execute(command)
    except (OwnerClosedError, TransportBrokenError):
        raise
    except AgentMetaError as exc:  # raised by the owner, under the SDK's calls too
        return f"error: {exc}"


async def _execute(
    ctx: RequestContext, lifetime: SessionLifetime, foreground: Foreground, command: Command
) -> str:
    if isinstance(command, MetaSet | MetaRemove | MetaPatchCommand | MetaClear | SetTitle):
        fields, what = _publication(command)
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


def _publication(
    command: MetaSet | MetaRemove | MetaPatchCommand | MetaClear | SetTitle,
) -> tuple[dict[str, Any], str]:
    """The ``publish`` arguments of a plain publication command, and what it did."""
    match command:
        case MetaSet(key, value):
            return {"meta": {key: value}}, f"_meta.{key} set"
        case MetaRemove(key):
            return {"meta": {key: None}}, f"_meta.{key} removed"
        case MetaPatchCommand(patch):
            return {"meta": patch}, "_meta patched"
        case MetaClear():
            return {"meta": None}, "_meta cleared"
        case SetTitle(title):
            return {"title": title}, "title cleared" if title is None else "title set"


LifetimeCommand = DomainSet | DomainRemove | Fail | Resolve
"""The commands that act on the session's lifetime handle only (R7, R8): the same on every
runtime (an SDK agent has no other way to say them)."""


async def run_lifetime_command(lifetime: SessionLifetime, command: LifetimeCommand) -> str:
    """Run a domain edit or a failure report or resolution; return the reply."""
    match command:
        case DomainSet(key, path, value):
            done = await lifetime.domain(key).set(path, value)
            return published_reply(done, f"{key}.{'.'.join(path)} set")
        case DomainRemove(key, path):
            done = await lifetime.domain(key).remove(path)
            return published_reply(done, f"{key}.{'.'.join(path)} removed")
        case Fail(incident_id, revision, title):
            return await _report_failure(lifetime, incident_id, revision, title)
        case Resolve(incident_id, revision):
            if await lifetime.resolve_failure(incident_id, revision):
                return f"ok: failure {incident_id} rev {revision} resolved"
            return f"not resolved: {incident_id} rev {revision} is not the current incident"


def published_reply(done: bool, what: str) -> str:
    """The reply to a publication: done, or refused because the lifetime has ended."""
    return f"ok: {what}" if done else f"not published ({what}): the session is closed"


async def _report_failure(
    lifetime: SessionLifetime, incident_id: str, revision: int, title: str | None
) -> str:
    """``/fail``: report the incident (R8) and say whether the owner took it."""
    record: JsonObject = {
        "id": incident_id,
        "revision": revision,
        "title": title or f"incident {incident_id}",
        "severity": "error",
    }
    done = await lifetime.report_failure(incident_id, revision, record)
    if done:
        return f"ok: failure {incident_id} rev {revision} reported"
    return f"not reported: failure {incident_id} rev {revision} was refused"


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


def permission_reply(result: JsonValue) -> str:
    """The reply to the client's answer: the option it chose; anything else is not an
    approval (ACP v2). A result that is not a ``RequestPermissionResponse`` at all (valid
    JSON-RPC: a result may be any JSON value) counts as no answer."""
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict):
        shown = json.dumps(result, ensure_ascii=False)[:80]
        return f"not answered: the client's answer is not a permission outcome: {shown}"
    if outcome.get("outcome") == "selected":
        option = outcome.get("optionId")
        if option in ("allow", "reject"):
            return f"answer: {option}"
        return f"answer: reject (unknown option {option!r})"
    if outcome.get("outcome") == "cancelled":
        return "answer: cancelled"
    return "answer: reject (no valid outcome)"


async def _burst(lifetime: SessionLifetime, key: str, count: int) -> None:
    """Publish ``{key: 1}`` .. ``{key: count}`` as fast as the owner accepts them.

    Stops early once the lifetime is closed (the owner refuses and counts the publication).
    A checkpoint after each publication lets this race the client's next requests.
    """
    for value in range(1, count + 1):
        if not await lifetime.publish(meta={key: value}):
            return
        await trio.lowlevel.checkpoint()
