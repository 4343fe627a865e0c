"""The steps both reference agents take to restore a session (``session/load``,
``session/resume``) and to close one (``session/close``), on either runtime.

Each agent passes in what its runtime does differently: how a store write runs to its end even
if the request is cancelled meanwhile (a shielded trio scope, or ``to_the_end`` on asyncio), and
how an update reaches the client (the connection, or the SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_meta import LifetimeTakenOverError

from ._listing import listed_info
from ._replay import replay_updates

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_meta import JsonObject, Owner, SessionLifetime

    from ._storage import SessionRecord

__all__ = ["close_record", "restore_record"]


async def restore_record(
    session: SessionRecord,
    lifetime: SessionLifetime,
    *,
    replay: bool,
    v2: bool,
    max_frame_bytes: int,
    save: Callable[[], Awaitable[None]],
    send: Callable[[JsonObject], Awaitable[None]],
) -> None:
    """Reopen a closed session, then replay its history if asked.

    The session's lifetime is open already (kept, R5; from the store; or fresh). A fresh
    lifetime of a closed session lost its title with the old one, and the agent knows it, so
    the resync before the response says so (``title: null`` on v2); ``save`` stores that the
    session is open again (the store must agree). ``send`` sends each replayed update.
    """
    if session.closed:
        lifetime.seed(title=None)
        session.closed = False
        await save()
    if replay:
        for message in list(session.history):
            for update in replay_updates(message, v2, session.session_id, max_frame_bytes):
                await send(update)


async def close_record(
    session: SessionRecord, owner: Owner, save: Callable[[], Awaitable[None]]
) -> None:
    """Keep what ``session/list`` shows of a session whose lifetime ends, and store it closed
    (a restarted agent reopens it alike). ``save`` stores the row only while this connection
    holds the session; when another connection has taken it over, its record is not ours and
    the session stays open here."""
    session.last_info = await listed_info(owner, session.session_id, session.last_info)
    session.closed = True
    try:
        await save()
    except LifetimeTakenOverError:
        session.closed = False
