"""Session ids in the reference agents' error texts: quoted, and cut short (a client may send
an id of any length; the error echoes a prefix, not all of it)."""

from __future__ import annotations

__all__ = ["shown_id"]

SHOWN_ID_LENGTH = 64
"""As ``agent_meta.core._errors.SHOWN_ID_LENGTH`` (the reference agents use the public API only)."""


def shown_id(session_id: str) -> str:
    """``session_id``'s ``repr``, cut to its first :data:`SHOWN_ID_LENGTH` characters (then
    followed by ``…`` and its length)."""
    if len(session_id) > SHOWN_ID_LENGTH:
        return f"{session_id[:SHOWN_ID_LENGTH]!r}… ({len(session_id)} characters)"
    return repr(session_id)
