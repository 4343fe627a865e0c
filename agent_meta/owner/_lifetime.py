"""Handles into the owner: a session lifetime, and a domain inside its ``_meta``.

:class:`SessionLifetime` is what an agent holds for one session: publish, resync, domain edits
and failure incidents. :class:`DomainHandle` edits values inside one top-level ``_meta`` key.
Both only *enqueue* through their :class:`~agent_meta.MetaOwner`; every ``async`` method either
takes its whole effect or, if cancelled while it waits for queue room, none (see
``docs/owner.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

from ..core._errors import MetaValueError
from ..core._json import JsonValue, json_copy
from ..core._sentinel import OMITTED, Omitted
from ..sansio._state import (
    EncodedUpdate,
    FailureIncident,
    LifetimeState,
    check_path,
    edit_domain,
    encode_update,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..core._session_info import SessionInfo
    from ._trio import MetaOwner

__all__ = ["DomainHandle", "SessionLifetime"]


@final
class SessionLifetime:
    """The session-info state of one session lifetime, and the handle to publish into it.

    Obtained from :meth:`MetaOwner.open_session` or :meth:`MetaOwner.lifetime`. Once the
    lifetime ends (:meth:`MetaOwner.close_session`), every call on this handle writes nothing,
    returns quietly (``False`` where a result is returned) and is counted as fenced (R6).
    """

    __slots__ = ("_owner", "_state")

    _owner: MetaOwner
    _state: LifetimeState

    def __init__(self) -> None:
        raise TypeError("use MetaOwner.open_session() or MetaOwner.lifetime()")

    @classmethod
    def _create(cls, owner: MetaOwner, state: LifetimeState) -> SessionLifetime:
        self = object.__new__(cls)
        self._owner = owner
        self._state = state
        return self

    def __repr__(self) -> str:
        status = "closed" if self.closed else "open"
        return f"<SessionLifetime {self.session_id!r} {status}>"

    @property
    def session_id(self) -> str:
        return self._state.session_id

    @property
    def closed(self) -> bool:
        """True once the lifetime has ended; the handle is then fenced."""
        return self._state.closed

    @property
    def current_failure(self) -> FailureIncident | None:
        """The failure incident currently shown, kept for the whole lifetime (R7)."""
        return self._state.failure

    def snapshot(self) -> SessionInfo:
        """A JSON copy of the known state: what a client holds once it is in sync."""
        return self._state.snapshot()

    # -- publishing ----------------------------------------------------------------------
    def _encode(
        self,
        title: str | None | Omitted,
        updated_at: str | None | Omitted,
        meta: Mapping[str, object] | None | Omitted,
        notification_meta: Mapping[str, object] | None,
    ) -> EncodedUpdate:
        return encode_update(
            title=title,
            updated_at=updated_at,
            meta=meta,
            notification_meta=notification_meta,
            protocol_version=self._owner.protocol_version,
        )

    async def publish(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
        notification_meta: Mapping[str, object] | None = None,
    ) -> bool:
        """Publish a ``session_info_update``: each field ``OMITTED``, ``None`` (clear) or a value.

        ``meta`` is a shallow patch (R1): a key set to ``None`` removes it, other values replace
        the key whole. ``notification_meta`` travels on this frame's ``params._meta`` only and is
        never stored (R9). Values are validated and copied before anything changes; bad input
        raises :class:`~agent_meta.MetaValueError` (or :class:`~agent_meta.FrameTooLargeError`).

        Returns ``True`` once the publication is part of the known state and queued, ``False``
        if the lifetime has ended. With coalescing on this never waits for the writer, except
        when ``notification_meta`` is given (that frame is never merged). Cancelled while
        waiting: nothing was published.
        """
        update = self._encode(title, updated_at, meta, notification_meta)
        return await self._owner._publish(self._state, update)

    def publish_nowait(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
        notification_meta: Mapping[str, object] | None = None,
    ) -> bool:
        """Like :meth:`publish`, but raise :class:`trio.WouldBlock` instead of waiting."""
        update = self._encode(title, updated_at, meta, notification_meta)
        return self._owner._publish_nowait(self._state, update)

    async def resync(self) -> bool:
        """Queue a resync (R4): ``_meta: null``, then the known state, taken at write time.

        Call it after replay and before responding to ``session/resume`` (v1
        ``session/load``); because the response goes through the same FIFO, it follows the
        resync. Never waits for the writer. Returns ``False`` if the lifetime has ended.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        accepted = self._owner._resync_nowait(self._state)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return accepted

    def resync_nowait(self) -> bool:
        """Like :meth:`resync` (which never blocks), for synchronous code."""
        return self._owner._resync_nowait(self._state)

    def domain(self, key: str) -> DomainHandle:
        """A handle that edits values inside the top-level ``_meta`` key ``key`` only (R8)."""
        if not isinstance(key, str):
            raise MetaValueError(
                f"a domain key must be a str, not a {type(key).__name__}", path="key"
            )
        return DomainHandle._create(self, key)

    # -- failure incidents (R7) ------------------------------------------------------------
    async def report_failure(self, incident_id: str, revision: int, record: JsonValue) -> bool:
        """Show failure incident ``(incident_id, revision)`` with ``record`` at the failure path.

        The record is written inside its top-level key, keeping sibling values. A report of the
        current incident with an older revision is stale: it changes nothing and returns
        ``False`` (as does an ended lifetime). Cancelled while waiting: nothing changed.
        """
        incident = _check_incident(incident_id, revision)
        value = json_copy(record, path="record")
        state = self._state

        def make() -> EncodedUpdate | bool:
            current = state.failure
            if (
                current is not None
                and current.incident_id == incident.incident_id
                and current.revision > incident.revision
            ):
                return False  # stale: a newer revision of this incident is shown
            update = self._domain_update(self._owner.failure_path, value, prune=False)
            return True if update is None else update

        def shown() -> None:
            state.failure = incident

        return await self._owner._publish_edit(state, make, shown)

    async def resolve_failure(self, incident_id: str, revision: int) -> bool:
        """Clear the failure record if ``(incident_id, revision)`` is still the current incident.

        A late resolution of an older incident or revision changes nothing and returns
        ``False``, so it can never remove a newer incident. Clearing a nested record re-sends
        the whole top-level value without it (siblings kept; emptied objects removed).
        """
        incident = _check_incident(incident_id, revision)
        state = self._state

        def make() -> EncodedUpdate | bool:
            if state.failure != incident:
                return False  # a late resolution: another incident or revision is shown
            update = self._domain_update(self._owner.failure_path, OMITTED, prune=True)
            return True if update is None else update

        def cleared() -> None:
            state.failure = None

        return await self._owner._publish_edit(state, make, cleared)

    def _domain_update(
        self, full_path: Sequence[str], value: JsonValue | Omitted, *, prune: bool
    ) -> EncodedUpdate | None:
        """The publication for a set/remove at ``full_path``, or ``None`` if nothing changes."""
        key, *rest = full_path
        new = edit_domain(self._state.meta_value(key), key, tuple(rest), value, prune=prune)
        if new is OMITTED:
            return None
        return encode_update(meta={key: new}, protocol_version=self._owner.protocol_version)


