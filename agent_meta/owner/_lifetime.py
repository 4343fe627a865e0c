"""Handles into an owner: a session lifetime, and a domain inside its ``_meta``.

:class:`SessionLifetime` is what an agent holds for one session: publish, resync, domain edits,
failure incidents and the title the client set. :class:`DomainHandle` edits values inside one
top-level ``_meta`` key. Both only turn calls into edits for the owner's sans-IO queue, where
every rule is decided, so the same handles serve the trio and the asyncio driver.

Cancellation (every ``async`` method): it either takes its whole effect or, if cancelled before
it could (while it waits for queue room), none. Each ``*_nowait`` twin raises the driver's "would
block" exception (``trio.WouldBlock``, ``asyncio.QueueFull``) instead of waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, final

from ..core._errors import MetaValueError
from ..core._json import JsonValue, json_copy
from ..core._sentinel import OMITTED, Omitted
from ..sansio._encode import EncodedUpdate, encode_update
from ..sansio.queue._edits import ClientTitle, DomainEdit, ReportFailure, ResolveFailure, check_path
from ..sansio.queue._state import FailureIncident, check_sizes, headroom

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..core._session_info import SessionInfo
    from ..sansio.queue._edits import Edit
    from ..sansio.queue._state import LifetimeState

__all__ = [
    "DomainHandle",
    "LifetimeOwner",
    "SessionLifetime",
    "check_domain_key",
    "client_title_edit",
    "domain_edit",
    "encoded_headroom",
    "publication",
    "publish_encoded",
    "publish_encoded_nowait",
    "report_edit",
    "resolve_edit",
]


class LifetimeOwner(Protocol):
    """The owner as its handles see it: where they submit edits. Every driver's owner is one
    (:class:`~agent_meta.owner._base.OwnerBase`); agents use the handles, not this."""

    @property
    def offset_timestamps(self) -> bool:
        """``updatedAt`` must be RFC 3339 with an offset in the version rendered now (v2)."""
        ...

    @property
    def max_frame_bytes(self) -> int:
        """The longest frame the owner writes (R12)."""
        ...

    async def submit_edit(self, state: LifetimeState, edit: Edit) -> bool:
        """Apply ``edit`` to the lifetime ``state`` (waiting for queue room if it needs some);
        ``False`` if the lifetime has ended."""
        ...

    def submit_edit_nowait(self, state: LifetimeState, edit: Edit) -> bool:
        """:meth:`submit_edit` without waiting: the driver's "would block" error instead."""
        ...

    def resync_lifetime(self, state: LifetimeState) -> bool:
        """Queue a resync of ``state`` (never waits); ``False`` if the lifetime has ended."""
        ...

    def seed_lifetime(self, state: LifetimeState, update: EncodedUpdate) -> bool:
        """Make ``update`` known state without a frame; ``False`` if the lifetime has ended."""
        ...


