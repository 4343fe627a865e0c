"""``session/list`` pages for the reference agent: opaque cursors, bounded pages.

ACP says cursors are opaque to clients and that an agent SHOULD refuse one it did not issue and
SHOULD keep pages to a reasonable size. A cursor here names a position in the agent's session
order and the ``cwd`` filter it was issued for, signed with a key made when the agent starts, so
a cursor from another process, another filter or a client's imagination is refused (``-32602``).
Pages stop at ``page_size`` entries and before the result would pass the frame limit, so no one
session, however large its metadata, can make the listing of the others fail.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from typing import TYPE_CHECKING

from agent_meta import ErrorCode, JsonRpcError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_meta import JsonObject, JsonValue, Owner

__all__ = ["MAX_CWD", "Pager", "check_cwd", "entry_size", "list_entry", "listed_info"]

logger = logging.getLogger("agent_meta.reference_agent")

_PAGE_OVERHEAD = 512  # the envelope, "sessions", "nextCursor" and its cursor


MAX_CWD = 4096
"""The longest ``cwd`` a session may have: it is listed in every ``session/list`` page."""


def check_cwd(cwd: str) -> None:
    """Refuse (``-32602``) a ``cwd`` longer than :data:`MAX_CWD`."""
    if len(cwd) > MAX_CWD:
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: 'cwd' is {len(cwd)} characters long, over {MAX_CWD}",
        )


def entry_size(entry: JsonObject) -> int:
    """The bytes ``entry`` takes in a compact, ASCII-escaped frame (plus its comma)."""
    return len(json.dumps(entry, separators=(",", ":"), ensure_ascii=True)) + 1


async def listed_info(owner: Owner, session_id: str, last_info: JsonObject) -> JsonObject:
    """A session's ``title`` and ``_meta`` as ``session/list`` shows them: from its open
    lifetime, else from the owner's store (a restarted agent, or another process holding it),
    else as it was at its close."""
    if owner.has_lifetime(session_id):
        snapshot = owner.lifetime(session_id).snapshot()
    else:
        stored = await owner.stored_snapshot(session_id)
        if stored is None:
            return last_info
        snapshot = stored
    info: JsonObject = {}
    if isinstance(snapshot.title, str):
        info["title"] = snapshot.title
    if snapshot.meta is not None:
        info["_meta"] = snapshot.meta
    return info


def list_entry(
    session_id: str, cwd: str, updated_at: str, info: JsonObject, max_frame_bytes: int
) -> JsonObject:
    """One ``session/list`` entry. ``info`` is a snapshot, never a patch: null values inside
    are data (see the RFD). An entry too large to share a page is listed without its metadata,
    then without its title too, rather than break the listing (the client gets both itself on
    resume); what stays (the id, a cwd of at most ``MAX_CWD`` characters and a timestamp)
    always fits."""
    entry: JsonObject = {"sessionId": session_id, "cwd": cwd, "updatedAt": updated_at}
    entry.update(info)
    for field in ("_meta", "title"):
        if entry_size(entry) <= max_frame_bytes // 2 or field not in entry:
            continue
        logger.warning("session %s is listed without its %s: too large", session_id, field)
        del entry[field]
    return entry


class Pager:
    """Issues and checks cursors, and cuts pages of session entries."""

    def __init__(self, page_size: int = 50) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, not {page_size}")
        self.page_size = page_size
        self._key = secrets.token_bytes(16)

    def start(self, cursor: JsonValue, cwd: str | None) -> int:
        """The position a request's ``cursor`` (``None``: the first page) stands for."""
        if cursor is None:
            return 0
        if not isinstance(cursor, str):
            raise _bad_cursor(f"a cursor is a string, not {type(cursor).__name__}")
        try:
            raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
            body, signature = raw[:-16], raw[-16:]
            position_text, _, filtered = body.decode("utf-8").partition("\n")
            position = int(position_text)
        except (ValueError, UnicodeError):
            raise _bad_cursor("this agent did not issue it") from None
        if not hmac.compare_digest(signature, self._sign(body)) or position < 1:
            raise _bad_cursor("this agent did not issue it")
        if filtered != (cwd or ""):
            raise _bad_cursor("it was issued for another cwd filter")
        return position

    def page(
        self, entries: Sequence[JsonObject], start: int, cwd: str | None, max_bytes: int
    ) -> JsonObject:
        """The result of one ``session/list`` request: the entries from ``start`` that fit,
        and ``nextCursor`` if more follow. A page holds at least one entry (the owner keeps
        each session's info within the frame limit)."""
        budget = max_bytes - _PAGE_OVERHEAD
        taken: list[JsonValue] = []
        end = start
        while end < len(entries) and len(taken) < self.page_size:
            size = entry_size(entries[end])
            if taken and size > budget:
                break
            taken.append(entries[end])
            budget -= size
            end += 1
        result: JsonObject = {"sessions": taken}
        if end < len(entries):
            result["nextCursor"] = self._cursor(end, cwd)
        return result

    def _cursor(self, position: int, cwd: str | None) -> str:
        body = f"{position}\n{cwd or ''}".encode()
        return base64.urlsafe_b64encode(body + self._sign(body)).decode("ascii")

    def _sign(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:16]


def _bad_cursor(why: str) -> JsonRpcError:
    return JsonRpcError(ErrorCode.INVALID_PARAMS, f"invalid params: 'cursor' is not valid: {why}")
