"""A :class:`~agent_meta.LifetimeStore` in PostgreSQL (psycopg 3 and psycopg-pool), shared by
every process and machine that opens the same database: agent replicas behind one endpoint.

The ownership protocol is the one of :mod:`agent_meta.stores._store` (each row carries its
holder's fencing epoch; every write is conditional on it), each call one round trip:

- ``claim`` is one ``UPDATE ... RETURNING`` (the row lock makes concurrent claims take turns);
- ``write`` sends ``BEGIN``, the conditional deletes, updates and inserts of the whole batch
  (arrays through ``unnest``) and ``COMMIT`` in one pipeline, and waits once;
- ``read`` is one ``SELECT``, and so is ``read_many`` (``session_id = ANY(...)``).

Every pooled connection carries ``lock_timeout``, ``statement_timeout`` and
``idle_in_transaction_session_timeout``, so a holder frozen inside a transaction (or a stray
session holding a row lock) delays a takeover by ``lock_timeout`` at most, as a typed
:class:`StoreLockedError`, and the server ends a frozen transaction of ours after
``idle_in_transaction_timeout``.

psycopg's async side runs on asyncio only, so the sync driver and pool run in worker threads
under both runtimes (``trio.to_thread`` or ``asyncio.to_thread``, see
:mod:`agent_meta.stores._workers`); a cancelled call waits for its thread. The pool lets up to
``max_size`` calls run at once.

The URL's password never appears in :attr:`PostgresStore.location`, in errors, or in what is
logged (psycopg's own messages are scrubbed of it too).
"""

from __future__ import annotations

import contextlib
import select
from typing import TYPE_CHECKING, Any, Self, TypeVar, final

try:
    import psycopg
    import psycopg.errors
    import psycopg_pool
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ImportError as exc:  # pragma: no cover - exercised without the extra
    from .._install_hint import install_hint

    raise ImportError(
        f"agent_meta.PostgresStore needs psycopg 3 and psycopg-pool ({exc}): "
        f"{install_hint('postgres')}"
    ) from exc

from ..core._errors import StoreCorruptError, StoreError, StoreLockedError, StoreSchemaError
from . import _postgres_schema as sql
from ._store import record_from_row
from ._urls import redact_url
from ._workers import WorkerThreads

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    from ..sansio.queue._records import StoredLifetime

__all__ = ["PostgresStore", "redact"]

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]


