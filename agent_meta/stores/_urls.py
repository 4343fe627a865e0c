"""Store URLs: which store a URL names, a relative SQLite path made absolute for another
process, and a URL without its password (for every message that names a store).

Plain functions of strings, imported by :func:`~agent_meta.open_store` and by the stores
themselves (a PostgreSQL error names its database without the password).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

from ..core._errors import StoreError

__all__ = ["absolute_store_url", "redact_url", "store_kind"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES = ("postgresql", "postgres")
_SQLITE_PREFIX = "sqlite:///"


def store_kind(url: str | os.PathLike[str]) -> tuple[str, str]:
    """``("sqlite", path)`` or ``("postgres", url)`` for a store URL; :class:`StoreError` for
    any other scheme. ``sqlite:///PATH`` is SQLAlchemy's spelling: ``sqlite:///agent.sqlite``
    is relative, ``sqlite:////var/lib/agent.sqlite`` absolute."""
    text = os.fspath(url)
    found = _SCHEME.match(text)
    if found is None:
        return "sqlite", text
    scheme = found.group(1).lower()
    if scheme in _POSTGRES:
        return "postgres", text
    if scheme == "sqlite" and text.startswith(_SQLITE_PREFIX) and text != _SQLITE_PREFIX:
        return "sqlite", text[len(_SQLITE_PREFIX) :]
    raise StoreError(
        redact_url(text)[0],
        f"not a store URL (scheme {scheme!r}): give a file path, sqlite:///PATH, or "
        "postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
    )


def absolute_store_url(url: str) -> str:
    """``url`` for a process that may run elsewhere in the file system: a relative SQLite path
    made absolute; a database URL as it is."""
    kind, target = store_kind(url)
    if kind != "sqlite" or target.startswith("file:"):
        return url
    return str(Path(target).resolve())


def redact_url(url: str) -> tuple[str, tuple[str, ...]]:
    """``url`` without its password (``user:password@`` or ``?password=``), and the password's
    spellings (as written and decoded), to scrub from messages.

    Read as libpq reads a URI, not as :func:`urllib.parse.urlsplit` does: ``#`` and ``?`` in
    a password are part of it. The user information is everything between ``://`` and the
    last ``@`` before the first ``/`` (or, if there is none, before the first ``?``); the
    password follows its first ``:``. The query starts at the first ``?`` after the user
    information; a ``password`` parameter in it is removed. Everything else is kept as
    written (``postgresql:///db?host=/tmp`` stays so)."""
    found = _SCHEME.match(url)
    if found is None:
        return url, ()
    prefix, rest = url[: found.end()], url[found.end() :]
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    if not at:  # a "/" in the password (libpq cannot read it): hide it all the same
        userinfo, at, _ = rest.partition("?")[0].rpartition("@")
    user, colon, password = userinfo.partition(":")
    spellings = {password, urllib.parse.unquote(password)} if colon else set()
    if at:
        prefix, rest = f"{prefix}{user}@", rest[len(userinfo) + 1 :]
    path, question, query = rest.partition("?")
    kept: list[str] = []
    for parameter in query.split("&") if question else ():
        key, _, value = parameter.partition("=")
        if urllib.parse.unquote(key) == "password":
            spellings |= {value, urllib.parse.unquote(value)}
        else:
            kept.append(parameter)
    location = prefix + path + ("?" + "&".join(kept) if kept else "")
    return location, tuple(sorted(s for s in spellings if s))
