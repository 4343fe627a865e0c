"""One store URL picks the store: a path or ``sqlite:///PATH`` is a :class:`SQLiteStore`
file, ``postgresql://`` (or ``postgres://``) a :class:`PostgresStore` database.

This is what ``agent-meta agent --store URL`` and ``agent-meta run --store URL`` take. The
stores' modules are imported only when a URL names them: opening a SQLite file loads no
psycopg, and naming a database without the ``postgres`` extra installed is a
:class:`StoreError` that says how to install it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..core._errors import StoreError
from ._urls import store_kind

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterator

    from ._postgres import PostgresStore
    from ._sqlite import SQLiteStore

__all__ = ["open_store"]


@contextlib.asynccontextmanager
async def open_store(url: str | os.PathLike[str]) -> AsyncIterator[SQLiteStore | PostgresStore]:
    """Open the store that ``url`` names and close it at the end of the block::

        async with agent_meta.open_store("postgresql://agent@db/agents") as store:
            async with agent_meta.open_owner(output, store=store) as owner: ...

    A file path or ``sqlite:///PATH``: :meth:`SQLiteStore.open`; ``postgresql://...`` or
    ``postgres://...``: :meth:`PostgresStore.open` (needs the ``postgres`` extra), each with
    its default options. Anything else raises :class:`StoreError` (naming the URL without its
    password), as does every failure to open.
    """
    kind, target = store_kind(url)
    store: SQLiteStore | PostgresStore
    if kind == "sqlite":
        from ._sqlite import SQLiteStore

        store = await SQLiteStore.open(target)
    else:
        store = await _postgres_store().open(target)
    async with store:
        yield store


def _postgres_store() -> type[PostgresStore]:
    try:
        from ._postgres import PostgresStore
    except ImportError as exc:  # its message names the 'postgres' extra and how to install it
        raise StoreError("postgresql", str(exc)) from None
    return PostgresStore
