"""The owner's options: one frozen object, validated once, shared by every driver.

An agent builds an :class:`OwnerOptions` where it starts (its ``main``, the CLI) and passes it
down unchanged: to :func:`~agent_meta.open_owner`, :func:`~agent_meta.serve_agent` or the
asyncio driver. A misspelt option is then a ``TypeError`` at construction (and a mypy error),
and a bad value a ``ValueError`` naming the option, before anything runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Final, Literal

from ._modes import V1_META_MODES, V1MetaMode

__all__ = ["DEFAULT_FAILURE_PATH", "OwnerOptions", "RetryPolicy"]

DEFAULT_FAILURE_PATH: Final[tuple[str, ...]] = ("agent-meta", "failure")
"""Where failure records live by default: ``_meta["agent-meta"]["failure"]``."""


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value!r}")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often a frame that the transport *proves* unsent is tried again (R11).

    Only :class:`~agent_meta.FrameNotSentError` is retried: any other failure may have left
    part of the frame on the wire. The waits grow exponentially from ``initial_backoff`` to at
    most ``max_backoff`` seconds (the drivers run them with tenacity).
    """

    retries: int = 4
    """Attempts after the first failed write; 0 disables retrying."""
    initial_backoff: float = 0.05
    max_backoff: float = 1.0

    def __post_init__(self) -> None:
        _check_int("retries", self.retries, minimum=0)
        for name in ("initial_backoff", "max_backoff"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise TypeError(f"RetryPolicy.{name} must be a number, not {value!r}")
            if not 0 <= value < math.inf:
                raise ValueError(f"RetryPolicy.{name} must be finite and >= 0, not {value!r}")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OwnerOptions:
    """Everything that configures an owner (``docs/owner.md`` explains each rule).

    Build one with keywords; :func:`dataclasses.replace` derives a variant (the connection does
    that to set the version ``initialize`` negotiated).
    """

    protocol_version: Literal[1, 2] = 2
    """The ACP version frames are rendered for; the connection sets it at ``initialize``."""
    v1_meta_mode: V1MetaMode = "merged"
    """On v1: ``"merged"`` sends the complete object on every frame, ``"passthrough"`` sends
    patches as published and no resyncs (R10)."""
    failure_path: Sequence[str] = DEFAULT_FAILURE_PATH
    """Where failure records live in ``_meta``: a top-level key, then keys inside it (R7).
    Stored as a tuple."""
    max_frame_bytes: int = 1 << 20
    """The largest frame, and the largest session info one lifetime may hold (R12)."""
    coalesce: bool = True
    """Merge a session's queued updates while the writer is behind (R3). ``False``: every
    update is its own frame and producers wait for queue room."""
    capacity: int = 256
    """Frames that cannot be merged that may wait before producers block."""
    retry: RetryPolicy = RetryPolicy()
    """Retries of frames the transport proved unsent (R11)."""
    drain_timeout: float = math.inf
    """On a normal exit, how long the owner waits for queued frames to be written."""

    def __post_init__(self) -> None:
        if self.protocol_version not in (1, 2) or isinstance(self.protocol_version, bool):
            raise ValueError(f"protocol_version must be 1 or 2, not {self.protocol_version!r}")
        if self.v1_meta_mode not in V1_META_MODES:
            raise ValueError(
                f"v1_meta_mode must be 'merged' or 'passthrough', not {self.v1_meta_mode!r}"
            )
        object.__setattr__(self, "failure_path", _check_failure_path(self.failure_path))
        _check_int("max_frame_bytes", self.max_frame_bytes, minimum=256)
        _check_int("capacity", self.capacity, minimum=1)
        if not isinstance(self.coalesce, bool):
            raise TypeError(f"coalesce must be a bool, not {self.coalesce!r}")
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, not {self.retry!r}")
        timeout = self.drain_timeout
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0:
            raise ValueError(f"drain_timeout must be a number >= 0, not {timeout!r}")


def _check_failure_path(path: object) -> tuple[str, ...]:
    if isinstance(path, str) or not isinstance(path, Sequence):
        raise TypeError(
            f"failure_path must be a sequence of str keys, not {path!r} (use ('a', 'b'))"
        )
    steps = tuple(path)
    if not steps:
        raise ValueError("failure_path needs at least one key")
    for step in steps:
        if not isinstance(step, str):
            raise TypeError(f"failure_path keys must be str, not {step!r}")
    return steps