@final
class PostgresStore:
    """Session lifetimes in a PostgreSQL database. Open it with :meth:`open`; close with
    :meth:`aclose` (or ``async with await PostgresStore.open(url) as store:``).

    One store serves every owner of a process; other processes and machines open the same
    database. Opening raises :class:`StoreSchemaError` (tables this code did not make, or a
    newer schema), :class:`StoreLockedError` (another store kept the schema locked past
    ``lock_timeout``) or :class:`StoreError` (unreachable, refused, no privilege), each naming
    the database without its password.
    """

    def __init__(self) -> None:
        raise TypeError("use await PostgresStore.open(url)")

    _pool: psycopg_pool.ConnectionPool[Connection] | None
    _location: str
    _secrets: tuple[str, ...]
    _threads: WorkerThreads
    _wait: float

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        lock_timeout: float = 2.0,
        statement_timeout: float = 5.0,
        idle_in_transaction_timeout: float = 10.0,
        connect_timeout: float = 10.0,
    ) -> Self:
        """Connect to ``url`` (``postgresql://user:password@host:port/database?...`` or a
        ``key=value`` connection string), create or check the tables, and open a pool of
        ``min_size`` to ``max_size`` connections.

        ``lock_timeout``: how long a call waits for a row (or the schema) that another session
        has locked before raising :class:`StoreLockedError`; ``statement_timeout``: how long
        one statement may run; ``idle_in_transaction_timeout``: how long the server lets one
        of this store's transactions sit idle (a frozen process) before ending its session and
        releasing its locks; ``connect_timeout``: how long to wait for a connection, new or
        from the pool. All in seconds.
        """
        for name, value in (
            ("lock_timeout", lock_timeout),
            ("statement_timeout", statement_timeout),
            ("idle_in_transaction_timeout", idle_in_transaction_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        if min_size < 0 or max_size < max(min_size, 1):
            raise ValueError(
                f"need 0 <= min_size <= max_size, 1 <= max_size: {min_size}, {max_size}"
            )
        location, hidden = redact(url)
        self = object.__new__(cls)
        self._location = location
        self._secrets = hidden
        self._threads = WorkerThreads("PostgresStore")
        self._wait = connect_timeout
        self._pool = None
        settings = {
            "lock_timeout": lock_timeout,
            "statement_timeout": statement_timeout,
            "idle_in_transaction_session_timeout": idle_in_transaction_timeout,
        }
        self._pool = await self._threads.run(
            self._connect, url, settings, min_size, max_size, connect_timeout
        )
        return self

    @property
    def location(self) -> str:
        """The database's URL (or connection string) without its password."""
        return self._location

    @property
    def closed(self) -> bool:
        return self._pool is None

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
        """Close the pool (idempotent); shielded from cancellation. A call still running keeps
        its connection to the end of its transaction; the connection is closed after."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await self._threads.shielded(lambda: self._threads.run(pool.close))

    async def migrate(self) -> None:
        """Create the tables, or check their schema version (what :meth:`open` does)."""
        await self._call(sql.migrate, self._location, what="migrating the schema")

    async def run(
        self,
        action: Callable[[Connection], T],
        *,
        what: str = "query",
        write: bool = True,
    ) -> T:
        """Run ``action(connection)`` in a worker thread inside one transaction, on a pooled
        psycopg connection (``%s`` placeholders).

        It commits when ``action`` returns and rolls back if it raises; ``write=False`` makes
        it a read-only transaction. psycopg errors become :class:`StoreError` naming the
        database; ``what`` names the operation. Table names starting with ``agent_meta_`` are
        reserved.
        """

        def transaction(conn: Connection) -> T:
            conn.read_only = not write
            with conn.transaction():
                return action(conn)

        return await self._call(transaction, what=what)

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        def claim(conn: Connection) -> tuple[Any, ...] | None:
            params = {"holder": holder, "session_id": session_id}
            return conn.execute(sql.CLAIM, params).fetchone()

        row = await self._call(claim, what="claiming a lifetime")
        return None if row is None else record_from_row(self._location, row)

    async def read(self, session_id: str) -> StoredLifetime | None:
        def read(conn: Connection) -> tuple[Any, ...] | None:
            return conn.execute(sql.READ, (session_id,)).fetchone()

        row = await self._call(read, what="reading a lifetime")
        return None if row is None else record_from_row(self._location, row)

    async def read_many(self, session_ids: Sequence[str]) -> dict[str, StoredLifetime]:
        wanted = list(dict.fromkeys(session_ids))
        if not wanted:
            return {}

        def read(conn: Connection) -> list[tuple[Any, ...]]:
            return conn.execute(sql.READ_MANY, (wanted,)).fetchall()

        rows = await self._call(read, what="reading lifetimes")
        records = [record_from_row(self._location, row) for row in rows]
        return {record.session_id: record for record in records}

    async def write(
        self,
        saves: Sequence[StoredLifetime],
        deletes: Sequence[tuple[str, int]],
        *,
        holder: str,
    ) -> frozenset[str]:
        latest = {record.session_id: record for record in saves}  # the last save of each
        created = [record for record in latest.values() if record.epoch == 0]
        updated = [record for record in latest.values() if record.epoch != 0]

        def write(conn: Connection) -> set[str]:
            return _write_batch(conn, deletes, updated, created, holder)

        stored = await self._call(write, what="saving lifetimes")
        return frozenset(latest) - stored

    async def _call(self, action: Callable[..., T], *args: object, what: str) -> T:
        pool = self._pool
        if pool is None:
            raise StoreError(self._location, f"{what} failed: the store is closed")
        return await self._threads.run(self._with_connection, pool, action, args, what)

    def _with_connection(
        self,
        pool: psycopg_pool.ConnectionPool[Connection],
        action: Callable[..., T],
        args: tuple[object, ...],
        what: str,
    ) -> T:
        """``action(connection, *args)`` on a pooled connection; runs in a worker thread."""
        try:
            with pool.connection(timeout=self._wait) as conn:
                return action(conn, *args)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _error(self._location, what, exc, self._secrets) from _cause(exc, self._secrets)

    def _connect(
        self,
        url: str,
        settings: dict[str, float],
        min_size: int,
        max_size: int,
        connect_timeout: float,
    ) -> psycopg_pool.ConnectionPool[Connection]:
        """Check the database on one connection of its own (its errors are the clearest),
        then open the pool; runs in a worker thread."""
        step = "connecting"
        try:
            kwargs = _connection_kwargs(url, settings, connect_timeout)
            with psycopg.connect(url, **kwargs) as conn:
                step = "checking the schema"
                sql.migrate(conn, self._location)
            pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
                url,
                kwargs=kwargs,
                min_size=min_size,
                max_size=max_size,
                open=False,
                name=self._location,
                timeout=connect_timeout,
                check=_check_idle,
                reset=_reset,
            )
            pool.open()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _error(self._location, step, exc, self._secrets) from _cause(exc, self._secrets)
        return pool


def _write_batch(
    conn: Connection,
    deletes: Sequence[tuple[str, int]],
    updated: list[StoredLifetime],
    created: list[StoredLifetime],
    holder: str,
) -> set[str]:
    """One transaction in one pipeline (one round trip): deletes, then updates, then inserts,
    each conditional; the ids stored."""
    results: list[psycopg.Cursor[tuple[Any, ...]]] = []
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            if deletes:
                ids, epochs = zip(*deletes, strict=True)
                conn.execute(
                    sql.DELETE, {"session_id": list(ids), "epoch": list(epochs), "holder": holder}
                )
            if updated:
                results.append(conn.execute(sql.UPDATE, _columns(updated, holder)))
            if created:
                results.append(conn.execute(sql.INSERT, _columns(created, holder)))
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()  # else the pool discards the connection
        raise
    return {row[0] for cursor in results for row in cursor.fetchall()}


def _columns(records: list[StoredLifetime], holder: str) -> dict[str, object]:
    """The records as one array per column, for ``unnest``."""
    names = ("session_id", "epoch", "title", "updated_at", "meta", "needs_repair", "client_title")
    columns: dict[str, object] = {
        name: [getattr(record, name) for record in records] for name in names
    }
    failures = [record.failure for record in records]
    columns["failure_id"] = [None if f is None else f.incident_id for f in failures]
    columns["failure_revision"] = [None if f is None else f.revision for f in failures]
    columns["holder"] = holder
    return columns


def redact(url: str) -> tuple[str, tuple[str, ...]]:
    """``url`` without its password (a URL's, or a connection string's ``password=``), and
    the password's spellings, to scrub from messages. A connection string that cannot be read
    is refused without showing any of it (it may hold a password)."""
    try:
        if "://" in url:
            return redact_url(url)
        params = conninfo_to_dict(url)
    except (psycopg.Error, ValueError):
        raise StoreError(
            "(unreadable PostgreSQL URL)",
            "cannot read the URL or connection string (not shown: it may hold a password)",
        ) from None
    password = params.pop("password", None)
    return make_conninfo("", **params), () if password is None else (str(password),)


def _scrub(text: str, hidden: tuple[str, ...]) -> str:
    for secret in hidden:
        text = text.replace(secret, "***")
    return text


def _cause(exc: BaseException, hidden: tuple[str, ...]) -> BaseException | None:
    """``exc`` as the cause to chain, unless its message holds the password."""
    return None if any(secret in str(exc) for secret in hidden) else exc


_LOCKED = {"55P03"}  # lock_not_available: lock_timeout
_CORRUPT_CLASS = "XX"  # internal errors: data_corrupted, index_corrupted
_SCHEMA = {"42P01", "42703"}  # undefined table or column: not the schema we made


def _error(location: str, action: str, exc: BaseException, hidden: tuple[str, ...]) -> StoreError:
    """The typed error for a psycopg (or pool) failure, naming the store, never the password."""
    state = getattr(exc, "sqlstate", None) or ""
    message = _scrub(str(exc).strip(), hidden)
    reason = f"{action} failed: {message}" + (f" (SQLSTATE {state})" if state else "")
    if state in _LOCKED:
        return StoreLockedError(
            location, reason + "; another session kept the row locked past lock_timeout"
        )
    if state.startswith(_CORRUPT_CLASS):
        return StoreCorruptError(location, reason)
    if state in _SCHEMA:
        return StoreSchemaError(location, reason)
    return StoreError(location, reason)


def _connection_kwargs(url: str, settings: dict[str, float], connect_timeout: float) -> Any:
    """The connections' parameters: autocommit, the timeouts as server settings (appended to
    the URL's own ``options``, so that no statement is spent on them), a name in
    ``pg_stat_activity``."""
    given = conninfo_to_dict(url)
    options = [str(given.get("options") or "")]
    options += [f"-c {name}={round(seconds * 1000)}" for name, seconds in settings.items()]
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "options": " ".join(option for option in options if option),
        "connect_timeout": max(2, round(connect_timeout)),
    }
    if "application_name" not in given:
        kwargs["application_name"] = "agent_meta"
    return kwargs


def _check_idle(conn: Connection) -> None:
    """Before a pooled connection is handed out: an idle connection has nothing to read unless
    the server has closed it (a restart, an administrator, an idle timeout), so only then is a
    round trip spent to find out (a broken one raises, and the pool takes another)."""
    if _readable(conn.fileno()):
        psycopg_pool.ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    if hasattr(select, "poll"):  # any descriptor number (select.select stops at 1024)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


def _reset(conn: Connection) -> None:
    """What :meth:`PostgresStore.run` may have changed, put back when a connection returns."""
    conn.read_only = None
    conn.autocommit = True
