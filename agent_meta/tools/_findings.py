"""What ``agent-meta proxy`` and ``agent-meta check`` report on, and the pieces they share.

The rules a client can observe (:data:`RULES`), a :class:`Finding` against one, the
:class:`Frame` record of one line read, the client's fold of a ``_meta`` update
(:func:`patch_meta`), what a v1 client misreads in one (:func:`v1_misreading`), and the
:class:`LineSplitter` that cuts a byte stream into lines. The
:class:`~agent_meta.tools._watch.Watcher` judges frames with them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "RULES",
    "Finding",
    "Frame",
    "LineSplitter",
    "Meta",
    "Rule",
    "Source",
    "json_kind",
    "patch_meta",
    "replace_meta",
    "short_meta",
    "v1_misreading",
]

Source: TypeAlias = Literal["client", "agent"]
"""Who wrote a line: the client (to the agent) or the agent (to the client)."""

Meta: TypeAlias = "dict[str, Any] | None"


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """One rule the tools report on: a short id, what it says, where the design states it."""

    id: str
    text: str
    design: str


RULES: Final = (
    Rule("json", "every line is one JSON-RPC 2.0 message: UTF-8 JSON, newline-terminated", "R12"),
    Rule(
        "shape",
        "a session_info_update's _meta is an object or null; title is a string or null",
        "R12",
    ),
    Rule("updated-at", "updatedAt is an RFC 3339 date-time with a UTC offset (v2)", "R12"),
    Rule(
        "resync",
        "after session/load or session/resume with replay the client holds the _meta it held "
        "before, or _meta: null and the snapshot arrived after the replay, before the response; "
        "no resync clears what the agent holds without the snapshot",
        "R4",
    ),
    Rule("fence", "nothing arrives for a session after its session/close response", "R6"),
    Rule(
        "v1-meaning",
        "on v1, _meta: null means omitted and an object replaces the stored one: an agent must "
        "not rely on v2 patches (null to clear, a key set to null to remove, partial objects)",
        "R10",
    ),
    Rule(
        "state",
        "the _meta the client folded equals the agent's own session/list entry (check only)",
        "R1, R2",
    ),
)
"""Every rule, in report order. ``state`` needs a client that asks; only ``check`` does."""

RULE_IDS: Final = frozenset(rule.id for rule in RULES)


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """A rule broken at a frame. ``frames`` are the sequence numbers that show it, in order."""

    rule: str
    message: str
    session: str | None = None
    frames: tuple[int, ...] = ()

    def describe(self) -> str:
        """One line for a terminal: rule, session, message, frames."""
        where = f"session {self.session}: " if self.session is not None else ""
        frames = ", ".join(f"#{seq}" for seq in self.frames)
        return f"[{self.rule}] {where}{self.message} (frames {frames})"


@dataclasses.dataclass(slots=True)
class Frame:
    """One line of the connection as the watcher saw it.

    ``message`` is the parsed JSON-RPC message, or ``None`` when the line was not one.
    ``session`` is the session the frame belongs to (a response belongs to its request's).
    """

    seq: int
    source: Source
    t: float
    line: bytes
    message: dict[str, Any] | None = None
    session: str | None = None
    findings: tuple[Finding, ...] = ()


def patch_meta(stored: Meta, update: Meta) -> Meta:
    """Apply a v2 ``_meta`` update (``None`` clears) to ``stored``, in place; return the result.

    Per top-level key: ``null`` removes, any other value replaces. No metadata is ``None``.
    ``stored`` is changed, so pass a copy if the caller keeps the old value.
    """
    if update is None:
        return None
    result = stored if stored is not None else {}
    for key, value in update.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result or None


def replace_meta(stored: Meta, meta: Meta) -> Meta:
    """The v1 rule: an object replaces ``stored`` whole (a copy); ``null`` means omitted."""
    return stored if meta is None else dict(meta) or None


def json_kind(value: object) -> str:
    """How a finding names the JSON type of ``value`` ("an object", "a number" ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "unknown")


def v1_misreading(held: Meta, meta: Meta) -> str | None:
    """What a v1 client makes of ``meta`` that the agent did not mean (``held``: what it
    stores before), or ``None``: a ``null`` that keeps metadata, or a key set to ``null``."""
    if meta is None:
        if held is None:
            return None
        return (
            "_meta: null on v1 means 'omitted': the client keeps "
            f"{short_meta(held)} (to clear on v1, send _meta: {{}})"
        )
    removed = [key for key, value in meta.items() if value is None]
    if not removed:
        return None
    return (
        f"on v1 the client stores {', '.join(repr(k) for k in removed)} as null (a v1 "
        "_meta object replaces the stored one; only v2 removes a key set to null)"
    )


class LineSplitter:
    """Cuts a byte stream into lines (without their newline) for the watcher.

    Whatever the stream holds is forwarded elsewhere; this only decides what the watcher sees.
    A line longer than ``limit`` bytes is cut off and counted in :attr:`skipped`, so a peer
    that never ends a line cannot make the watcher hold unbounded memory.
    """

    def __init__(self, limit: int = 64 * 2**20) -> None:
        self._limit = limit
        self._held = bytearray()
        self._skipping = False
        self.skipped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines that ``chunk`` completes, in order."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self._hold(chunk)
            return []
        lines = chunk[:end].split(b"\n")
        if self._skipping:
            del lines[0]  # the end of a line too long to watch
            self._skipping = False
        elif self._held:
            lines[0] = bytes(self._held) + lines[0]
            self._held.clear()
        self._hold(chunk[end + 1 :])
        return lines

    def finish(self) -> bytes | None:
        """What is left at the end of the stream: an unterminated last line, or ``None``."""
        rest = None if self._skipping or not self._held else bytes(self._held)
        self._held.clear()
        self._skipping = False
        return rest

    def _hold(self, data: bytes) -> None:
        if self._skipping:
            return
        if len(self._held) + len(data) > self._limit:
            self._held.clear()
            self._skipping = True
            self.skipped += 1
            return
        self._held += data


def short_meta(meta: object, limit: int = 160) -> str:
    """Metadata for a message: ``no _meta`` or compact JSON, cut at ``limit`` characters."""
    if meta is None:
        return "no _meta"
    text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."
