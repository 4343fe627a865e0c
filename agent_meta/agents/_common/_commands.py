"""Parsing the reference agent's prompt lines into commands (pure; no I/O, no owner).

A line whose first word is a known command (``/meta``, ``/title``, ``/domain``, ``/fail``,
``/resolve``, ``/burst``, ``/ask``, ``/trace``) is parsed strictly; bad arguments raise
:class:`CommandError` with a message meant for the user. Any other line is not a command
(``parse_line`` returns ``None``) and is echoed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Final, TypeAlias

from agent_meta import JsonObject, JsonValue, json_copy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "COMMANDS",
    "Ask",
    "Burst",
    "Command",
    "CommandError",
    "DomainRemove",
    "DomainSet",
    "Fail",
    "MetaClear",
    "MetaPatchCommand",
    "MetaRemove",
    "MetaSet",
    "Resolve",
    "SetTitle",
    "Trace",
    "available_commands_update",
    "parse_dotted_path",
    "parse_line",
]

MAX_BURST: Final = 1_000_000
"""Largest ``/burst`` count accepted."""

COMMANDS: Final[tuple[tuple[str, str, str], ...]] = (
    ("meta", "Edit _meta: set KEY JSON | rm KEY | patch JSON_OBJECT | clear", "set KEY JSON"),
    ("title", "Set the session title (no text: clear it)", "TEXT"),
    ("domain", "Edit inside a top-level key: set KEY PATH JSON | rm KEY PATH", "set KEY a.b JSON"),
    ("fail", "Report a failure incident", "ID REVISION [TITLE]"),
    ("resolve", "Resolve a failure incident (only if id and revision match)", "ID REVISION"),
    ("burst", "Publish {KEY: 1} .. {KEY: N} in the background, as fast as possible", "N KEY"),
    ("ask", "Ask the client for permission (allow / reject) and wait for the answer", "TEXT"),
    ("trace", "Set _meta KEY with notification _meta {traceparent} on that frame only", "T K JSON"),
)
"""``(name, description, input hint)`` of every command, as advertised to clients."""


def available_commands_update(v2: bool) -> JsonObject:
    """The ``available_commands_update`` that advertises :data:`COMMANDS` (ACP v2: each command
    has ``"type": "command"`` and a typed ``input``, as in the schema of
    ``@agentclientprotocol/sdk`` 2.4.0)."""
    commands: list[JsonValue] = []
    for name, description, hint in COMMANDS:
        if v2:
            command: JsonObject = {"type": "command", "name": name, "description": description}
            command["input"] = {"type": "text", "hint": hint}
        else:
            command = {"name": name, "description": description, "input": {"hint": hint}}
        commands.append(command)
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}


class CommandError(ValueError):
    """A command line is malformed; the message explains how, for the user."""


@dataclasses.dataclass(frozen=True, slots=True)
class MetaSet:
    key: str
    value: JsonValue


@dataclasses.dataclass(frozen=True, slots=True)
class MetaRemove:
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class MetaPatchCommand:
    patch: JsonObject


@dataclasses.dataclass(frozen=True, slots=True)
class MetaClear:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class SetTitle:
    title: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class DomainSet:
    key: str
    path: tuple[str, ...]
    value: JsonValue


@dataclasses.dataclass(frozen=True, slots=True)
class DomainRemove:
    key: str
    path: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Fail:
    incident_id: str
    revision: int
    title: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Resolve:
    incident_id: str
    revision: int


@dataclasses.dataclass(frozen=True, slots=True)
class Burst:
    count: int
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class Ask:
    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    traceparent: str
    key: str
    value: JsonValue


Command: TypeAlias = (
    MetaSet
    | MetaRemove
    | MetaPatchCommand
    | MetaClear
    | SetTitle
    | DomainSet
    | DomainRemove
    | Fail
    | Resolve
    | Burst
    | Ask
    | Trace
)


def parse_line(line: str) -> Command | None:
    """Parse one prompt line; ``None`` means "not a command, echo it"."""
    head, _, rest = line.strip().partition(" ")
    parse = _PARSERS.get(head)
    if parse is None:
        return None
    return parse(rest.strip())


def _parse_title(rest: str) -> Command:
    return SetTitle(rest or None)


def _parse_fail(rest: str) -> Command:
    parts = rest.split(None, 2)
    if len(parts) < 2:
        raise CommandError("usage: /fail ID REVISION [TITLE]")
    return Fail(parts[0], _revision(parts[1]), parts[2] if len(parts) > 2 else None)


def _parse_resolve(rest: str) -> Command:
    parts = rest.split()
    if len(parts) != 2:
        raise CommandError("usage: /resolve ID REVISION")
    return Resolve(parts[0], _revision(parts[1]))


def _parse_ask(rest: str) -> Command:
    if not rest:
        raise CommandError("usage: /ask TEXT (the question for the client)")
    return Ask(rest)


def _parse_trace(rest: str) -> Command:
    parts = rest.split(None, 2)
    if len(parts) != 3:
        raise CommandError("usage: /trace TRACEPARENT KEY JSON")
    return Trace(parts[0], parts[1], _json(parts[2]))


def _parse_burst(rest: str) -> Command:
    parts = rest.split()
    if len(parts) != 2:
        raise CommandError("usage: /burst N KEY")
    count = _integer(parts[0], "N")
    if not 1 <= count <= MAX_BURST:
        raise CommandError(f"N must be between 1 and {MAX_BURST}, not {count}")
    return Burst(count, parts[1])


def _parse_meta(rest: str) -> Command:
    action, _, args = rest.partition(" ")
    args = args.strip()
    if action == "set":
        key, _, value = args.partition(" ")
        if not key or not value.strip():
            raise CommandError("usage: /meta set KEY JSON")
        return MetaSet(key, _json(value))
    if action == "rm":
        if not args or len(args.split()) != 1:
            raise CommandError("usage: /meta rm KEY")
        return MetaRemove(args)
    if action == "patch":
        if not args:
            raise CommandError("usage: /meta patch JSON_OBJECT")
        patch = _json(args)
        if not isinstance(patch, dict):
            raise CommandError('/meta patch takes a JSON object, e.g. {"a": 1, "b": null}')
        return MetaPatchCommand(patch)
    if action == "clear":
        if args:
            raise CommandError("usage: /meta clear (no arguments)")
        return MetaClear()
    raise CommandError("usage: /meta set KEY JSON | /meta rm KEY | /meta patch JSON | /meta clear")


def _parse_domain(rest: str) -> Command:
    action, _, args = rest.partition(" ")
    if action == "set":
        parts = args.split(None, 2)
        if len(parts) != 3:
            raise CommandError("usage: /domain set KEY PATH JSON (PATH is dotted, e.g. a.b)")
        return DomainSet(parts[0], parse_dotted_path(parts[1]), _json(parts[2]))
    if action == "rm":
        parts = args.split()
        if len(parts) != 2:
            raise CommandError("usage: /domain rm KEY PATH (PATH is dotted, e.g. a.b)")
        return DomainRemove(parts[0], parse_dotted_path(parts[1]))
    raise CommandError("usage: /domain set KEY PATH JSON | /domain rm KEY PATH")


def parse_dotted_path(text: str) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``; empty names raise :class:`CommandError`."""
    steps = tuple(text.split("."))
    if not all(steps):
        raise CommandError(f"bad PATH {text!r}: use dot-separated, non-empty names, e.g. a.b")
    return steps


def _json(text: str) -> JsonValue:
    try:
        # json_copy refuses what JSON cannot hold (NaN, infinities: an overflowing number).
        return json_copy(json.loads(text))
    except (ValueError, RecursionError) as exc:  # bad JSON, MetaValueError, nested too deep
        raise CommandError(f"bad JSON {text[:80]!r}: {exc}") from None


def _integer(text: str, name: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise CommandError(f"{name} must be an integer, not {text!r}") from None


def _revision(text: str) -> int:
    revision = _integer(text, "REVISION")
    if revision < 0:
        raise CommandError(f"REVISION must not be negative, not {revision}")
    return revision


_PARSERS: Final[Mapping[str, Callable[[str], Command]]] = {
    "/meta": _parse_meta,
    "/title": _parse_title,
    "/domain": _parse_domain,
    "/fail": _parse_fail,
    "/resolve": _parse_resolve,
    "/burst": _parse_burst,
    "/ask": _parse_ask,
    "/trace": _parse_trace,
}
"""The first word of a command line -> the parser of the rest of it."""
