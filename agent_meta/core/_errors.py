"""The exceptions agent_meta raises.

Every error is an :class:`AgentMetaError`; errors about bad values are also ``ValueError`` and
errors about missing sessions are also ``LookupError``, so generic handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "SHOWN_ID_LENGTH",
    "AgentMetaError",
    "ConnectionClosedError",
    "FrameLostError",
    "FrameNotSentError",
    "FrameTooLargeError",
    "LifetimeTakenOverError",
    "MetaPathError",
    "MetaValueError",
    "OwnerClosedError",
    "SessionExistsError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "TransportBrokenError",
    "UnknownSessionError",
    "shown_id",
]

SHOWN_ID_LENGTH = 64
"""How many characters of a session id an error text quotes (a client may send any length)."""


def shown_id(session_id: object) -> str:
    """A session id quoted for an error text: its ``repr``, cut to its first
    :data:`SHOWN_ID_LENGTH` characters (then followed by ``…`` and its length)."""
    if isinstance(session_id, str) and len(session_id) > SHOWN_ID_LENGTH:
        return f"{session_id[:SHOWN_ID_LENGTH]!r}… ({len(session_id)} characters)"
    return repr(session_id)


class AgentMetaError(Exception):
    """Base class of every error agent_meta raises on purpose."""


class MetaValueError(AgentMetaError, ValueError):
    """A value is not valid metadata (not JSON, non-string key, NaN, a cycle, wrong shape).

    ``path`` names where in the value the problem is, for example ``_meta["a"][2]``. Nothing
    was stored or sent when this is raised.
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message


class MetaPathError(MetaValueError):
    """A domain path cannot be followed: a step is not an object, or a key is not a string."""


class FrameTooLargeError(AgentMetaError, ValueError):
    """The frame, or the session state it would create, would exceed the owner's frame limit."""


class UnknownSessionError(AgentMetaError, LookupError):
    """No open lifetime for this session id (never opened, or already closed)."""


class LifetimeTakenOverError(UnknownSessionError):
    """Another holder (a connection, process or machine that resumed the session) took this
    lifetime over: the publication was not stored, and nothing more of the session is written
    by this owner. The lifetime is no longer open here (hence an :class:`UnknownSessionError`)."""


class SessionExistsError(AgentMetaError, RuntimeError):
    """A lifetime for this session id is already open; close it before opening a new one."""


class OwnerClosedError(AgentMetaError, RuntimeError):
    """The owner has stopped (closed, or its transport broke) and accepts no more frames."""


class TransportBrokenError(AgentMetaError, RuntimeError):
    """The transport failed in a way that may have left a partial frame on the wire.

    The byte stream can no longer be trusted, so the owner stops; ``__cause__`` holds the
    original error.
    """


class StoreError(AgentMetaError, OSError):
    """A lifetime store cannot be opened, read or written.

    ``location`` names the store (a file path for SQLite) and ``reason`` the cause. When a
    write fails, the owner stops before writing the frame that depended on it: nothing whose
    state is not stored reaches the client.
    """

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"lifetime store {location}: {reason}")
        self.location = location
        self.reason = reason


STORE_FAILED_MESSAGE = "the lifetime store failed; see the agent's log"
"""What a client is told when the lifetime store fails on its request: the details (the
store's location, the database's own message) go to the agent's log only."""


class StoreLockedError(StoreError):
    """Another process (or connection) held the store's write lock, or a row this owner needs,
    past the store's lock timeout."""


class StoreSchemaError(StoreError):
    """The file is not a lifetime store, or was written by a newer schema version."""


class StoreCorruptError(StoreError):
    """The file, or a stored record, is damaged; nothing was loaded from it."""


class ConnectionClosedError(AgentMetaError):
    """The connection's input ended (or it shut down) before the client answered a request,
    so no answer can arrive any more."""


class FrameNotSentError(AgentMetaError):
    """Raised by a transport that knows nothing of the frame was written (safe to retry)."""


class FrameLostError(AgentMetaError):
    """Raised by a transport whose frame may be lost, with the stream itself still intact."""
