"""``agent-meta proxy``: a transparent ACP proxy that shows what the client ends up holding.

Placed between any client and any stdio agent command, it forwards every byte unchanged, in
order, both ways: each chunk goes on as soon as it is read, so no complete line is ever held
back, and malformed lines and an unterminated last line pass like any other bytes. A copy of
each line goes to a :class:`~agent_meta.tools._watch.Watcher`, which folds the session-info
updates per session and reports the rules the agent breaks, on stderr and (``--log``) in an
NDJSON log with one record per frame that ``agent-meta timeline`` renders.

Lines are staged for the watcher in the order they were read, before they are forwarded, and
watched after: a reply can never be watched before the request it answers, and watching costs
the forwarding nothing. End of input is passed on (the client closing our stdin closes the
agent's), the agent's stderr is ours, and the proxy exits with the agent's status.
"""

from __future__ import annotations

import collections
import datetime
import json
import os
import subprocess
import sys
import time
from typing import IO, TYPE_CHECKING, Final

import trio

from .._agent_command import add_agent_command, exit_status
from .._stderr import Reporter
from ..sansio._lines import LineSplitter
from ._findings import WATCHED_LINE_BYTES, Frame, Source, take_lines
from ._watch import Watcher

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["add_parser", "proxy", "run"]

CHUNK: Final = 1 << 16
"""The most bytes read at once from either side."""


class _Tap:
    """Lines read but not watched yet, from both directions, in the order they were read."""

    def __init__(self, watcher: Watcher, log: IO[str] | None, report: Reporter) -> None:
        self.watcher = watcher
        self._log = log
        self._report = report
        self._pending: collections.deque[tuple[Source, bytes, float, bool]] = collections.deque()
        self._started = time.monotonic()
        self._wall = time.time()
        self._stamped = (-1.0, "")

    def stage(self, source: Source, lines: Sequence[bytes], *, last: bool = False) -> None:
        """Queue ``lines`` (just read from ``source``, none blank) for the watcher; call before
        forwarding."""
        t = time.monotonic() - self._started
        for line in lines:
            self._pending.append((source, line, t, last))

    def drain(self) -> None:
        """Watch everything staged, oldest first; log and report what it shows."""
        pending = self._pending
        if not pending:
            return
        while pending:
            source, line, t, last = pending.popleft()
            frame = self.watcher.observe(source, line, t, last=last)
            if self._log is not None:
                self._log.write(self._record(frame))
            for finding in frame.findings:
                self._report.line(f"frame #{frame.seq} from {source}: {finding.describe()}")
        if self._log is not None:
            self._log.flush()

    def note(self, text: str) -> None:
        self._report.line(text)

    def _stamp(self, t: float) -> str:
        """Wall-clock time of ``t``; the lines of one read share it, so it is kept."""
        if t != self._stamped[0]:
            moment = datetime.datetime.fromtimestamp(self._wall + t, datetime.UTC)
            self._stamped = (t, moment.isoformat(timespec="microseconds").replace("+00:00", "Z"))
        return self._stamped[1]

    def _record(self, frame: Frame) -> str:
        record: dict[str, object] = {
            "seq": frame.seq,
            "t": round(frame.t, 6),
            "time": self._stamp(frame.t),
            "from": frame.source,
            "protocol": self.watcher.protocol_version,
            "session": frame.session,
            "line": frame.line.decode("utf-8", "replace"),
        }
        if frame.session is not None:
            record["state"] = self.watcher.state(frame.session)
        record["findings"] = [
            {"rule": f.rule, "message": f.message, "frames": list(f.frames)} for f in frame.findings
        ]
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


async def _receive(stream: trio.abc.ReceiveStream) -> bytes:
    try:
        return bytes(await stream.receive_some(CHUNK))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


