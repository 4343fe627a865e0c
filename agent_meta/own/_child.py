"""The child agent of ``agent-meta own``: its process, its pipes, its exit.

:meth:`Child.start` runs before trio is imported (that is the point: the child starts up
while we do), so it uses :mod:`subprocess` and two plain pipes; the trio side wraps our ends
of the pipes in ``FdStream`` later. The child's stderr is ours.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import TYPE_CHECKING, final

from .._agent_command import exit_status

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Child", "ChildStartError"]


class ChildStartError(Exception):
    """The agent command cannot be started; ``status`` is the exit status to end with (127: not
    found, 126: found but not runnable), as a shell would."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@final
class Child:
    """A running agent: the write end of its stdin, the read end of its stdout, its process."""

    __slots__ = ("_process", "stdin_fd", "stdout_fd")

    def __init__(self, process: subprocess.Popen[bytes], stdin_fd: int, stdout_fd: int) -> None:
        self._process = process
        self.stdin_fd = stdin_fd
        """Our end of the child's stdin (the trio side takes it over)."""
        self.stdout_fd = stdout_fd
        """Our end of the child's stdout."""

    @classmethod
    def start(cls, command: Sequence[str]) -> Child:
        """Start ``command`` with pipes for stdin and stdout (stderr is ours). Raises
        :class:`ChildStartError` when it cannot be started."""
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        try:
            process = subprocess.Popen(list(command), stdin=stdin_read, stdout=stdout_write)
        except FileNotFoundError as exc:
            _close(stdin_write, stdout_read)
            raise ChildStartError(str(exc), 127) from None
        except OSError as exc:  # PermissionError, ENOEXEC ...
            _close(stdin_write, stdout_read)
            raise ChildStartError(str(exc), 126) from None
        finally:
            _close(stdin_read, stdout_write)  # the child's ends, now the child's alone
        return cls(process, stdin_write, stdout_read)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def running(self) -> bool:
        """Whether the child has not been seen to exit yet."""
        return self._process.poll() is None

    def status(self) -> int | None:
        """The child's exit status as a shell reports it (128 + N after signal N), or ``None``
        while it runs."""
        code = self._process.poll()
        return None if code is None else exit_status(code)

    def send_signal(self, signum: int) -> None:
        """Pass ``signum`` on to the child, unless it has exited."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the child, unless it has exited."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    def wait_for(self, timeout: float) -> int | None:
        """Block until the child exits, at most ``timeout`` seconds (outside trio, at the very
        end); its status, or ``None`` if it still runs."""
        try:
            return exit_status(self._process.wait(timeout))
        except subprocess.TimeoutExpired:
            return None

    async def wait(self) -> int:
        """Wait until the child exits; return its status as a shell reports it. Cancelling the
        wait leaves the child as it is."""
        import trio

        process = self._process
        if process.poll() is None:
            try:
                pidfd = os.pidfd_open(process.pid)
            except (AttributeError, OSError):  # not Linux 5.3+: a thread waits instead
                await trio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
            else:
                try:
                    await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
        return exit_status(process.wait())


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
