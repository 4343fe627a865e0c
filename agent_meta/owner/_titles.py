"""The titles the client set (R13), as a ``session/list`` page needs them: open or stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sansio.queue._records import restore_state
from ..sansio.queue._state import LifetimeState
from ._failures import store_failed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._base import OwnerBase

__all__ = ["client_titles"]


async def client_titles(owner: OwnerBase, session_ids: Sequence[str]) -> dict[str, str]:
    """The title the client set for each of ``session_ids`` that has one: its open lifetime's,
    else what ``owner``'s store holds (one read for all those not open here, whichever owner
    holds them). Raises :class:`~agent_meta.StoreError` when the store cannot be read."""
    titles: dict[str, str] = {}
    elsewhere: list[str] = []
    for session_id in session_ids:
        if owner.has_lifetime(session_id):
            _add(titles, owner.lifetime(session_id)._state)
        else:
            elsewhere.append(session_id)
    store = owner._store
    if store is None or not elsewhere:
        return titles
    try:
        records = await store.read_many(elsewhere)
    except Exception as exc:
        raise store_failed(exc, store.location) from exc
    for session_id, record in records.items():
        if record.client_title:
            state = LifetimeState(session_id)
            restore_state(state, record, store.location)
            _add(titles, state)
    return titles


def _add(titles: dict[str, str], state: LifetimeState) -> None:
    if not state.client_title:
        return
    title = state.snapshot().title
    if isinstance(title, str):
        titles[state.session_id] = title
