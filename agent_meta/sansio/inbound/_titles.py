"""Client-set titles (R13), sans I/O: what a ``session/set_title`` asks, what the connections
advertise and answer, and how an agent's later titles are kept off the wire.

``session/set_title {sessionId, title}`` is not yet part of ACP. Two shapes of it exist:

- the RFD (agent-client-protocol PR #1987): capability ``sessionCapabilities.setTitle: {}``,
  an empty result, the title persisted exactly as supplied;
- the TypeScript SDK 2.4.0 (unstable): capability ``sessionCapabilities.title: {}``, a result
  ``{title}`` (the title as stored, which clients SHOULD show).

agent_meta's connections answer both: they advertise both capabilities (each client looks for
its own; an unknown capability is ignored) and answer ``{"title": ...}``, which a TypeScript
SDK client requires and an RFD client reads as its empty result (a client ignores fields it
does not know). The title is stored as given, never normalized, so the one ``title`` returned
is the one sent. Under ACP v1 the capabilities sit in ``agentCapabilities.sessionCapabilities``,
under v2 in ``capabilities.session``.

The send queue applies the rule itself (:meth:`~agent_meta.sansio.queue._queue.SendQueue.submit`):
once a lifetime's title is the client's, the ``title`` of any other publication is dropped
before it is folded or sent (:func:`without_title`), and the rest of it goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

from ...core._jsonrpc import ErrorCode, JsonRpcError, require_str
from .._encode import EncodedUpdate

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CAPABILITIES",
    "MAX_TITLE_LENGTH",
    "SET_TITLE",
    "TitleRequest",
    "advertise_titles",
    "advertises_titles",
    "listed_session_ids",
    "read_title_request",
    "retitle_listing",
    "title_result",
    "without_title",
]

SET_TITLE: Final = "session/set_title"
"""The method name (the same under ACP v1 and v2, and in both shapes)."""

CAPABILITIES: Final = ("setTitle", "title")
"""The session capabilities that say an agent takes ``session/set_title``: the RFD's name and
the TypeScript SDK 2.4.0's."""

MAX_TITLE_LENGTH: Final = 8192
"""The longest title ``session/set_title`` takes, in Unicode code points.

A title is one line of a client's interface, yet it travels far: in every ``session_info_update``
under ACP v1 (each carries the whole known state), in every resync and ``session/list`` entry,
in the store's record. The RFD says a title is persisted exactly as supplied, so a longer one
is refused (``-32602``), never cut. 8,192 code points is at most about 96 KiB of escaped JSON,
a tenth of the default frame limit, and above what codex-acp 2.6.0 accepts (5,000 characters),
so a client that works with codex works here."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class TitleRequest:
    """A valid ``session/set_title``: the session and the title the client gives it."""

    session_id: str
    title: str


def read_title_request(params: object) -> TitleRequest:
    """The ``session/set_title`` that ``params`` asks for; :class:`JsonRpcError` ``-32602``
    when ``sessionId`` is not a string, or ``title`` is not a string, shows nothing (empty or
    only whitespace) or is longer than :data:`MAX_TITLE_LENGTH`."""
    if not isinstance(params, Mapping):
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS, "invalid params: session/set_title takes an object"
        )
    session_id = require_str(params, "sessionId")
    title = require_str(params, "title")
    if not title.strip():
        raise JsonRpcError(ErrorCode.INVALID_PARAMS, "invalid params: 'title' is empty")
    if len(title) > MAX_TITLE_LENGTH:
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: 'title' must not exceed {MAX_TITLE_LENGTH} characters "
            f"(it has {len(title)})",
            {"maxLength": MAX_TITLE_LENGTH, "length": len(title)},
        )
    return TitleRequest(session_id, title)


def title_result(title: str) -> dict[str, Any]:
    """The result of a successful ``session/set_title``: the title as stored (see above)."""
    return {"title": title}


def without_title(update: EncodedUpdate) -> EncodedUpdate | None:
    """``update`` with its ``title`` dropped (the client set the lifetime's title); ``None``
    when nothing else is left of it."""
    nothing_else = (
        update.updated_at is None
        and not update.meta_clear
        and update.meta_patch is None
        and update.notification_meta is None
    )
    if nothing_else:
        return None
    return EncodedUpdate(
        None,
        update.updated_at,
        update.meta_clear,
        update.meta_patch,
        update.notification_meta,
        update.patch_size,
    )


# -- initialize: what is advertised ----------------------------------------------------------


def _session_capabilities(result: Mapping[str, Any]) -> tuple[str, str]:
    """Where an ``initialize`` result keeps its session capabilities, by its version."""
    version = result.get("protocolVersion")
    if type(version) is int and version >= 2:
        return "capabilities", "session"
    return "agentCapabilities", "sessionCapabilities"


def advertises_titles(result: Mapping[str, Any]) -> bool:
    """Whether an agent's ``initialize`` result advertises ``session/set_title`` in either
    shape (:data:`CAPABILITIES`)."""
    outer, inner = _session_capabilities(result)
    capabilities = result.get(outer)
    sessions = capabilities.get(inner) if isinstance(capabilities, Mapping) else None
    if not isinstance(sessions, Mapping):
        return False
    return any(isinstance(sessions.get(name), Mapping) for name in CAPABILITIES)


def advertise_titles(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """An ``initialize`` result that also advertises ``session/set_title`` in both shapes, or
    ``None`` when it does already.

    Under v1 the session capabilities are created if the agent sent none (v1 agents serve
    sessions whatever they advertise). Under v2, ``capabilities.session`` is what says the
    agent serves sessions at all, so an agent without it is left as it is.
    """
    outer, inner = _session_capabilities(result)
    capabilities = result.get(outer)
    if not isinstance(capabilities, Mapping):
        if outer == "capabilities":
            return None
        capabilities = {}
    sessions = capabilities.get(inner)
    if not isinstance(sessions, Mapping):
        if outer == "capabilities":
            return None
        sessions = {}
    missing = [name for name in CAPABILITIES if not isinstance(sessions.get(name), Mapping)]
    if not missing:
        return None
    added = {**sessions, **{name: {} for name in missing}}
    return {**result, outer: {**capabilities, inner: added}}


# -- session/list: the client's titles -------------------------------------------------------


def listed_session_ids(result: Mapping[str, Any]) -> list[str]:
    """The session ids a ``session/list`` result lists, in order."""
    sessions = result.get("sessions")
    if not isinstance(sessions, list):
        return []
    return [
        entry["sessionId"]
        for entry in sessions
        if isinstance(entry, Mapping) and isinstance(entry.get("sessionId"), str)
    ]


def retitle_listing(result: Mapping[str, Any], titles: Mapping[str, str]) -> dict[str, Any] | None:
    """A ``session/list`` result whose entries carry the client-set ``titles`` (by session id),
    or ``None`` when every entry already does."""
    sessions: Sequence[object] = result.get("sessions") or []
    changed = False
    entries: list[object] = []
    for entry in sessions:
        session_id = entry.get("sessionId") if isinstance(entry, Mapping) else None
        if isinstance(entry, Mapping) and isinstance(session_id, str):
            title = titles.get(session_id)
            if title is not None and entry.get("title") != title:
                entry = {**entry, "title": title}
                changed = True
        entries.append(entry)
    if not changed:
        return None
    return {**result, "sessions": entries}
