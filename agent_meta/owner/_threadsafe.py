"""Calls into an asyncio owner from other threads: :class:`ThreadsafeOwner`.

An agent whose tools run in worker threads (hermes-agent does, and hands results to its loop
with ``loop.call_soon_threadsafe``) cannot call the owner directly: the owner belongs to its
event loop. The facade takes the call in the worker thread -- validating and copying its values
there, so bad input raises at the call site and later mutation of the caller's objects changes
nothing (R1, R12) -- and appends it to one FIFO that a single task on the owner's loop runs, one
call at a time, awaiting each. The worker gets a :class:`concurrent.futures.Future`.

Order: calls from one thread run in the order that thread made them. Calls from different
threads run in the order they were appended to the FIFO (under a lock), which is the order they
reached the owner's loop; that order is then the owner's FIFO order (R2). A call that must wait
for queue room holds back the calls behind it, so the order never changes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, TypeVar, final

from ..core._errors import OwnerClosedError
from ..core._jsonrpc import session_of
from ..core._sentinel import OMITTED, Omitted
from ..sansio._frames import build_notification
from ._lifetime import (
    SessionLifetime,
    check_domain_key,
    domain_edit,
    publication,
    report_edit,
    resolve_edit,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ..core._json import JsonValue
    from ..sansio.queue._edits import Edit
    from ._base import OwnerBase

__all__ = ["ThreadsafeOwner"]

T = TypeVar("T")

_Call = tuple["Callable[[], Awaitable[Any]]", "concurrent.futures.Future[Any]"]


@final
class ThreadsafeOwner:
    """An asyncio owner's calls, for threads other than its loop's (``owner.threadsafe``).

    Each call returns a :class:`concurrent.futures.Future` that resolves once the call has
    taken effect on the owner's loop, with what the async call returns (``False`` for a fenced
    lifetime, R6) or the error it raises. Block on it with ``future.result(timeout)``; never do
    that on the owner's own loop thread, which would wait for itself. Cancelling the future
    before the call has started means it never runs.

    ``session`` is a session id (the lifetime open for it when the call runs; none is an
    :class:`~agent_meta.UnknownSessionError`) or a :class:`~agent_meta.SessionLifetime`
    (fenced once it has ended). Values are validated and copied in the calling thread, so
    :class:`~agent_meta.MetaValueError` (and ``MetaPathError``) is raised by the call itself.
    Once the owner has stopped, every call raises :class:`~agent_meta.OwnerClosedError`; calls
    still waiting then fail with it. Calls made before the ``async with`` block ends are run
    before the owner drains.
    """

    def __init__(self, owner: OwnerBase, loop: asyncio.AbstractEventLoop) -> None:
        self._owner = owner
        self._loop = loop
        self._lock = threading.Lock()
        self._calls: collections.deque[_Call] = collections.deque()
        self._closed = False
        self._signalled = False  # a wake-up is on its way, or the server has yet to look
        self._wakeup: asyncio.Future[None] | None = None

    # -- the calls -----------------------------------------------------------------------
    def publish(
        self,
        session: SessionLifetime | str,
        *,
        title: str | None | Omitted = OMITTED,
        updated_at: str | None | Omitted = OMITTED,
        meta: Mapping[str, object] | None | Omitted = OMITTED,
        notification_meta: Mapping[str, object] | None = None,
    ) -> concurrent.futures.Future[bool]:
        """:meth:`SessionLifetime.publish <agent_meta.SessionLifetime.publish>` from a thread."""
        edit = publication(self._owner, title, updated_at, meta, notification_meta)
        return self._edit(session, edit)

    def resync(self, session: SessionLifetime | str) -> concurrent.futures.Future[bool]:
        """:meth:`SessionLifetime.resync <agent_meta.SessionLifetime.resync>` from a thread."""

        async def run() -> bool:
            return self._lifetime(session).resync()

        return self._call(run)

    def domain_set(
        self, session: SessionLifetime | str, key: str, path: Sequence[str], value: object
    ) -> concurrent.futures.Future[bool]:
        """``lifetime.domain(key).set(path, value)`` from a thread (R8)."""
        return self._edit(session, domain_edit(check_domain_key(key), path, value))

    def domain_remove(
        self, session: SessionLifetime | str, key: str, path: Sequence[str]
    ) -> concurrent.futures.Future[bool]:
        """``lifetime.domain(key).remove(path)`` from a thread (R8)."""
        return self._edit(session, domain_edit(check_domain_key(key), path, OMITTED))

    def report_failure(
        self, session: SessionLifetime | str, incident_id: str, revision: int, record: JsonValue
    ) -> concurrent.futures.Future[bool]:
        """:meth:`SessionLifetime.report_failure <agent_meta.SessionLifetime.report_failure>`
        from a thread (R7)."""
        return self._edit(session, report_edit(incident_id, revision, record))

    def resolve_failure(
        self, session: SessionLifetime | str, incident_id: str, revision: int
    ) -> concurrent.futures.Future[bool]:
        """:meth:`SessionLifetime.resolve_failure <agent_meta.SessionLifetime.resolve_failure>`
        from a thread (R7)."""
        return self._edit(session, resolve_edit(incident_id, revision))

    def send_notification(
        self, method: str, params: Mapping[str, object] | None = None
    ) -> concurrent.futures.Future[bool]:
        """``owner.send_notification(method, params)`` from a thread: ``False`` if
        ``params.sessionId`` names a session whose lifetime has ended (R6)."""
        frame = build_notification(method, params)
        session_id = session_of(params)
        return self._call(lambda: self._owner.send_encoded(frame, session_id))

    # -- plumbing ------------------------------------------------------------------------
    def _edit(self, session: SessionLifetime | str, edit: Edit) -> concurrent.futures.Future[bool]:
        async def run() -> bool:
            return await self._owner.submit_edit(self._lifetime(session)._state, edit)

        return self._call(run)

    def _lifetime(self, session: SessionLifetime | str) -> SessionLifetime:
        if isinstance(session, SessionLifetime):
            if session._owner is not self._owner:
                raise ValueError("that lifetime belongs to another owner")
            return session
        return self._owner.lifetime(session)

    def _call(self, run: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Append one call to the FIFO and make sure the server on the loop will see it."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise OwnerClosedError("the owner has stopped")
            self._calls.append((run, future))
            if self._signalled:
                return future
            self._signalled = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: nothing will ever run the calls
            with self._lock:
                self._closed = True
            self._fail_pending()
            raise OwnerClosedError("the owner's event loop is closed") from None
        return future

    def _wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    def _take(self) -> _Call | None:
        with self._lock:
            if self._calls:
                return self._calls.popleft()
            self._signalled = False
            return None

    async def _serve(self) -> None:
        """Run the calls in FIFO order until :meth:`_close`; the owner runs this as a task."""
        try:
            while True:
                call = self._take()
                if call is not None:
                    await _run(*call)
                elif self._closed:
                    return
                else:
                    self._wakeup = self._loop.create_future()
                    await self._wakeup
        finally:
            self._abort()

    def _close(self) -> None:
        """Refuse new calls; :meth:`_serve` runs the calls already made, then returns. Call it
        on the owner's loop."""
        with self._lock:
            self._closed = True
        self._wake()

    def _abort(self) -> None:
        """Refuse new calls and fail those not run yet with :class:`OwnerClosedError`. Call it
        on the owner's loop."""
        self._close()
        self._fail_pending()

    def _fail_pending(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, collections.deque()
        for _, future in calls:
            if future.set_running_or_notify_cancel():
                future.set_exception(OwnerClosedError("the owner stopped before this call ran"))


async def _run(run: Callable[[], Awaitable[T]], future: concurrent.futures.Future[T]) -> None:
    if not future.set_running_or_notify_cancel():
        return  # the caller cancelled it before it started
    try:
        result = await run()
    except asyncio.CancelledError:
        future.set_exception(OwnerClosedError("the owner stopped while this call was waiting"))
        raise
    except BaseException as exc:
        future.set_exception(exc)
        if not isinstance(exc, Exception):
            raise
    else:
        future.set_result(result)
