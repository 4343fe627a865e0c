"""The replies of both reference agents to a prompt line, whatever the runtime.

A prompt line is a command or an echo (:mod:`._commands`). The commands that only act on the
session's lifetime handle (domain edits, failure incidents) run here, the same on both runtimes;
each agent runs the rest its own way (``/burst`` as a background task, ``/ask`` through its
connection). Errors become replies; only the owner stopping ends the turn.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_meta import AgentMetaError, OwnerClosedError, TransportBrokenError

from ._commands import (
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
    parse_line,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_meta import JsonObject, JsonValue, SessionLifetime

__all__ = [
    "ASK_OPTIONS",
    "LifetimeCommand",
    "permission_reply",
    "publication",
    "published_reply",
    "reply_to_line",
    "run_lifetime_command",
]

ASK_OPTIONS: list[JsonValue] = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
"""The options of ``/ask``'s ``session/request_permission``."""


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


def publication(
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
