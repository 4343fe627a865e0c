"""Where ``agent-meta own`` says what it did not forward: stderr, for a person, and ``--log``.

stderr is written from a thread (:class:`~agent_meta._stderr.Reporter`), so a client that
never reads it cannot stall the forwarding, and shows the first :data:`SHOWN` reports of each
source; the log, when given, gets every report with its time. At the end, a summary counts
what was not forwarded.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import IO, TYPE_CHECKING, Final, final

from .._stderr import Reporter

if TYPE_CHECKING:
    from ._relay import RelayStatistics

__all__ = ["SHOWN", "Reports"]

SHOWN: Final = 20
"""Reports of one source (the client, the agent, the store) shown on stderr; the rest are
counted there, and all are in the log."""

_NOT_FORWARDED: Final = (
    ("bad_child_lines", "lines of the agent that are not JSON or too long"),
    ("malformed_updates", "session_info_update frames of the agent that are no session info"),
    ("stale", "stale session info replayed after a load or resume response"),
    ("fenced_requests", "requests of the agent about a closed session"),
    ("refused_client_lines", "lines of the client answered with an error"),
    ("unanswered", "requests of the client the agent exited without answering"),
)


@final
class Reports:
    """The reports of one ``agent-meta own`` run."""

    def __init__(self, stderr: IO[str], log: IO[str] | None, *, name: str) -> None:
        self._reporter = Reporter(stderr, name)
        self._log = log
        self._shown: collections.Counter[str] = collections.Counter()

    def __call__(self, source: str, text: str) -> None:
        """Report ``text`` about a line of ``source`` (``client``, ``agent``, ``store``)."""
        self._shown[source] += 1
        if self._shown[source] <= SHOWN:
            self._reporter.line(f"{source}: {text}")
            if self._shown[source] == SHOWN:
                self._reporter.line(f"{source}: further reports counted only (see --log)")
        if self._log is not None:
            import datetime  # with --log only: not on the path to the first answer

            moment = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
            self._log.write(f"{moment.replace('+00:00', 'Z')} {source}: {text}\n")
            self._log.flush()

    def say(self, text: str) -> None:
        """A line for a person (how the run ended), on stderr and in the log."""
        self._reporter.line(text)
        if self._log is not None:
            self._log.write(f"{text}\n")
            self._log.flush()

    def summary(self, statistics: RelayStatistics, fenced: int) -> None:
        """Count what was not forwarded (``fenced``: the owner's frames of closed sessions)."""
        counts = dataclasses.asdict(statistics)
        parts = [f"{counts[field]} {what}" for field, what in _NOT_FORWARDED if counts[field]]
        if fenced:
            parts.append(f"{fenced} frames of closed sessions")
        if parts:
            self.say("not forwarded: " + "; ".join(parts))

    def close(self) -> None:
        self._reporter.close()
