"""``agent-meta`` whose lifetime store ends the process right after its Nth write, for the crash
tests (``integration/test_restart.py``): ``python -m tests.support.crash_after_persist N agent
--store FILE ...`` installs the crash into the stores, then runs the real ``agent-meta`` main
with the arguments after ``N``.

The Nth store write returns, and the process ends at once (``os._exit(137)``, like ``kill -9``),
before the frame that write protects is written: the store is one publication ahead of the
client. Only the lifetime writes count (``write``, the owner's); the history's statements on the
same file do not.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from agent_meta import PostgresStore, SQLiteStore
from agent_meta.cli._main import main

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_meta import StoredLifetime

__all__ = ["crashing_command", "install"]

EXIT_STATUS = 137
"""What a ``kill -9`` gives: the status the crash ends the process with."""


def crashing_command(writes: int) -> list[str]:
    """The interpreter's arguments that run ``agent-meta`` with the crash after ``writes``
    store writes (in place of ``-m agent_meta``)."""
    return ["-m", __name__, str(writes)]


def install(writes: int) -> None:
    """Make every lifetime store of this process end it after ``writes`` writes in all."""
    left = writes

    def crashing(original: Any) -> Any:
        async def write(
            self: Any,
            saves: Sequence[StoredLifetime],
            deletes: Sequence[tuple[str, int]],
            *,
            holder: str,
        ) -> frozenset[str]:
            nonlocal left
            stale: frozenset[str] = await original(self, saves, deletes, holder=holder)
            left -= 1
            if left <= 0:
                sys.stderr.write("agent-meta: crash_after_persist: crashing after a store write\n")
                sys.stderr.flush()
                os._exit(EXIT_STATUS)
            return stale

        return write

    for kind in (SQLiteStore, PostgresStore):
        kind.write = crashing(kind.write)  # type: ignore[method-assign]


if __name__ == "__main__":
    install(int(sys.argv[1], 10))
    sys.exit(main(sys.argv[2:]))