async def _pump(
    source: Source,
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    tap: _Tap,
) -> None:
    """Forward ``receive`` to ``send`` chunk by chunk until end of input, watching each line.

    If ``send`` breaks (the other side is gone), reading stops and ``receive`` is closed, so
    the writer on that side sees a broken pipe as it would without the proxy.
    """
    splitter = LineSplitter(max_line_bytes=WATCHED_LINE_BYTES)
    try:
        while chunk := await _receive(receive):
            splitter.feed(chunk)
            lines, too_long = take_lines(splitter)
            tap.stage(source, lines)
            if too_long:
                tap.note(f"a line from the {source} is too long to watch; it was forwarded")
            try:
                await send.send_all(chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                tap.drain()
                return
            tap.drain()
        splitter.feed(b"")
        tap.stage(source, take_lines(splitter)[0], last=True)
        tap.drain()
    finally:
        with trio.CancelScope(shield=True):
            await send.aclose()
            await receive.aclose()


async def proxy(
    command: Sequence[str],
    *,
    log: IO[str] | None = None,
    report: IO[str] | None = None,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> int:
    """Run ``command`` behind a watching proxy on ``stdin_fd``/``stdout_fd``; return its status.

    Findings go to ``report`` (default: stderr) and, with ``log``, one NDJSON record per frame.
    Returns the agent's exit status (128 + N when signal N ended it).
    """
    reporter = Reporter(
        report if report is not None else sys.stderr, "agent-meta proxy", noun="findings"
    )
    try:
        return await _proxy(command, _Tap(Watcher(), log, reporter), stdin_fd, stdout_fd)
    finally:
        reporter.close()


async def _proxy(command: Sequence[str], tap: _Tap, stdin_fd: int, stdout_fd: int) -> int:
    process = await trio.lowlevel.open_process(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    client_in = trio.lowlevel.FdStream(os.dup(stdin_fd))
    client_out = trio.lowlevel.FdStream(os.dup(stdout_fd))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump, "client", client_in, process.stdin, tap)
            await _pump("agent", process.stdout, client_out, tap)
            returncode = await process.wait()
            nursery.cancel_scope.cancel()  # the client may never close its end
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    return exit_status(returncode)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agent-meta proxy`` to the command line."""
    parser = subparsers.add_parser(
        "proxy",
        usage="%(prog)s [-h] [--log FILE] -- AGENT_CMD [ARGS...]",
        help="run an ACP agent behind a transparent proxy that watches its session-info _meta",
        description=(
            "Run AGENT_CMD as an ACP agent on stdio and sit between it and the client that "
            "started this command. Every byte is forwarded unchanged, in order, both ways. "
            "Each session_info_update is folded per session with the patch rule of the "
            "negotiated protocol version, and the rules a client can observe are checked: "
            "resync after replay, nothing after session/close, _meta an object or null, "
            "updatedAt RFC 3339, v1 vs v2 meaning of _meta. Findings go to stderr; the exit "
            "status is the agent's."
        ),
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="also write one NDJSON record per frame (direction, time, session, the folded "
        "state after it, findings) to FILE; render it with 'agent-meta timeline FILE'",
    )
    add_agent_command(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``agent-meta proxy`` with parsed arguments; return the exit status."""
    command: list[str] = args.agent
    log: IO[str] | None = None
    if args.log is not None:
        try:
            log = open(args.log, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as exc:
            print(f"agent-meta proxy: cannot write the log: {exc}", file=sys.stderr)
            return 2
    try:
        return trio.run(_run, command, log)
    except FileNotFoundError as exc:
        print(f"agent-meta proxy: cannot start the agent: {exc}", file=sys.stderr)
        return 127
    except PermissionError as exc:
        print(f"agent-meta proxy: cannot start the agent: {exc}", file=sys.stderr)
        return 126
    except KeyboardInterrupt:
        return 130
    finally:
        if log is not None:
            log.close()


async def _run(command: list[str], log: IO[str] | None) -> int:
    return await proxy(command, log=log)
