"""Lines for a person on stderr, written from a thread, so that a stderr nobody reads never
stalls the forwarding of a tool that sits between a client and an agent (``proxy``, ``own``)."""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import IO

__all__ = ["Reporter"]


class Reporter:
    """Writes lines to a stream from a thread of its own.

    A client may pipe the agent's stderr and never read it (the official Python SDK's default);
    the agent's own lines would block the agent anyway, but a tool's lines must not block the
    forwarding. Lines beyond ``limit`` waiting are dropped, and counted at the end (as that many
    ``noun``). Each line starts with ``name``.
    """

    def __init__(
        self, stream: IO[str], name: str, *, limit: int = 1000, noun: str = "lines"
    ) -> None:
        self._stream = stream
        self._name = name
        self._noun = noun
        self._lines: queue.Queue[str | None] = queue.Queue(limit)
        self.dropped = 0
        self._thread = threading.Thread(target=self._write, name=f"{name} stderr")
        self._thread.daemon = True
        self._thread.start()

    def line(self, text: str) -> None:
        """Queue one line (without its newline); drop it when too many are waiting."""
        try:
            self._lines.put_nowait(f"{self._name}: {text}\n")
        except queue.Full:
            self.dropped += 1

    def close(self, within: float = 1.0) -> None:
        """Let the thread write what is queued, for at most ``within`` seconds."""
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            with contextlib.suppress(queue.Full):
                self._lines.put(
                    f"{self._name}: {dropped} {self._noun} not shown: stderr was not read "
                    "(see --log for all)\n",
                    timeout=within,
                )
        with contextlib.suppress(queue.Full):
            self._lines.put(None, timeout=within)
        self._thread.join(within)

    def _write(self) -> None:
        while (text := self._lines.get()) is not None:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):  # a closed or broken stderr: nothing more to say
                return
