"""Retries of frames the transport proves unsent (R11), with tenacity, for every driver.

The policy is the same under trio and asyncio; only the function that sleeps between attempts
is the runtime's own, so each driver passes its ``sleep``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._errors import FrameNotSentError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import tenacity

    from ..sansio._options import RetryPolicy

__all__ = ["tenacity_retry"]


def tenacity_retry(
    policy: RetryPolicy, sleep: Callable[[float], Awaitable[None]]
) -> tenacity.AsyncRetrying:
    """The tenacity policy behind a :class:`~agent_meta.RetryPolicy`: it retries only
    :class:`~agent_meta.FrameNotSentError`, sleeping with the driver's ``sleep``. tenacity is
    imported here, at the first retry: not on every owner's start (``agent-meta own``'s first
    answer waits for the owner's imports, docs/performance.md)."""
    import tenacity

    return tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.retries),
        wait=tenacity.wait_exponential(multiplier=policy.initial_backoff, max=policy.max_backoff),
        retry=tenacity.retry_if_exception_type(FrameNotSentError),
        reraise=True,
        sleep=sleep,
    )
