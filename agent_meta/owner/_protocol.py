"""What every owner offers, whatever its runtime: the :class:`Owner` protocol.

Both drivers satisfy it (:class:`~agent_meta.MetaOwner` on trio,
:class:`~agent_meta.AsyncioMetaOwner` on asyncio), so code that only queues frames and keeps
lifetimes can be written once, against ``Owner``. The ``*_nowait`` calls raise the driver's
"would block" exception (``trio.WouldBlock``, ``asyncio.QueueFull``) where the ``async`` ones
would wait; a cancelled ``async`` call has queued its whole frame or nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..core._session_info import SessionInfo, SessionInfoPatch
    from ..sansio._options import OwnerOptions
    from ._lifetime import SessionLifetime
    from ._statistics import OwnerStatistics

__all__ = ["Owner"]


@runtime_checkable
class Owner(Protocol):
    """The serialized send boundary of one agent connection (see ``docs/owner.md``)."""

    @property
    def options(self) -> OwnerOptions:
        """The options the owner was opened with."""
        ...

    @property
    def protocol_version(self) -> int:
        """The ACP protocol version frames are rendered for (1 or 2)."""
        ...

    @property
    def max_frame_bytes(self) -> int:
        """The longest frame the owner writes."""
        ...

    def set_protocol_version(self, version: int) -> None:
        """Set the version ``initialize`` negotiated; only before the first lifetime opens."""
        ...

    def open_lifetime(
        self, session_id: str, *, seed: SessionInfoPatch | None = None
    ) -> SessionLifetime:
        """Start a new lifetime of ``session_id``, nothing known."""
        ...

    async def claim_lifetime(
        self, session_id: str, *, seed: SessionInfoPatch | None = None
    ) -> SessionLifetime | None:
        """The lifetime of ``session_id``, open here or taken over from the store."""
        ...

    @property
    def holder(self) -> str:
        """This owner's name in the store."""
        ...

    def lifetime(self, session_id: str) -> SessionLifetime:
        """The open lifetime of ``session_id``."""
        ...

    def has_lifetime(self, session_id: str) -> bool:
        """Whether ``session_id`` has an open lifetime."""
        ...

    def lifetime_ids(self) -> list[str]:
        """The session ids of all open lifetimes."""
        ...

    async def stored_snapshot(self, session_id: str) -> SessionInfo | None:
        """The known state the store holds for ``session_id``, without taking it over."""
        ...

    def close_lifetime(self, session_id: str) -> None:
        """End the lifetime of ``session_id`` (R6): what it queued before is still written,
        in order; nothing of it is queued after."""
        ...

    def statistics(self) -> OwnerStatistics:
        """Counters and queue sizes."""
        ...

    async def send_notification(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Queue a notification; ``False`` if its session's lifetime has ended."""
        ...

    def send_notification_nowait(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """:meth:`send_notification` without waiting for queue room."""
        ...

    async def send_response(
        self, request_id: int | str | None, *, result: object = None, error: object = None
    ) -> None:
        """Queue the response (``result``, or ``error``) to a request."""
        ...

    def send_response_nowait(
        self, request_id: int | str | None, *, result: object = None, error: object = None
    ) -> None:
        """:meth:`send_response` without waiting for queue room."""
        ...

    async def send_response_batch(self, responses: Sequence[Mapping[str, object]]) -> None:
        """Queue the answer to a JSON-RPC batch, as one line."""
        ...

    async def send_request(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """Queue a request to the client; ``False`` if its session's lifetime has ended."""
        ...

    def send_request_nowait(
        self, request_id: int | str, method: str, params: Mapping[str, object] | None = None
    ) -> bool:
        """:meth:`send_request` without waiting for queue room."""
        ...

    async def wait_flushed(self) -> None:
        """Wait until everything queued before the call is written (and stored)."""
        ...
