"""The reference agent's sessions and conversation history, in the lifetime store's SQLite file.

Session-info state is the owner's business (its lifetimes table); this keeps only what the agent
itself needs to resume a session in a fresh process, or in another process on the same file: the
session (id, cwd, last ``updatedAt``, last known info for ``session/list``, whether it was
closed, the last message number handed out) and its messages, for replay. A process that takes a
session over reads it afresh (:meth:`HistoryStore.refresh`), so message ids never collide.

These tables are the reference agent's, outside the lifetime store's schema (whose version,
``PRAGMA user_version``, covers only the ``agent_meta_`` tables). Their versions: 1, the first;
2 adds ``reference_sessions.closed`` (a session closed before a restart reopens with
``title: null``, as in one process). A version-1 file is migrated when loaded (the column is
added, ``0`` for every session: closed sessions of that version are not known as closed).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
from typing import TYPE_CHECKING, TypeVar

from ._replay import Message

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from agent_meta import JsonObject, SQLiteStore

__all__ = [
    "HistoryStore",
    "SessionRecord",
    "StoredMessage",
    "StoredSession",
    "new_session_id",
    "utc_now",
]


def new_session_id() -> str:
    """A session id nobody can guess (128 random bits): once any connection can take a session
    over by resuming it, its id is the key to it."""
    return f"sess-{secrets.token_hex(16)}"


def utc_now() -> str:
    """An ``updatedAt`` for now: RFC 3339 in UTC, whole seconds."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclasses.dataclass(slots=True)
class SessionRecord:
    """What a reference agent (on either runtime) keeps of a session, in memory and in these
    tables; each agent's own session class adds its running work."""

    session_id: str
    cwd: str
    updated_at: str
    history: list[Message] = dataclasses.field(default_factory=list)
    last_info: JsonObject = dataclasses.field(default_factory=dict)
    """What ``session/list`` shows of the session once its lifetime has ended."""
    counter: int = 0
    """The last message id number handed out."""
    closed: bool = False
    """Its lifetime was closed: reopening it starts fresh, with ``title: null``."""

    def next_id(self, role: str) -> str:
        self.counter += 1
        return f"{role}-{self.counter}"


_Record = TypeVar("_Record", bound=SessionRecord)

_TABLES = """
CREATE TABLE IF NOT EXISTS reference_sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    cwd TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_info TEXT NOT NULL,
    counter INTEGER NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS reference_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""

StoredMessage = tuple[str, str, str]  # role, message id, text
StoredSession = tuple[str, str, str, "JsonObject", int, bool, list[StoredMessage]]
"""id, cwd, updatedAt, last info, id counter, closed, messages."""


class HistoryStore:
    """Reads and writes the reference agent's tables through :meth:`SQLiteStore.run`."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def load_sessions(self, make: Callable[[str, str, str], _Record]) -> list[_Record]:
        """Every stored session, made with ``make(session_id, cwd, updated_at)`` and filled in
        from its row and its messages."""
        sessions: list[_Record] = []
        for session_id, cwd, updated_at, info, counter, closed, messages in await self.load():
            session = make(session_id, cwd, updated_at)
            session.last_info = info
            session.counter = counter
            session.closed = closed
            session.history = [Message(role, mid, text) for role, mid, text in messages]  # type: ignore[arg-type]
            sessions.append(session)
        return sessions

    async def refresh(self, session: SessionRecord) -> bool:
        """Bring ``session`` up to what the store holds (another process may have taken it
        over and added messages since): its row and its messages; ``False`` when the store
        holds no such session."""
        stored = await self.load_one(session.session_id)
        if stored is None:
            return False
        _, cwd, updated_at, info, counter, closed, messages = stored
        session.cwd = cwd
        session.updated_at = updated_at
        session.last_info = info
        session.counter = counter
        session.closed = closed
        session.history = [Message(role, mid, text) for role, mid, text in messages]  # type: ignore[arg-type]
        return True

    async def save(self, session: SessionRecord) -> None:
        """Store the session's row (not its messages: :meth:`add_message` appends those)."""
        await self.save_session(
            session.session_id,
            session.cwd,
            session.updated_at,
            session.last_info,
            session.counter,
            session.closed,
        )

    async def load(self) -> list[StoredSession]:
        """Every session with its messages (creating the tables on first use)."""

        def load(conn: sqlite3.Connection) -> list[StoredSession]:
            for statement in _TABLES.split(";"):
                if statement.strip():
                    conn.execute(statement)
            _migrate(conn)
            sessions: list[StoredSession] = []
            rows = conn.execute(
                "SELECT session_id, cwd, updated_at, last_info, counter, closed"
                " FROM reference_sessions ORDER BY rowid"
            ).fetchall()
            for session_id, cwd, updated_at, last_info, counter, closed in rows:
                messages = conn.execute(
                    "SELECT role, message_id, text FROM reference_messages"
                    " WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                ).fetchall()
                info = json.loads(last_info)
                sessions.append(
                    (session_id, cwd, updated_at, info, counter, bool(closed), messages)
                )
            return sessions

        return await self._store.run(load, what="loading the reference agent's sessions")

    async def load_one(self, session_id: str) -> StoredSession | None:
        """One session with its messages, or ``None`` (the tables exist: :meth:`load` ran)."""

        def load(conn: sqlite3.Connection) -> StoredSession | None:
            row = conn.execute(
                "SELECT session_id, cwd, updated_at, last_info, counter, closed"
                " FROM reference_sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            messages = conn.execute(
                "SELECT role, message_id, text FROM reference_messages"
                " WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            found, cwd, updated_at, last_info, counter, closed = row
            return (found, cwd, updated_at, json.loads(last_info), counter, bool(closed), messages)

        return await self._store.run(load, what="loading a session", write=False)

    async def save_session(
        self,
        session_id: str,
        cwd: str,
        updated_at: str,
        last_info: JsonObject,
        counter: int,
        closed: bool,
    ) -> None:
        row = (session_id, cwd, updated_at, json.dumps(last_info), counter, int(closed))

        def save(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO reference_sessions"
                " (session_id, cwd, updated_at, last_info, counter, closed)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._store.run(save, what="saving a session")

    async def add_message(self, session_id: str, role: str, message_id: str, text: str) -> None:
        """Append a message to the session's stored history (after its last one)."""
        row = (session_id, session_id, role, message_id, text)

        def add(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO reference_messages VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1"
                " FROM reference_messages WHERE session_id = ?), ?, ?, ?)",
                row,
            )

        await self._store.run(add, what="saving a message")


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring version-1 tables to version 2 (see the module docstring)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(reference_sessions)")}
    if "closed" not in columns:
        conn.execute("ALTER TABLE reference_sessions ADD COLUMN closed INTEGER NOT NULL DEFAULT 0")
