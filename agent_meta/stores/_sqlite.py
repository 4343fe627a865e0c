"""A :class:`~agent_meta.LifetimeStore` in one SQLite file (stdlib ``sqlite3``, no server).

Any number of owners share it: every connection of a process through one ``SQLiteStore``, and
every process on the machine that opens the same file (WAL mode; each call is one transaction
that takes the write lock at once, waiting up to ``lock_timeout`` for another process to let go
of it). Each row carries its holder's fencing epoch, and every write is conditional on it (see
:mod:`agent_meta.stores._store`), so a session resumed by another process is taken over at once
and its former holder's writes change nothing. ``PRAGMA application_id`` marks the file as a
lifetime store and ``PRAGMA user_version`` holds its schema version, both checked at open (a
file of an older version is migrated in the transaction that checks it: version 1 had no
epochs, version 2 no client-set titles). ``synchronous=FULL`` makes each committed
batch survive a power loss, not only a process crash.

Every call runs in a worker thread, one at a time per ``SQLiteStore``. The store runs on the
runtime it was opened on, trio or asyncio (told apart with ``sniffio``): ``trio.to_thread`` and
a ``trio.Lock``, or ``asyncio.to_thread`` and an ``asyncio.Lock``. A worker thread cannot be
stopped, so under either runtime a cancelled call still waits for its thread before it lets the
cancellation through (``trio.to_thread``'s default; done by hand for asyncio); the next call
never finds the connection in use.

Applications may keep their own tables in the same file through :meth:`SQLiteStore.run` (the
reference agent keeps its conversation history there); table names starting with
``agent_meta_`` are reserved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from typing import TYPE_CHECKING, Literal, Self, TypeVar, final

from ..core._errors import StoreCorruptError, StoreError, StoreLockedError, StoreSchemaError
from ._store import record_from_row
from ._workers import WorkerThreads, trio_module

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    import trio

    from ..sansio.queue._records import StoredLifetime

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

T = TypeVar("T")

SCHEMA_VERSION = 3
"""The schema version this code writes (2 added each row's fencing epoch and holder, 3 whether
its title is the client's); a file with a newer one is refused, an older one migrated at
open."""

APPLICATION_ID = 0x41474D54  # "AGMT"

_SCHEMA = """
CREATE TABLE agent_meta_lifetimes (
    session_id TEXT PRIMARY KEY NOT NULL,
    title TEXT,
    updated_at TEXT,
    meta TEXT,
    failure_id TEXT,
    failure_revision INTEGER,
    needs_repair INTEGER NOT NULL DEFAULT 0,
    epoch INTEGER NOT NULL DEFAULT 1,
    holder TEXT NOT NULL DEFAULT '',
    client_title INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (  # to version 2: fencing
        "ALTER TABLE agent_meta_lifetimes ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE agent_meta_lifetimes ADD COLUMN holder TEXT NOT NULL DEFAULT ''",
    ),
    2: (  # to version 3: client-set titles (R13)
        "ALTER TABLE agent_meta_lifetimes ADD COLUMN client_title INTEGER NOT NULL DEFAULT 0",
    ),
}
"""The statements that take a file from each older version to the next one."""

_COLUMNS = (
    "session_id, title, updated_at, meta, failure_id, failure_revision, needs_repair, "
    "client_title, epoch"
)

_READ_CHUNK = 500
"""Session ids per ``SELECT ... IN (...)`` of :meth:`SQLiteStore.read_many` (SQLite bounds the
parameters of one statement)."""

_LOCKED = {"SQLITE_BUSY", "SQLITE_LOCKED"}
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


def _error(location: str, action: str, exc: sqlite3.Error) -> StoreError:
    name = getattr(exc, "sqlite_errorname", "") or ""
    base = name.split("_")[0:2]
    family = "_".join(base)
    reason = f"{action} failed: {exc}" + (f" ({name})" if name else "")
    if family in _LOCKED:
        return StoreLockedError(
            location, reason + "; another process held the file's write lock too long"
        )
    if family in _CORRUPT:
        return StoreCorruptError(location, reason)
    return StoreError(location, reason)


@final
class SQLiteStore:
    """Session lifetimes in one SQLite file. Open it with :meth:`open`; close with :meth:`aclose`.

    Use it as ``async with await SQLiteStore.open(path) as store:`` or call :meth:`aclose`.
    One store serves every owner of a process; other processes open the same file. Opening
    raises :class:`StoreLockedError` (another process kept the write lock past
    ``lock_timeout``), :class:`StoreSchemaError` (not a store, or a newer schema),
    :class:`StoreCorruptError` or :class:`StoreError` (unreadable, read-only, disk full), each
    naming the file and the cause.
    """

    def __init__(self) -> None:
        raise TypeError("use await SQLiteStore.open(path)")

    _conn: sqlite3.Connection | None
    _path: str
    _threads: WorkerThreads  # on the runtime it was opened on
    _lock: trio.Lock | asyncio.Lock

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = 2.0,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> Self:
        """Open (creating if needed) the store at ``path``.

        ``lock_timeout``: how long any call waits for another process to let go of the write
        lock before raising :class:`StoreLockedError`. ``synchronous="NORMAL"`` trades
        durability against power loss (not against a process crash) for fewer fsyncs.
        """
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be 'FULL' or 'NORMAL'")
        location = os.fspath(path)
        self = object.__new__(cls)
        self._path = location
        self._threads = WorkerThreads("SQLiteStore")
        self._lock = trio_module().Lock() if self._threads.library == "trio" else asyncio.Lock()
        self._conn = await self._threads.run(_connect, location, lock_timeout, synchronous)
        return self

    @property
    def location(self) -> str:
        return self._path

    @property
    def closed(self) -> bool:
        return self._conn is None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the file (idempotent).

        Shielded from cancellation: a call still running in its worker thread is waited for,
        so that no transaction is left open on the file.
        """
        await self._threads.shielded(self._close)

    async def _close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await self._threads.run(conn.close)

    async def run(
        self,
        action: Callable[[sqlite3.Connection], T],
        *,
        what: str = "query",
        write: bool = True,
    ) -> T:
        """Run ``action(connection)`` in a worker thread inside one transaction.

        The transaction takes the write lock at once (``BEGIN IMMEDIATE``; ``write=False``: a
        read transaction, which other processes' writes do not block), commits when
        ``action`` returns and rolls back if it raises. SQLite errors become
        :class:`StoreError` naming the file; ``what`` names the operation.
        """
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(self._path, f"{what} failed: the store is closed")
            return await self._threads.run(self._transaction, conn, action, what, write)

    def _transaction(
        self,
        conn: sqlite3.Connection,
        action: Callable[[sqlite3.Connection], T],
        what: str,
        write: bool,
    ) -> T:
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = action(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise _error(self._path, what, exc) from exc
        return result

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        def claim(conn: sqlite3.Connection) -> tuple[object, ...] | None:
            row: tuple[object, ...] | None = conn.execute(
                f"SELECT {_COLUMNS}, holder FROM agent_meta_lifetimes WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None or row[-1] == holder:
                return None if row is None else row[:-1]
            epoch = row[-2]
            if not isinstance(epoch, int):
                return row[:-1]  # reported as damaged below
            conn.execute(
                "UPDATE agent_meta_lifetimes SET epoch = ?, holder = ? WHERE session_id = ?",
                (epoch + 1, holder, session_id),
            )
            return (*row[:-2], epoch + 1)

        row = await self.run(claim, what="claiming a lifetime")
        return None if row is None else record_from_row(self._path, row)

    async def read(self, session_id: str) -> StoredLifetime | None:
        def read(conn: sqlite3.Connection) -> tuple[object, ...] | None:
            row: tuple[object, ...] | None = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_meta_lifetimes WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            return row

        row = await self.run(read, what="reading a lifetime", write=False)
        return None if row is None else record_from_row(self._path, row)

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        wanted = list(dict.fromkeys(session_ids))

        def read(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
            rows: list[tuple[object, ...]] = []
            for start in range(0, len(wanted), _READ_CHUNK):
                chunk = wanted[start : start + _READ_CHUNK]
                marks = ", ".join("?" * len(chunk))
                query = f"SELECT {_COLUMNS} FROM agent_meta_lifetimes WHERE session_id IN ({marks})"
                rows.extend(conn.execute(query, chunk).fetchall())
            return rows

        if not wanted:
            return {}
        rows = await self.run(read, what="reading lifetimes", write=False)
        records = [record_from_row(self._path, row) for row in rows]
        return {record.session_id: record for record in records}

    async def write(
        self,
        saves: Sequence[StoredLifetime],
        deletes: Sequence[tuple[str, int]],
        *,
        holder: str,
    ) -> frozenset[str]:
        def write(conn: sqlite3.Connection) -> frozenset[str]:
            stale: set[str] = set()
            for session_id, epoch in deletes:
                conn.execute(
                    "DELETE FROM agent_meta_lifetimes"
                    " WHERE session_id = ? AND epoch = ? AND holder = ?",
                    (session_id, epoch, holder),
                )
            for record in saves:
                if not _save(conn, record, holder):
                    stale.add(record.session_id)
            return frozenset(stale)

        return await self.run(write, what="saving lifetimes")


def _save(conn: sqlite3.Connection, record: StoredLifetime, holder: str) -> bool:
    """Store one record under its epoch and holder; ``False`` (nothing changed) when it is
    stale."""
    failure = record.failure
    fields = (
        record.title,
        record.updated_at,
        record.meta,
        None if failure is None else failure.incident_id,
        None if failure is None else failure.revision,
        int(record.needs_repair),
        int(record.client_title),
    )
    if record.epoch == 0:
        cursor = conn.execute(
            f"INSERT INTO agent_meta_lifetimes ({_COLUMNS}, holder) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT (session_id) DO NOTHING",
            (record.session_id, *fields, holder),
        )
    else:
        cursor = conn.execute(
            "UPDATE agent_meta_lifetimes SET title = ?, updated_at = ?, meta = ?, "
            "failure_id = ?, failure_revision = ?, needs_repair = ?, client_title = ? "
            "WHERE session_id = ? AND epoch = ? AND holder = ?",
            (*fields, record.session_id, record.epoch, holder),
        )
    return cursor.rowcount == 1


def _connect(location: str, lock_timeout: float, synchronous: str) -> sqlite3.Connection:
    """Open, lock, check and (for a new file) create the store; runs in a worker thread."""
    try:
        conn = sqlite3.connect(
            location,
            timeout=lock_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=location.startswith("file:"),
        )
    except sqlite3.Error as exc:
        raise _error(location, "opening", exc) from exc
    try:
        _prepare(conn, location, synchronous)
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, location: str, synchronous: str) -> None:
    step = "opening"
    try:
        step = "locking"
        conn.execute("BEGIN IMMEDIATE")  # another process creating or migrating it goes first
        step = "checking the file"
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and version == 0 and tables == 0:
            step = "creating the schema"
            _create(conn)
            version = SCHEMA_VERSION
        else:
            _check_schema(location, app_id, version)
        for old in range(version, SCHEMA_VERSION):
            step = f"migrating the schema to version {old + 1}"
            for statement in _MIGRATIONS[old]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {old + 1}")
        step = "checking the file"
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise StoreCorruptError(location, "integrity check failed: " + "; ".join(problems[:3]))
        step = "writing"  # a read-only file or a full disk fails here, at open
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
        step = "enabling WAL"
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(location, f"cannot use WAL journaling (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.Error as exc:
        raise _error(location, step, exc) from exc


def _check_schema(location: str, app_id: int, version: int) -> None:
    """Refuse a file that is not a lifetime store this code can read (or migrate)."""
    if app_id != APPLICATION_ID:
        raise StoreSchemaError(location, "not an agent_meta lifetime store (it holds other data)")
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            location,
            f"schema version {version} is newer than this agent_meta supports "
            f"({SCHEMA_VERSION}); upgrade agent_meta",
        )
    if version < 1:
        raise StoreSchemaError(location, f"unknown schema version {version}")


def _create(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute(_SCHEMA)
