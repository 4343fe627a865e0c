"""The bearer token of a connection that crosses the network (``agent --listen``, ``attach``).

Once any connection can take a session over by resuming it, reaching a server is reaching every
session whose id is known, so the token is checked on both ends the same way, and it never
reaches a log record or an error message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["MIN_TOKEN_BYTES", "TOKEN_VARIABLE", "check_token", "read_token"]

TOKEN_VARIABLE: Final = "AGENT_META_TOKEN"
"""The environment variable that holds the token when no ``--token-file`` is given."""

MIN_TOKEN_BYTES: Final = 16
"""The shortest token accepted: anything shorter could be guessed."""


def check_token(token: str) -> bytes:
    """``token`` as the bytes compared, or ``ValueError`` (without the token) when it is too
    short or holds characters an HTTP header cannot carry."""
    if not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the bearer token must be printable ASCII without spaces")
    encoded = token.encode("ascii")
    if len(encoded) < MIN_TOKEN_BYTES:
        raise ValueError(f"the bearer token must be at least {MIN_TOKEN_BYTES} characters long")
    return encoded


def read_token(path: str | None) -> str:
    """The token of ``path`` (its first line), else of :data:`TOKEN_VARIABLE`, checked
    (:func:`check_token`); ``ValueError`` naming what is wrong, never the token."""
    if path is not None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = type(exc).__name__
            raise ValueError(f"--token-file {path}: cannot read it ({why})") from None
        token = lines[0].strip() if lines else ""
    else:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise ValueError(f"a bearer token is needed: --token-file PATH, or ${TOKEN_VARIABLE}")
    check_token(token)
    return token
