"""The errors an owner stops or refuses with, built in one place for both drivers and both
connections."""

from __future__ import annotations

from ..core._errors import (
    LifetimeTakenOverError,
    OwnerClosedError,
    StoreError,
    TransportBrokenError,
    shown_id,
)

__all__ = [
    "broken_transport",
    "only_broken",
    "store_failed",
    "taken_over_error",
    "unwritten_error",
]


def taken_over_error(session_id: str) -> LifetimeTakenOverError:
    """What a publisher of a lifetime another holder took over is told."""
    return LifetimeTakenOverError(
        f"session {shown_id(session_id)} was taken over by another holder (a load or resume "
        "elsewhere): this publication was not stored, and nothing more of it is written here"
    )


def broken_transport(exc: BaseException) -> TransportBrokenError:
    """The error that stops the owner when a write failed part-way (any failure other than
    the two the transport seam defines as safe, see :mod:`agent_meta.owner._transport`)."""
    if isinstance(exc, TransportBrokenError):
        return exc
    error = TransportBrokenError(
        f"writing a frame failed part-way ({type(exc).__name__}: {exc}); the stream can "
        "no longer be trusted"
    )
    error.__cause__ = exc
    return error


def store_failed(exc: Exception, location: str) -> StoreError:
    """A call of the store at ``location`` failed with ``exc``: the error that stops the owner
    (R11), or that a claim or a read raises."""
    if isinstance(exc, StoreError):
        return exc
    error = StoreError(location, f"saving lifetimes failed: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def unwritten_error(when: str) -> TransportBrokenError:
    """The error of a connection that stopped with accepted frames still unwritten ``when``
    (a client that stopped reading): both connections raise it as they end."""
    return TransportBrokenError(
        f"the output stalled: frames accepted before the end were not all written {when} (has"
        " the client stopped reading? the last line written may be cut short)"
    )


def only_broken(
    group: BaseExceptionGroup[BaseException], cancelled: type[BaseException]
) -> TransportBrokenError | StoreError | None:
    """The TransportBrokenError or StoreError that stopped an owner, if it is all ``group``
    holds besides the runtime's ``cancelled`` exceptions: what the driver's ``async with``
    block raises instead of the group."""
    found: list[TransportBrokenError | StoreError] = []
    leaves: list[BaseException] = [group]
    while leaves:
        exc = leaves.pop()
        if isinstance(exc, BaseExceptionGroup):
            leaves.extend(exc.exceptions)
        elif isinstance(exc, TransportBrokenError | StoreError):
            found.append(exc)
        elif isinstance(exc, OwnerClosedError) and isinstance(
            exc.__cause__, TransportBrokenError | StoreError
        ):
            found.append(exc.__cause__)  # a waiter that learned of the break first
        elif not isinstance(exc, cancelled):
            return None
    return found[0] if found else None