@final
class DomainHandle:
    """Edits inside one top-level ``_meta`` key, by read-modify-write of the known value (R8).

    Each edit reads the current value, changes one path inside it and publishes the whole new
    value as a shallow patch, in one step that no other writer can interleave with. Writers that
    share a key therefore never lose each other's edits, and the handle cannot reach any other
    top-level key.
    """

    __slots__ = ("_key", "_lifetime")

    _lifetime: SessionLifetime
    _key: str

    def __init__(self) -> None:
        raise TypeError("use SessionLifetime.domain(key)")

    @classmethod
    def _create(cls, lifetime: SessionLifetime, key: str) -> DomainHandle:
        self = object.__new__(cls)
        self._lifetime = lifetime
        self._key = key
        return self

    @property
    def key(self) -> str:
        return self._key

    def get(self, path: Sequence[str] = ()) -> JsonValue | Omitted:
        """A copy of the known value at ``path`` inside the key, or ``OMITTED`` if absent."""
        steps = check_path(path)
        node = self._lifetime._state.meta_value(self._key)
        for step in steps:
            if not isinstance(node, dict) or step not in node:
                return OMITTED
            node = node[step]
        return node

    async def _edit(self, path: Sequence[str], value: JsonValue | Omitted) -> bool:
        steps = check_path(path)
        lifetime = self._lifetime
        full_path = (self._key, *steps)

        def make() -> EncodedUpdate | bool:
            update = lifetime._domain_update(full_path, value, prune=False)
            return True if update is None else update

        return await lifetime._owner._publish_edit(lifetime._state, make)

    async def set(self, path: Sequence[str], value: object) -> bool:
        """Set ``value`` at ``path`` (creating objects on the way); ``path=()`` sets the key.

        Raises :class:`~agent_meta.MetaPathError` if a step is not an object. Returns ``False``
        only if the lifetime has ended.
        """
        return await self._edit(path, json_copy(value, path="value"))

    async def remove(self, path: Sequence[str]) -> bool:
        """Remove the value at ``path``; ``path=()`` removes the whole key (``{key: null}``).

        Removing something that is not there changes and sends nothing. Returns ``False`` only
        if the lifetime has ended.
        """
        return await self._edit(path, OMITTED)


def _check_incident(incident_id: object, revision: object) -> FailureIncident:
    if not isinstance(incident_id, str):
        raise MetaValueError("must be a str", path="incident_id")
    if not isinstance(revision, int) or isinstance(revision, bool):
        raise MetaValueError("must be an int", path="revision")
    return FailureIncident(incident_id, revision)
