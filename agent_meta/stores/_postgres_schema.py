"""The PostgreSQL store's tables, its schema version, and the statements it runs.

Two tables, in the schema that the connections' ``search_path`` names (``public`` unless the
URL's ``options`` or the role's settings say otherwise):

- ``agent_meta_lifetimes``: one row per stored lifetime (the columns of the SQLite store's
  version 3: the session-info JSON text, the failure incident, the repair flag, whether the
  title is the client's, and the fencing ``epoch`` and ``holder``);
- ``agent_meta_schema``: one row, the schema version (:data:`SCHEMA_VERSION`). A newer version
  is refused; an older one is migrated (version 1 had no ``client_title``).

Creating or migrating them happens in one transaction, begun once this connection holds an
advisory lock (:data:`SCHEMA_LOCK`), so that stores opened at once on an empty (or older)
database wait for each other instead of racing; a database whose version is already current is
only read, so a role with no right to create tables can use tables that a DBA created
(``docs/durability.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._errors import StoreSchemaError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CLAIM",
    "COLUMNS",
    "DELETE",
    "INSERT",
    "READ",
    "READ_MANY",
    "SCHEMA_LOCK",
    "SCHEMA_VERSION",
    "UPDATE",
    "migrate",
]

SCHEMA_VERSION = 2
"""The PostgreSQL schema version this code writes (its own numbering, not SQLite's; 2 added
``client_title``)."""

SCHEMA_LOCK = 0x41474D54  # "AGMT": the advisory lock held while creating or migrating

COLUMNS = (
    "session_id, title, updated_at, meta, failure_id, failure_revision, needs_repair, "
    "client_title, epoch"
)

_CREATE = (
    """
    CREATE TABLE agent_meta_lifetimes (
        session_id text PRIMARY KEY,
        title text,
        updated_at text,
        meta text,
        failure_id text,
        failure_revision bigint,
        needs_repair boolean NOT NULL DEFAULT false,
        epoch bigint NOT NULL,
        holder text NOT NULL,
        client_title boolean NOT NULL DEFAULT false
    )
    """,
    """
    CREATE TABLE agent_meta_schema (
        single boolean PRIMARY KEY DEFAULT true CHECK (single),
        version integer NOT NULL
    )
    """,
)

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (  # to version 2: client-set titles (R13)
        "ALTER TABLE agent_meta_lifetimes ADD COLUMN client_title boolean NOT NULL DEFAULT false",
    ),
}
"""The statements that take the tables from each older version to the next one."""

CLAIM = f"""
UPDATE agent_meta_lifetimes
SET epoch = epoch + CASE WHEN holder = %(holder)s THEN 0 ELSE 1 END, holder = %(holder)s
WHERE session_id = %(session_id)s
RETURNING {COLUMNS}
"""
"""Take a lifetime over in one statement (the row lock makes concurrent claims take turns)."""

READ = f"SELECT {COLUMNS} FROM agent_meta_lifetimes WHERE session_id = %s"

READ_MANY = f"SELECT {COLUMNS} FROM agent_meta_lifetimes WHERE session_id = ANY(%s::text[])"

_FIELDS = """
    unnest(
        %(session_id)s::text[], %(epoch)s::bigint[], %(title)s::text[], %(updated_at)s::text[],
        %(meta)s::text[], %(failure_id)s::text[], %(failure_revision)s::bigint[],
        %(needs_repair)s::boolean[], %(client_title)s::boolean[]
    ) AS s (
        session_id, epoch, title, updated_at, meta, failure_id, failure_revision, needs_repair,
        client_title
    )
"""

DELETE = """
DELETE FROM agent_meta_lifetimes AS l
USING unnest(%(session_id)s::text[], %(epoch)s::bigint[]) AS d (session_id, epoch)
WHERE l.session_id = d.session_id AND l.epoch = d.epoch AND l.holder = %(holder)s
"""
"""Delete each ``(session_id, epoch)`` that the writer still holds (epoch and holder)."""

UPDATE = f"""
UPDATE agent_meta_lifetimes AS l
SET title = s.title, updated_at = s.updated_at, meta = s.meta, failure_id = s.failure_id,
    failure_revision = s.failure_revision, needs_repair = s.needs_repair,
    client_title = s.client_title
FROM {_FIELDS}
WHERE l.session_id = s.session_id AND l.epoch = s.epoch AND l.holder = %(holder)s
RETURNING l.session_id
"""
"""Store each record the writer still holds (the stored epoch is the one it carries, and the
holder is the writer); returns the stored ids."""

INSERT = f"""
INSERT INTO agent_meta_lifetimes (
    session_id, title, updated_at, meta, failure_id, failure_revision, needs_repair,
    client_title, epoch, holder
)
SELECT s.session_id, s.title, s.updated_at, s.meta, s.failure_id, s.failure_revision,
       s.needs_repair, s.client_title, 1, %(holder)s
FROM {_FIELDS}
ON CONFLICT (session_id) DO NOTHING
RETURNING session_id
"""
"""Create each new lifetime (epoch 1) where no record exists; returns the created ids."""


def migrate(conn: psycopg.Connection[tuple[object, ...]], location: str) -> None:
    """Create the tables, migrate them, or check their version, on an autocommit connection.

    A current schema is only read. Otherwise the advisory lock is taken first, and the version
    read again and the tables created or migrated in a transaction begun after it: a
    transaction begun before the lock was granted could still see, in its catalog cache, the
    tables as missing (or as they were) that the store which held the lock has just changed.
    """
    if _version(conn, location) == SCHEMA_VERSION:
        return
    conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
    try:
        with conn.transaction():
            version = _version(conn, location)
            if version is None:
                for statement in _CREATE:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO agent_meta_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
                version = SCHEMA_VERSION
            for old in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[old]:
                    conn.execute(statement)
                conn.execute("UPDATE agent_meta_schema SET version = %s", (old + 1,))
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def _version(conn: psycopg.Connection[tuple[object, ...]], location: str) -> int | None:
    """The stored schema version (``None``: no tables yet); refuses what this code cannot use."""
    row = conn.execute(
        "SELECT to_regclass('agent_meta_schema') IS NOT NULL,"
        " to_regclass('agent_meta_lifetimes') IS NOT NULL"
    ).fetchone()
    assert row is not None
    has_version, has_lifetimes = row
    if not has_version:
        if has_lifetimes:
            raise StoreSchemaError(
                location,
                "a table agent_meta_lifetimes exists without agent_meta_schema: not a lifetime "
                "store this code made",
            )
        return None
    found = conn.execute("SELECT version FROM agent_meta_schema").fetchone()
    version = None if found is None else found[0]
    if not isinstance(version, int) or version < 1:
        raise StoreSchemaError(location, f"unknown schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            location,
            f"schema version {version} is newer than this agent_meta supports "
            f"({SCHEMA_VERSION}); upgrade agent_meta",
        )
    return version
