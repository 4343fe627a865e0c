"""Read-modify-write edits inside ``_meta``: domain patches (R8) and failure incidents (R7).

An edit is computed from the known state at the moment it is applied, inside the send queue's
synchronous :meth:`~agent_meta.sansio.queue._queue.SendQueue.submit`, so no other writer can slip in
between the read and the write. A driver that must wait for queue room submits the same edit
again afterwards, and it is computed afresh from the state as it is then.

- R7: a report of the current incident with an older revision is stale (refused); a
  resolution clears the record only while ``(id, revision)`` is still the current incident;
  clearing a nested record re-sends the whole top-level value without it (siblings kept,
  emptied objects pruned).
- R8: a domain edit changes one path inside one top-level key and publishes that key's whole
  new value, so what goes on the wire is still a shallow patch.

:class:`ClientTitle` (R13) is no read-modify-write: the send queue applies it itself
(:meth:`~agent_meta.sansio.queue._queue.SendQueue.submit`), as it is the one edit that marks the
title the client's.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from ...core._errors import MetaPathError
from ...core._sentinel import OMITTED, Omitted
from .._encode import EncodedUpdate

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ...core._json import JsonObject, JsonValue
    from ._state import FailureIncident, LifetimeState

__all__ = [
    "ACCEPTED",
    "FENCED",
    "FULL",
    "REFUSED",
    "ClientTitle",
    "DomainEdit",
    "Edit",
    "Outcome",
    "ReportFailure",
    "ResolveFailure",
    "check_path",
    "edit_domain",
    "plan_edit",
    "settle_edit",
]


class Outcome(enum.Enum):
    """What the send queue did with a call."""

    ACCEPTED = "accepted"
    """Part of the known state and queued (or nothing needed sending)."""
    FENCED = "fenced"
    """The lifetime has ended: nothing changed, counted as fenced (R6)."""
    REFUSED = "refused"
    """A stale failure report or a late resolution: nothing changed (R7)."""
    FULL = "full"
    """It needs queue room and there is none: nothing changed; submit it again later."""


# The outcomes by name, for the send path: on Python 3.11 every attribute of an enum class goes
# through ``EnumType.__getattr__`` (about 900 instructions), and a publication compares its
# outcome a dozen times between the handle and the queue.
ACCEPTED: Final = Outcome.ACCEPTED
FENCED: Final = Outcome.FENCED
REFUSED: Final = Outcome.REFUSED
FULL: Final = Outcome.FULL


@dataclasses.dataclass(frozen=True, slots=True)
class DomainEdit:
    """Set ``value`` at ``path`` inside top-level ``key``, or remove it (``value=OMITTED``)."""

    key: str
    path: tuple[str, ...]
    value: JsonValue | Omitted


@dataclasses.dataclass(frozen=True, slots=True)
class ReportFailure:
    """Show ``incident`` with ``record`` at the failure path."""

    incident: FailureIncident
    record: JsonValue


@dataclasses.dataclass(frozen=True, slots=True)
class ResolveFailure:
    """Clear the failure record if ``incident`` is still the one shown."""

    incident: FailureIncident


@dataclasses.dataclass(frozen=True, slots=True)
class ClientTitle:
    """The client set the lifetime's title (R13): ``update`` publishes it (a title only).

    ``confirm``: the title's own frame confirms it to the client (``session/set_title``
    answered here). Without: the client was told already (an agent behind a proxy answered and
    confirmed it), so it only becomes known state, with a resync if it differs from what is
    known.
    """

    update: EncodedUpdate
    confirm: bool = True


Edit: TypeAlias = "EncodedUpdate | DomainEdit | ReportFailure | ResolveFailure | ClientTitle"
"""A plain publication (already encoded), a read-modify-write edit, or a client-set title."""


def plan_edit(
    edit: Edit,
    state: LifetimeState,
    failure_path: Sequence[str],
    encode: Callable[..., EncodedUpdate],
) -> EncodedUpdate | None | Literal[Outcome.REFUSED]:
    """The publication that carries ``edit`` given the known state now.

    ``None``: accepted with nothing to send; :attr:`Outcome.REFUSED`: a stale failure report or
    a late resolution (R7). ``encode`` validates and encodes a ``_meta`` patch for the
    connection's mode.
    """
    if isinstance(edit, EncodedUpdate):
        return edit
    if isinstance(edit, ClientTitle):
        return edit.update
    if isinstance(edit, DomainEdit):
        return _domain_update(state, (edit.key, *edit.path), edit.value, False, encode)
    current = state.failure
    if isinstance(edit, ReportFailure):
        new = edit.incident
        if (
            current is not None
            and current.incident_id == new.incident_id
            and current.revision > new.revision
        ):
            return REFUSED  # stale: a newer revision of this incident is shown
        return _domain_update(state, failure_path, edit.record, False, encode)
    if current != edit.incident:
        return REFUSED  # a late resolution: another incident or revision is shown
    return _domain_update(state, failure_path, OMITTED, True, encode)


def settle_edit(edit: Edit, state: LifetimeState) -> bool:
    """Record the incident an accepted edit shows or clears (R7); whether that changed."""
    if isinstance(edit, ReportFailure):
        changed = state.failure != edit.incident
        state.failure = edit.incident
        return changed
    if isinstance(edit, ResolveFailure):
        state.failure = None
        return True
    return False


def _domain_update(
    state: LifetimeState,
    full_path: Sequence[str],
    value: JsonValue | Omitted,
    prune: bool,
    encode: Callable[..., EncodedUpdate],
) -> EncodedUpdate | None:
    """The publication for a set/remove at ``full_path``, or ``None`` if nothing changes."""
    key, *rest = full_path
    new = edit_domain(state.meta_value(key), key, tuple(rest), value, prune=prune)
    if new is OMITTED:
        return None
    return encode(meta={key: new})


def check_path(path: Sequence[str], what: str = "path") -> tuple[str, ...]:
    """Validate a domain path: a sequence of ``str`` keys (a bare ``str`` is refused)."""
    if isinstance(path, str):
        raise MetaPathError(
            f"must be a sequence of keys, not the string {path!r} (use [{path!r}] or split it)",
            path=what,
        )
    try:
        steps = tuple(path)
    except TypeError:
        raise MetaPathError(
            f"must be a sequence of str keys, not a {type(path).__name__}", path=what
        ) from None
    for index, step in enumerate(steps):
        if not isinstance(step, str):
            raise MetaPathError(f"step {index} is a {type(step).__name__}, not a str", path=what)
    return steps


def edit_domain(
    current: JsonValue | Omitted,
    key: str,
    path: tuple[str, ...],
    value: JsonValue | Omitted,
    *,
    prune: bool = False,
) -> JsonValue | None | Omitted:
    """Compute the new whole value of top-level ``key`` after a set or a removal at ``path``.

    ``current`` is a fresh copy (it is modified). ``value`` is ``OMITTED`` for a removal.
    Returns the new value, ``None`` to remove the key, or ``OMITTED`` when nothing changes.
    With ``prune``, objects emptied by a removal are removed too, up to the key itself.
    """
    where = f"_meta[{key!r}]"
    if not path:
        if value is OMITTED:
            return OMITTED if current is OMITTED else None
        return value
    if value is OMITTED:
        return _remove_at(current, path, prune)
    if current is OMITTED:
        root: JsonObject = {}
    elif isinstance(current, dict):
        root = current
    else:
        raise MetaPathError(f"holds a {type(current).__name__}, not an object", path=where)
    node = root
    for step in path[:-1]:
        where += f"[{step!r}]"
        child = node.get(step)
        if child is None and step not in node:
            child = {}
            node[step] = child
        if not isinstance(child, dict):
            raise MetaPathError(f"holds a {type(child).__name__}, not an object", path=where)
        node = child
    node[path[-1]] = value
    return root


def _remove_at(
    current: JsonValue | Omitted, path: tuple[str, ...], prune: bool
) -> JsonValue | None | Omitted:
    if not isinstance(current, dict):
        return OMITTED
    chain: list[JsonObject] = [current]
    node: JsonObject = current
    for step in path[:-1]:
        child = node.get(step)
        if not isinstance(child, dict):
            return OMITTED
        chain.append(child)
        node = child
    if path[-1] not in node:
        return OMITTED
    del node[path[-1]]
    if prune:
        for depth in range(len(chain) - 1, 0, -1):
            if chain[depth]:
                break
            del chain[depth - 1][path[depth - 1]]
        if not current:
            return None
    return current
