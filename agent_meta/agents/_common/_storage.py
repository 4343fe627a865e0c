"""The reference agent's sessions and conversation history, in the lifetime store's database:
the SQLite file, or the PostgreSQL database (the same tables, in each one's SQL:
:mod:`agent_meta.agents._common._history_sql`).

Session-info state is the owner's business (its lifetimes table); this keeps only what the agent
itself needs to resume a session in a fresh process, or in another process on the same store:
the session (id, cwd, last ``updatedAt``, last known info for ``session/list``, whether it was
closed, the last message number handed out) and its messages, for replay. A process that takes a
session over reads it afresh (:meth:`HistoryStore.refresh`), so message ids never collide.

These tables are the reference agent's, outside the lifetime store's schema (whose version,
``PRAGMA user_version`` or ``agent_meta_schema``, covers only the ``agent_meta_`` tables). Their
versions: 1, the first; 2 adds ``reference_sessions.closed`` (a session closed before a restart
reopens with ``title: null``, as in one process). A version-1 SQLite file is migrated when loaded
(the column is added, ``0`` for every session: closed sessions of that version are not known as
closed); on PostgreSQL they start at version 2.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
from typing import TYPE_CHECKING, Any, TypeVar

from agent_meta import LifetimeTakenOverError, SQLiteStore

from ...core._errors import shown_id
from ._history_sql import HISTORY_LOCK, POSTGRES, SQLITE
from ._replay import Message

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_meta import JsonObject, PostgresStore

    from ._history_sql import Connection, Dialect

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
_T = TypeVar("_T")

StoredMessage = tuple[str, str, str]  # role, message id, text
StoredSession = tuple[str, str, str, "JsonObject", int, bool, list[StoredMessage]]
"""id, cwd, updatedAt, last info, id counter, closed, messages."""


class HistoryStore:
    """Reads and writes the reference agent's tables through the store's ``run``
    (:meth:`SQLiteStore.run` or :meth:`PostgresStore.run`)."""

    def __init__(self, store: SQLiteStore | PostgresStore) -> None:
        self._store = store
        self._sql: Dialect = SQLITE if isinstance(store, SQLiteStore) else POSTGRES

    async def _run(
        self, action: Callable[[Connection], _T], what: str, *, write: bool = True
    ) -> _T:
        store = self._store
        if isinstance(store, SQLiteStore):
            return await store.run(action, what=what, write=write)
        return await store.run(action, what=what, write=write)

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

    async def save(self, session: SessionRecord, *, holder: str | None = None) -> None:
        """Store the session's row (not its messages: :meth:`add_message` appends those).
        With ``holder``: only while ``holder`` may write the session (:func:`holds`), else
        :class:`~agent_meta.LifetimeTakenOverError` and nothing is stored."""
        await self.save_session(
            session.session_id,
            session.cwd,
            session.updated_at,
            session.last_info,
            session.counter,
            session.closed,
            holder=holder,
        )

    async def load(self) -> list[StoredSession]:
        """Every session with its messages (creating the tables on first use)."""
        sql = self._sql

        def load(conn: Connection) -> list[StoredSession]:
            sql.prepare(conn)
            return [_session(conn, sql, row) for row in conn.execute(sql.sessions).fetchall()]

        return await self._run(load, "loading the reference agent's sessions")

    async def load_one(self, session_id: str) -> StoredSession | None:
        """One session with its messages, or ``None`` (the tables exist: :meth:`load` ran)."""
        sql = self._sql

        def load(conn: Connection) -> StoredSession | None:
            row = conn.execute(sql.session, (session_id,)).fetchone()
            return None if row is None else _session(conn, sql, row)

        return await self._run(load, "loading a session", write=False)

    async def save_session(
        self,
        session_id: str,
        cwd: str,
        updated_at: str,
        last_info: JsonObject,
        counter: int,
        closed: bool,
        *,
        holder: str | None = None,
    ) -> None:
        row = (session_id, cwd, updated_at, json.dumps(last_info), counter, int(closed))
        sql = self._sql

        def save(conn: Connection) -> bool:
            if holder is not None and not holds(conn, sql, session_id, holder):
                return False
            conn.execute(sql.save, row)
            return True

        if not await self._run(save, "saving a session"):
            raise _not_held(session_id)

    async def add_message(
        self, session_id: str, role: str, message_id: str, text: str, *, holder: str | None = None
    ) -> None:
        """Append a message to the session's stored history (after its last one). With
        ``holder``: only while ``holder`` may write the session (:func:`holds`), else
        :class:`~agent_meta.LifetimeTakenOverError` and nothing is stored."""
        fields = {"id": session_id, "role": role, "message_id": message_id, "text": text}
        sql = self._sql

        def add(conn: Connection) -> bool:
            if holder is not None and not holds(conn, sql, session_id, holder):
                return False
            if sql.before_add is not None:
                conn.execute(sql.before_add, (HISTORY_LOCK, session_id))
            conn.execute(sql.add, fields)
            return True

        if not await self._run(add, "saving a message"):
            raise _not_held(session_id)


def holds(conn: Connection, sql: Dialect, session_id: str, holder: str) -> bool:
    """Whether ``holder`` may write the history of ``session_id``: it holds the session's
    lifetime record; or there is none (not stored yet, or lifetimes kept elsewhere) and the
    session was not closed (a close deletes the record: a former holder must not write into
    a session another holder closed)."""
    row = conn.execute(sql.holder, (session_id,)).fetchone()
    if row is not None:
        return bool(row[0] == holder)
    closed = conn.execute(sql.closed, (session_id,)).fetchone()
    return closed is None or not closed[0]


def taken_over_text(session_id: str) -> str:
    """What a prompt on a session another connection took over is answered."""
    return (
        f"session {shown_id(session_id)} was taken over by another connection (a load or resume "
        "elsewhere): resume it to continue here"
    )


def _not_held(session_id: str) -> LifetimeTakenOverError:
    return LifetimeTakenOverError(taken_over_text(session_id))


def _session(conn: Connection, sql: Dialect, row: Any) -> StoredSession:
    """A session row with its messages."""
    session_id, cwd, updated_at, last_info, counter, closed = row
    messages = [tuple(m) for m in conn.execute(sql.messages, (session_id,)).fetchall()]
    info = json.loads(last_info)
    return (session_id, cwd, updated_at, info, counter, bool(closed), messages)
