"""The reference agent's tables in each store's SQL: SQLite (``?``) and PostgreSQL (``%s``).

The tables and what each statement does are the same on both (see
:mod:`agent_meta.agents._common._storage`); only the spelling differs, and how concurrent writers
are kept apart: SQLite's transactions take the file's write lock at once, while on PostgreSQL
creating the tables and numbering a session's next message each hold an advisory lock for their
transaction. A write on behalf of a session's holder first checks that it still holds the
session's lifetime record (``holder``; see :func:`~agent_meta.agents._common._storage.holds`): a
former holder's writes change nothing.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["HISTORY_LOCK", "POSTGRES", "SQLITE", "Connection", "Dialect"]


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the statements need of a connection: ``sqlite3``'s or psycopg's."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Dialect:
    """One store's spelling of the reference agent's statements."""

    prepare: Callable[[Connection], None]
    """Create the tables if needed (and bring older ones up to date)."""
    sessions: str
    """Every session row, in the order they were last saved."""
    session: str
    """One session row, by id."""
    messages: str
    """A session's messages, in order."""
    save: str
    """Insert or replace a session row (id, cwd, updatedAt, last info, counter, closed)."""
    add: str
    """Append a message (named: id, role, message_id, text) after the session's last."""
    holder: str
    """The holder of the session's lifetime record (by session id), if there is one; on
    PostgreSQL it locks that record until the transaction ends, so a claim waits for the
    write that checked it."""
    closed: str
    """The session's ``closed`` flag (by session id), if it has a row."""
    before_add: str | None = None
    """Run first, with ``(HISTORY_LOCK, session id)``, in the same transaction (PostgreSQL:
    the lock that numbers one session's messages one writer at a time)."""


_SESSION_COLUMNS = "session_id, cwd, updated_at, last_info, counter, closed"

_SQLITE_TABLES = (
    """
    CREATE TABLE IF NOT EXISTS reference_sessions (
        session_id TEXT PRIMARY KEY NOT NULL,
        cwd TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        last_info TEXT NOT NULL,
        counter INTEGER NOT NULL,
        closed INTEGER NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS reference_messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        message_id TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
)


def _prepare_sqlite(conn: Connection) -> None:
    for statement in _SQLITE_TABLES:
        conn.execute(statement)
    # Version 1 had no "closed" column: add it (0 for every session).
    columns = {row[1] for row in conn.execute("PRAGMA table_info(reference_sessions)").fetchall()}
    if "closed" not in columns:
        conn.execute("ALTER TABLE reference_sessions ADD COLUMN closed INTEGER NOT NULL DEFAULT 0")


SQLITE = Dialect(
    prepare=_prepare_sqlite,
    sessions=f"SELECT {_SESSION_COLUMNS} FROM reference_sessions ORDER BY rowid",
    session=f"SELECT {_SESSION_COLUMNS} FROM reference_sessions WHERE session_id = ?",
    messages=(
        "SELECT role, message_id, text FROM reference_messages WHERE session_id = ? ORDER BY seq"
    ),
    # REPLACE deletes the old row: the saved session gets a new rowid, so it is listed last.
    save=(
        f"INSERT OR REPLACE INTO reference_sessions ({_SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
    ),
    add=(
        "INSERT INTO reference_messages VALUES (:id, (SELECT COALESCE(MAX(seq), 0) + 1"
        " FROM reference_messages WHERE session_id = :id), :role, :message_id, :text)"
    ),
    holder="SELECT holder FROM agent_meta_lifetimes WHERE session_id = ?",
    closed="SELECT closed FROM reference_sessions WHERE session_id = ?",
)

HISTORY_LOCK = 0x41474D55  # "AGMU": the advisory locks' first key, the reference agent's

_POSTGRES_TABLES = (
    """
    CREATE TABLE IF NOT EXISTS reference_sessions (
        session_id text PRIMARY KEY,
        cwd text NOT NULL,
        updated_at text NOT NULL,
        last_info text NOT NULL,
        counter bigint NOT NULL,
        closed integer NOT NULL DEFAULT 0,
        saved bigserial NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS reference_messages (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        role text NOT NULL,
        message_id text NOT NULL,
        text text NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
)


def _prepare_postgres(conn: Connection) -> None:
    # Two agents starting at once on an empty database take turns (the second then finds the
    # tables: CREATE locks the schema, which brings its catalog cache up to date).
    conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (HISTORY_LOCK,))
    for statement in _POSTGRES_TABLES:
        conn.execute(statement)


POSTGRES = Dialect(
    prepare=_prepare_postgres,
    sessions=f"SELECT {_SESSION_COLUMNS} FROM reference_sessions ORDER BY saved",
    session=f"SELECT {_SESSION_COLUMNS} FROM reference_sessions WHERE session_id = %s",
    messages=(
        "SELECT role, message_id, text FROM reference_messages WHERE session_id = %s ORDER BY seq"
    ),
    # As SQLite's REPLACE: a saved session is listed last.
    save=(
        f"INSERT INTO reference_sessions ({_SESSION_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,"
        " updated_at = excluded.updated_at, last_info = excluded.last_info,"
        " counter = excluded.counter, closed = excluded.closed,"
        " saved = nextval(pg_get_serial_sequence('reference_sessions', 'saved'))"
    ),
    add=(
        "INSERT INTO reference_messages VALUES (%(id)s, (SELECT COALESCE(MAX(seq), 0) + 1"
        " FROM reference_messages WHERE session_id = %(id)s), %(role)s, %(message_id)s, %(text)s)"
    ),
    before_add="SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
    holder="SELECT holder FROM agent_meta_lifetimes WHERE session_id = %s FOR SHARE",
    closed="SELECT closed FROM reference_sessions WHERE session_id = %s",
)
