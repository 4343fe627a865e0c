"""``agent-meta attach URL``: an ACP agent on this stdio that is a remote host's client.

Editors start agents as subprocesses on stdio (Zed, acpx, the SDK clients); a host that serves
ACP over a WebSocket (``agent-meta agent --runtime sdk --listen``) is reached through this
command: every line of stdin is one text message to ``ws://HOST:PORT/acp``, every text message
of the host one line of stdout, in order, unchanged. The connection carries the bearer token
(``--token-file``, else ``$AGENT_META_TOKEN``) in its ``Authorization`` header, so the host
refuses a client without it (``401``) before any ACP message.

At the end of stdin the requests the client sent and the host has not answered yet are still
waited for (``--drain-timeout``), as agent_meta's own connections wait for theirs, then the
connection is closed (code 1000). Exit status: 0 when the client ended, or the host closed the
connection normally; 1 when the host cannot be reached, refuses the connection or closes it for
another reason (its code and reason on stderr); 2 for a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import sys
from typing import TYPE_CHECKING, Final

from .._tokens import TOKEN_VARIABLE, read_token
from ..sansio._lines import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from collections.abc import Sequence

    import trio
    from trio_websocket import WebSocketConnection

__all__ = ["AttachSettings", "add_parser", "main", "run"]

NAME: Final = "agent-meta attach"
DRAIN_TIMEOUT: Final = 10.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttachSettings:
    """What ``agent-meta attach`` was asked to do."""

    url: str
    token: str
    max_line: int = DEFAULT_MAX_LINE_BYTES
    drain_timeout: float = DRAIN_TIMEOUT


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL", help="the host's ACP endpoint, ws://HOST:PORT/acp")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"the file holding the bearer token, its first line (else ${TOKEN_VARIABLE})",
    )
    parser.add_argument(
        "--max-line",
        type=int,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="BYTES",
        help=f"the longest line or message, either way (default {DEFAULT_MAX_LINE_BYTES})",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=DRAIN_TIMEOUT,
        metavar="SECONDS",
        help=(
            "at the end of stdin, how long the host may take to answer the requests it has not "
            f"answered yet (default {DRAIN_TIMEOUT:g})"
        ),
    )


_DESCRIPTION = (
    "An ACP agent on this stdio that carries every message to a host serving ACP over a "
    "WebSocket (agent-meta agent --runtime sdk --listen) and back, unchanged, so a client that "
    "starts agents on stdio (Zed, acpx, the SDK clients) can attach to it."
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``agent-meta attach``."""
    parser = commands.add_parser(
        "attach",
        help="a stdio ACP agent that is a remote host's client (ws://HOST:PORT/acp)",
        description=_DESCRIPTION,
        usage="%(prog)s [options] URL",
    )
    _configure(parser)
    parser.set_defaults(run=lambda args: run(_settings(parser, args)))


def _settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> AttachSettings:
    url: str = args.url
    if not url.startswith(("ws://", "wss://")):
        parser.error(f"URL must be ws://HOST:PORT/PATH or wss://..., not {url!r}")
    if args.max_line < 1024:
        parser.error("--max-line must be at least 1024 bytes")
    if not args.drain_timeout >= 0 or math.isnan(args.drain_timeout):
        parser.error("--drain-timeout must be a number of seconds >= 0")
    try:
        token = read_token(args.token_file)
    except ValueError as exc:
        parser.error(str(exc))
    return AttachSettings(
        url=url, token=token, max_line=args.max_line, drain_timeout=args.drain_timeout
    )


def main(argv: Sequence[str]) -> int:
    """``agent-meta attach ARGS``: parse and run; return the exit status."""
    parser = argparse.ArgumentParser(prog=NAME, description=_DESCRIPTION)
    _configure(parser)
    return run(_settings(parser, parser.parse_args(list(argv))))


def run(settings: AttachSettings) -> int:
    """Carry the client's messages to the host and back until either side ends."""
    try:
        import trio
        import trio_websocket  # noqa: F401  (the websocket extra)
    except ImportError as exc:
        from .._install_hint import install_hint

        print(
            f"{NAME}: needs the 'websocket' extra ({exc.name} is missing): "
            f"{install_hint('websocket')}",
            file=sys.stderr,
        )
        return 1
    try:
        return trio.run(_attach, settings)
    except KeyboardInterrupt:
        return 130


def _say(text: str) -> None:
    print(f"{NAME}: {text}", file=sys.stderr, flush=True)


async def _attach(settings: AttachSettings) -> int:
    from trio_websocket import ConnectionRejected, HandshakeError, open_websocket_url

    headers = [(b"authorization", b"Bearer " + settings.token.encode("ascii"))]
    try:
        async with open_websocket_url(
            settings.url,
            extra_headers=headers,
            max_message_size=settings.max_line,
            connect_timeout=30,
            disconnect_timeout=DRAIN_TIMEOUT,
        ) as ws:
            return await _carry(ws, settings)
    except ConnectionRejected as exc:
        status = exc.status_code
        why = " (the bearer token is missing or wrong)" if status == 401 else ""
        _say(f"the host refused the connection: HTTP {status}{why}")
    except HandshakeError as exc:
        cause = exc.__cause__ or exc.__context__
        _say(f"cannot reach {settings.url}: {cause or type(exc).__name__}")
    except OSError as exc:
        _say(f"cannot reach {settings.url}: {exc}")
    return 1