@final
class SessionLifetime:
    """The session-info state of one session lifetime, and the handle to publish into it.

    Obtained from ``owner.open_lifetime()`` or ``owner.lifetime()``. Once the lifetime ends
    (``owner.close_lifetime()``), every call on this handle writes nothing, returns ``False``
    and is counted as fenced (R6); what it queued before the close is still written.
    """

    __slots__ = ("_owner", "_state")

    _owner: LifetimeOwner
    _state: LifetimeState

    def __init__(self) -> None:
        raise TypeError("use owner.open_lifetime() or owner.lifetime()")

    @classmethod
    def _create(cls, owner: LifetimeOwner, state: LifetimeState) -> SessionLifetime:
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
        return self._state.books.closed

    @property
    def current_failure(self) -> FailureIncident | None:
        """The failure incident currently shown, kept for the whole lifetime (R7)."""
        return self._state.failure

    def snapshot(self) -> SessionInfo:
        """A JSON copy of the known state: what a client holds once it is in sync."""
        return self._state.snapshot()

    @property
    def title_set_by_client(self) -> bool:
        """Whether the client set the title (``session/set_title``, R13): the lifetime's title
        is then the client's, and the ``title`` of every publication is dropped (counted in
        ``statistics().suppressed_titles``); an agent may skip generating titles for it."""
        return self._state.client_title

    # -- publishing ----------------------------------------------------------------------
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
        when ``notification_meta`` is given (that frame is never merged).
        """
        owner = self._owner
        edit = encode_update(  # publication(), written out: every publication passes here
            title=title,
            updated_at=updated_at,
            meta=meta,
            notification_meta=notification_meta,
            offset_timestamps=updated_at is not OMITTED and owner.offset_timestamps,
        )
        return await owner.submit_edit(self._state, edit)

    def publish_nowait(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
        notification_meta: Mapping[str, object] | None = None,
    ) -> bool:
        """Like :meth:`publish`, but raise instead of waiting for queue room."""
        edit = publication(self._owner, title, updated_at, meta, notification_meta)
        return self._owner.submit_edit_nowait(self._state, edit)

    def check(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
        notification_meta: Mapping[str, object] | None = None,
    ) -> None:
        """Raise what :meth:`publish` would raise for these fields now, publishing nothing.

        For an agent that publishes through another serializer: the official SDK's
        ``conn.session_update`` serializes first (its limits are not the owner's) and the
        adapter under it refuses an update it cannot take without a word to the agent, so an
        SDK agent that must answer a refusal checks here first. Raises
        :class:`~agent_meta.MetaValueError` or :class:`~agent_meta.FrameTooLargeError`; never
        blocks.
        """
        edit = publication(self._owner, title, updated_at, meta, notification_meta)
        check_sizes(self._state, edit, self._owner.max_frame_bytes)

    def resync(self) -> bool:
        """Queue a resync (R4): ``_meta: null``, then the known state, taken at write time.

        agent_meta's connections (its own and the official-SDK adapter) resync every
        successful ``session/resume`` and v1 ``session/load`` themselves, after the replay and
        before the response; call this only on an owner you drive yourself. Never blocks (a
        lifetime has at most one pending resync, which serves every request made before it is
        written). Returns ``False`` if the lifetime has ended.
        """
        return self._owner.resync_lifetime(self._state)

    def seed(
        self,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
    ) -> bool:
        """Make these fields known without sending a frame: the next resync carries them.

        For a load or resume handler that knows more than the store does (say, ``title=None``:
        a reopened session's title went with its closed lifetime), before the connection's
        resync. Fields follow the rule of :meth:`publish`. Never blocks; ``False`` if the
        lifetime has ended. Under ACP v1 the next frame of the session carries the whole
        known state, so it tells the client too.
        """
        update = publication(self._owner, title, updated_at, meta, None)
        return self._owner.seed_lifetime(self._state, update)

    # -- client-set titles (R13) ----------------------------------------------------------
    async def set_client_title(self, title: str) -> bool:
        """The client set the title to ``title``: publish it (the confirmation
        ``session_info_update``) and keep it; from now on the ``title`` of every other
        publication and seed is dropped, the rest of it still published. With a store, it
        returns once the title is stored.

        What agent_meta's connections call for ``session/set_title`` (they answer it
        themselves, see ``docs/owner.md``); the request's own rules (the length limit) are
        theirs. Returns ``False`` if the lifetime has ended; raises
        :class:`~agent_meta.MetaValueError` for a title that is not a str and
        :class:`~agent_meta.FrameTooLargeError` for one the frame limit cannot carry. Cancelled
        while it waits for queue room, nothing changed; once accepted, a cancellation waits
        for the store (as :meth:`publish` does).
        """
        return await self._owner.submit_edit(self._state, client_title_edit(self._owner, title))

    def set_client_title_nowait(self, title: str) -> bool:
        """Like :meth:`set_client_title`, but raise instead of waiting for queue room (and
        return without waiting for the store: the confirmation is still written only once the
        title is stored)."""
        edit = client_title_edit(self._owner, title)
        return self._owner.submit_edit_nowait(self._state, edit)

    def adopt_client_title(self, title: str) -> bool:
        """The client set the title to ``title`` through someone else, who confirmed it (an
        agent behind a proxy answered ``session/set_title``): keep it as the client's, as
        :meth:`set_client_title` does, without a confirmation of its own. If it differs from the
        known title, a resync tells the client. Never blocks; ``False`` if the lifetime has
        ended."""
        edit = client_title_edit(self._owner, title, confirm=False)
        return self._owner.submit_edit_nowait(self._state, edit)

    def domain(self, key: str) -> DomainHandle:
        """A handle that edits values inside the top-level ``_meta`` key ``key`` only (R8)."""
        return DomainHandle._create(self._owner, self._state, check_domain_key(key))

    # -- failure incidents (R7) ------------------------------------------------------------
    async def report_failure(self, incident_id: str, revision: int, record: JsonValue) -> bool:
        """Show failure incident ``(incident_id, revision)`` with ``record`` at the failure path.

        The record is written inside its top-level key, keeping sibling values. A report of the
        current incident with an older revision is stale: it changes nothing and returns
        ``False`` (as does an ended lifetime).
        """
        edit = report_edit(incident_id, revision, record)
        return await self._owner.submit_edit(self._state, edit)

    def report_failure_nowait(self, incident_id: str, revision: int, record: JsonValue) -> bool:
        """Like :meth:`report_failure`, but raise instead of waiting for queue room."""
        edit = report_edit(incident_id, revision, record)
        return self._owner.submit_edit_nowait(self._state, edit)

    async def resolve_failure(self, incident_id: str, revision: int) -> bool:
        """Clear the failure record if ``(incident_id, revision)`` is still the current incident.

        A late resolution of an older incident or revision changes nothing and returns
        ``False``, so it can never remove a newer incident. Clearing a nested record re-sends
        the whole top-level value without it (siblings kept; emptied objects removed).
        """
        edit = resolve_edit(incident_id, revision)
        return await self._owner.submit_edit(self._state, edit)

    def resolve_failure_nowait(self, incident_id: str, revision: int) -> bool:
        """Like :meth:`resolve_failure`, but raise instead of waiting for queue room."""
        return self._owner.submit_edit_nowait(self._state, resolve_edit(incident_id, revision))


@final
class DomainHandle:
    """Edits inside one top-level ``_meta`` key, by read-modify-write of the known value (R8).

    Each edit reads the current value, changes one path inside it and publishes the whole new
    value as a shallow patch, in one step that no other writer can interleave with. Writers that
    share a key therefore never lose each other's edits, and the handle cannot reach any other
    top-level key.
    """

    __slots__ = ("_key", "_owner", "_state")

    _owner: LifetimeOwner
    _state: LifetimeState
    _key: str

    def __init__(self) -> None:
        raise TypeError("use SessionLifetime.domain(key)")

    @classmethod
    def _create(cls, owner: LifetimeOwner, state: LifetimeState, key: str) -> DomainHandle:
        self = object.__new__(cls)
        self._owner = owner
        self._state = state
        self._key = key
        return self

    @property
    def key(self) -> str:
        return self._key

    def get(self, path: Sequence[str] = ()) -> JsonValue | Omitted:
        """A copy of the known value at ``path`` inside the key, or ``OMITTED`` if absent."""
        steps = check_path(path)
        node = self._state.meta_value(self._key)
        for step in steps:
            if not isinstance(node, dict) or step not in node:
                return OMITTED
            node = node[step]
        return node

    async def set(self, path: Sequence[str], value: object) -> bool:
        """Set ``value`` at ``path`` (creating objects on the way); ``path=()`` sets the key.

        Raises :class:`~agent_meta.MetaPathError` if a step is not an object. Returns ``False``
        only if the lifetime has ended.
        """
        edit = domain_edit(self._key, path, value)
        return await self._owner.submit_edit(self._state, edit)

    def set_nowait(self, path: Sequence[str], value: object) -> bool:
        """Like :meth:`set`, but raise instead of waiting for queue room."""
        edit = domain_edit(self._key, path, value)
        return self._owner.submit_edit_nowait(self._state, edit)

    async def remove(self, path: Sequence[str]) -> bool:
        """Remove the value at ``path``; ``path=()`` removes the whole key (``{key: null}``).

        Removing something that is not there changes and sends nothing. Returns ``False`` only
        if the lifetime has ended.
        """
        edit = domain_edit(self._key, path, OMITTED)
        return await self._owner.submit_edit(self._state, edit)

    def remove_nowait(self, path: Sequence[str]) -> bool:
        """Like :meth:`remove`, but raise instead of waiting for queue room."""
        edit = domain_edit(self._key, path, OMITTED)
        return self._owner.submit_edit_nowait(self._state, edit)


# -- edits, built (validated, values copied) before they reach the owner ---------------------
# The handles above and the thread-safe facade (``_threadsafe.py``) build edits with these, so a
# call from a worker thread validates and copies its values in that thread, as a call on the
# owner's loop does in its task.


def publication(
    owner: LifetimeOwner,
    title: str | None | Omitted,
    updated_at: str | None | Omitted,
    meta: Mapping[str, object] | None | Omitted,
    notification_meta: Mapping[str, object] | None,
) -> EncodedUpdate:
    """A publication, encoded for ``owner``'s protocol version (R1, R9, R12)."""
    # The version's timestamp rule matters only when there is a timestamp (the common
    # publication has none, and pays for no lookup).
    offset_timestamps = updated_at is not OMITTED and owner.offset_timestamps
    return encode_update(
        title=title,
        updated_at=updated_at,
        meta=meta,
        notification_meta=notification_meta,
        offset_timestamps=offset_timestamps,
    )


# For a publisher that validated and encoded its publications itself (``agent-meta own``
# composes a child's updates: agent_meta.sansio.inbound._batch), the same path without encoding
# again.


def encoded_headroom(lifetime: SessionLifetime) -> int:
    """The lifetime's :func:`~agent_meta.sansio.queue._state.headroom` now."""
    return headroom(lifetime._state, lifetime._owner.max_frame_bytes)


async def publish_encoded(lifetime: SessionLifetime, update: EncodedUpdate) -> bool:
    """:meth:`SessionLifetime.publish` of an update :func:`publication` encoded."""
    return await lifetime._owner.submit_edit(lifetime._state, update)


def publish_encoded_nowait(lifetime: SessionLifetime, update: EncodedUpdate) -> bool:
    """:meth:`SessionLifetime.publish_nowait` of an update :func:`publication` encoded."""
    return lifetime._owner.submit_edit_nowait(lifetime._state, update)


def client_title_edit(owner: LifetimeOwner, title: object, *, confirm: bool = True) -> ClientTitle:
    """The client set the title to ``title`` (a str, R12, R13)."""
    if not isinstance(title, str):
        raise MetaValueError(f"must be a str, not a {type(title).__name__}", path="title")
    return ClientTitle(publication(owner, title, OMITTED, OMITTED, None), confirm)


def check_domain_key(key: object) -> str:
    """A domain key is a str (R8, R12)."""
    if not isinstance(key, str):
        raise MetaValueError(f"a domain key must be a str, not a {type(key).__name__}", path="key")
    return key


def domain_edit(key: str, path: Sequence[str], value: object) -> DomainEdit:
    """Set ``value`` at ``path`` inside ``key``; ``OMITTED`` removes it (R8)."""
    steps = check_path(path)
    return DomainEdit(key, steps, OMITTED if value is OMITTED else json_copy(value, path="value"))


def report_edit(incident_id: str, revision: int, record: object) -> ReportFailure:
    """Report failure incident ``(incident_id, revision)`` with ``record`` (R7)."""
    return ReportFailure(_incident(incident_id, revision), json_copy(record, path="record"))


def resolve_edit(incident_id: str, revision: int) -> ResolveFailure:
    """Resolve failure incident ``(incident_id, revision)`` if it is still current (R7)."""
    return ResolveFailure(_incident(incident_id, revision))


def _incident(incident_id: object, revision: object) -> FailureIncident:
    if not isinstance(incident_id, str):
        raise MetaValueError("must be a str", path="incident_id")
    if not isinstance(revision, int) or isinstance(revision, bool):
        raise MetaValueError("must be an int", path="revision")
    return FailureIncident(incident_id, revision)
