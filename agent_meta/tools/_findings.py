"""What ``agent-meta proxy`` and ``agent-meta check`` report on, and the pieces they share.

The rules a client can observe (:data:`RULES`), a :class:`Finding` against one, the
:class:`Frame` record of one line read, what a v1 client misreads in a ``_meta`` update
(:func:`v1_misreading`), and the lines of a watched byte stream (:func:`take_lines`, with the
library's own :class:`~agent_meta.sansio._lines.LineSplitter`). The
:class:`~agent_meta.tools._watch.Watcher` judges frames with them; what the client holds is
folded by :class:`~agent_meta.testing.ClientMirror`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final, Literal, TypeAlias

from ..sansio._lines import IncompleteLineError, LineSplitter, LineTooLongError

__all__ = [
    "RULES",
    "WATCHED_LINE_BYTES",
    "Finding",
    "Frame",
    "Meta",
    "Rule",
    "Source",
    "short_meta",
    "take_lines",
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

WATCHED_LINE_BYTES: Final = 64 * 2**20
"""A longer line is forwarded but not watched: a peer that never ends a line cannot make the
watcher hold unbounded memory."""


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


def take_lines(splitter: LineSplitter) -> tuple[list[bytes], int]:
    """The non-blank lines ``splitter`` holds complete, for the watcher, and how many lines it
    skipped as too long to watch. Once the end of the stream is fed, what is left is an
    unterminated last line, if any: it comes as the one line then."""
    lines: list[bytes] = []
    too_long = 0
    while True:
        try:
            line = splitter.next_line()
        except LineTooLongError:
            too_long += 1
            continue
        except IncompleteLineError as exc:
            line = exc.partial
        if line is None:
            return lines, too_long
        lines.append(line)


def short_meta(meta: object, limit: int = 160) -> str:
    """Metadata for a message: ``no _meta`` or compact JSON, cut at ``limit`` characters."""
    if meta is None:
        return "no _meta"
    text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."