@dataclasses.dataclass(slots=True)
class _Pending:
    """The client's requests the host has not answered yet (read off the lines, not checked:
    the host judges them)."""

    ids: set[object] = dataclasses.field(default_factory=set)
    changed: trio.Event | None = None

    def sent(self, line: bytes) -> None:
        message = _loads(line)
        if isinstance(message, dict) and "method" in message and "id" in message:
            self.ids.add(_key(message["id"]))

    def received(self, text: str) -> None:
        message = _loads(text)
        for entry in message if isinstance(message, list) else [message]:
            if isinstance(entry, dict) and "method" not in entry and "id" in entry:
                self.ids.discard(_key(entry["id"]))
        if self.changed is not None:
            self.changed.set()


async def _carry(ws: WebSocketConnection, settings: AttachSettings) -> int:
    import trio
    from trio_websocket import ConnectionClosed

    pending = _Pending()
    status = 0
    async with (
        trio.lowlevel.FdStream(os.dup(0)) as stdin,
        trio.lowlevel.FdStream(os.dup(1)) as stdout,
        trio.open_nursery() as nursery,
    ):

        async def to_host() -> None:
            await _pump_stdin(ws, stdin, stdout, settings.max_line, pending)
            with trio.move_on_after(settings.drain_timeout):
                while pending.ids:
                    pending.changed = trio.Event()
                    await pending.changed.wait()
            if pending.ids:
                _say(f"the host left {len(pending.ids)} requests unanswered; closing")
            await ws.aclose(1000, "the client's input ended")

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    await ws.aclose(1001, "the client is going away")
                    return

        nursery.start_soon(to_host)
        nursery.start_soon(on_signal)
        try:
            while True:
                message = await ws.get_message()
                if isinstance(message, bytes):
                    _say("dropped a binary message of the host (ACP messages are text)")
                    continue
                await stdout.send_all(_line(message))
                pending.received(message)
        except ConnectionClosed as exc:
            reason = exc.reason
            if reason is not None and reason.code not in (1000, 1001):
                _say(f"the host closed the connection: {reason.code} {reason.reason or ''}")
                status = 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            _say("stopped: the client stopped reading")
            status = 1
        nursery.cancel_scope.cancel()
    return status


async def _pump_stdin(
    ws: WebSocketConnection,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    max_line: int,
    pending: _Pending,
) -> None:
    """Every line of stdin as one text message, until stdin ends (or the connection does)."""
    from trio_websocket import ConnectionClosed

    from ..sansio._frames import build_response
    from ..sansio._lines import READ_SIZE, IncompleteLineError, LineSplitter, LineTooLongError

    splitter = LineSplitter(max_line_bytes=max_line)
    try:
        while True:
            try:
                line = splitter.next_line()
            except LineTooLongError as exc:
                error = {"code": exc.code, "message": str(exc)}
                await stdout.send_all(build_response(None, error=error))
                continue
            except IncompleteLineError as exc:
                await _send_line(ws, stdout, exc.partial, pending)  # the last, no newline
                return
            if line is not None:
                await _send_line(ws, stdout, line, pending)
                continue
            if splitter.ended:
                return
            chunk = await stdin.receive_some(READ_SIZE)
            splitter.feed(bytes(chunk))
    except ConnectionClosed:
        return


async def _send_line(
    ws: WebSocketConnection, stdout: trio.abc.SendStream, line: bytes, pending: _Pending
) -> None:
    """One line of the client as one text message; one that is no UTF-8 text cannot be one,
    and is answered here as the host would answer it (``-32700``)."""
    from ..core._jsonrpc import ErrorCode
    from ..sansio._frames import build_response

    if not line.strip():
        return
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = {"code": ErrorCode.PARSE_ERROR, "message": f"not a JSON message: {exc}"}
        await stdout.send_all(build_response(None, error=error))
        return
    pending.sent(line)
    await ws.send_message(text)


def _line(message: str) -> bytes:
    """A text message of the host as one line: a message written across lines (pretty-printed
    JSON) is written compactly, so the client's NDJSON stays one message per line."""
    if "\n" in message or "\r" in message:
        parsed = _loads(message)
        if parsed is not None:
            message = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)
        else:
            message = message.replace("\r", " ").replace("\n", " ")
    return message.encode() + b"\n"


def _loads(text: str | bytes) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _key(request_id: object) -> object:
    """A request id as a set member (``1`` and ``True`` stay apart)."""
    return (type(request_id).__name__, json.dumps(request_id))
