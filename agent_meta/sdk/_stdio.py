"""An adapter over a pair of asyncio streams: stdio, a pipe or a socket.

The SDK's own stdio reader skips a line that is not JSON without answering it, has no line
limit, and stops the whole connection on JSON that is not an object (1.0 skips it, unanswered).
:class:`NdjsonSource` answers each such line with the JSON-RPC error it earns, through the
owner, and goes on reading (R12): ``-32700`` for a line that is not JSON or is over the limit,
``-32600`` for JSON that is not a JSON-RPC request, notification or response, or an empty
batch. A batch goes to the adapter as its entries (the SDK cannot take one: the adapter hands
them over one by one and answers with one array).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, Final, final

from ..core._jsonrpc import INVALID_REQUEST, PARSE_ERROR
from ..owner._asyncio import open_asyncio_owner
from ..owner._failures import unwritten_error
from ..sansio._gate import InvalidEntry
from ..sansio._lines import (
    DEFAULT_MAX_LINE_BYTES,
    READ_SIZE,
    IncompleteLineError,
    LineSplitter,
    LineTooLongError,
)
from ..sansio._options import OwnerOptions
from ..wire._decode import (
    InvalidMessageError,
    MessageDecodeError,
    message_from_json,
    parse_json_line,
)
from ._adapter import SdkAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from ..owner._asyncio import AsyncioMetaOwner
    from ..stores._store import LifetimeStore

__all__ = ["NdjsonSource", "open_stdio_adapter", "open_stream_adapter"]

logger = logging.getLogger("agent_meta.sdk")

SDK_DEFAULT_OPTIONS: Final = OwnerOptions(protocol_version=1)
"""Options when none are given: protocol v1 until ``initialize`` says otherwise (the SDK 0.12
speaks v1 only; the owner follows the version its ``initialize`` response carries)."""

_NOT_A_MESSAGE: Final = "a JSON-RPC message is a JSON object, or a non-empty array of them"


@final
class NdjsonSource:
    """Reads NDJSON JSON-RPC messages from an :class:`asyncio.StreamReader` for an adapter,
    answering through the owner each line the SDK must not see."""

    def __init__(
        self,
        reader: asyncio.StreamReader | Callable[[], Awaitable[asyncio.StreamReader]],
        owner: AsyncioMetaOwner,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        # A reader, or how to open one on the first receive() (stdin is connected only when
        # the SDK reads through the adapter, so a forgotten input_stream= cannot steal lines).
        self._reader: asyncio.StreamReader | None = None
        self._open_reader: Callable[[], Awaitable[asyncio.StreamReader]] | None = None
        if isinstance(reader, asyncio.StreamReader):
            self._reader = reader
        else:
            self._open_reader = reader
        self.used = False
        """Whether anything ever read through this source (the SDK's receive loop does)."""
        self._owner = owner
        self._splitter = LineSplitter(max_line_bytes=max_line_bytes)
        self.adapter: SdkAdapter | None = None
        """The adapter counting refused lines (set by whoever builds both)."""

    async def receive(self) -> dict[str, Any] | list[dict[str, Any] | InvalidEntry] | None:
        """The next valid message (or a batch's entries), or ``None`` at the end of the input.
        Cancelling it loses no bytes: what was read stays buffered."""
        while True:
            try:
                line = await self._next_line()
            except LineTooLongError as exc:
                await self._refuse(PARSE_ERROR, f"Parse error: {exc}", None)
                continue
            except IncompleteLineError as exc:
                await self._refuse(PARSE_ERROR, f"Parse error: {exc}", None)
                return None
            if line is None:
                return None
            message = await self._decode(line)
            if message is not None:
                return message

    async def close(self) -> None:
        """Nothing to release: the streams belong to whoever opened them."""

    async def _next_line(self) -> bytes | None:
        self.used = True
        if self._reader is None:
            assert self._open_reader is not None
            self._reader = await self._open_reader()
        while True:
            line = self._splitter.next_line()
            if line is not None or self._splitter.ended:
                return line
            self._splitter.feed(await self._reader.read(READ_SIZE))

    async def _decode(
        self, line: bytes
    ) -> dict[str, Any] | list[dict[str, Any] | InvalidEntry] | None:
        """The message of one line (or a batch's entries), or ``None`` once its error has been
        answered."""
        try:
            data = parse_json_line(line)
        except MessageDecodeError as exc:
            await self._refuse(exc.code, f"Parse error: {exc}", exc.request_id)
            return None
        if isinstance(data, list) and data:
            return self._batch(data)
        if not isinstance(data, dict):
            await self._refuse(INVALID_REQUEST, f"Invalid Request: {_NOT_A_MESSAGE}", None)
            return None
        if "method" not in data:
            return data  # a response: the SDK matches it to its request (or ignores it)
        try:
            message_from_json(data)
        except MessageDecodeError as exc:
            if "id" in data:  # a notification is never answered, not even a broken one
                await self._refuse(exc.code, f"Invalid Request: {exc}", exc.request_id)
            else:
                self._count_refused()
            return None
        return data

    def _batch(self, data: list[Any]) -> list[dict[str, Any] | InvalidEntry]:
        """A batch's entries: each valid message, or the error its entry earns (``id: null``,
        as JSON-RPC says); a malformed response is dropped (never answered)."""
        entries: list[dict[str, Any] | InvalidEntry] = []
        for item in data:
            try:
                message_from_json(item)
            except MessageDecodeError as exc:
                if isinstance(exc, InvalidMessageError) and exc.is_response:
                    self._count_refused()
                    continue
                self._count_refused()
                error = {"code": exc.code, "message": f"Invalid Request: {exc}"}
                entries.append(InvalidEntry(error))
                continue
            entries.append(item)
        return entries

    async def _refuse(self, code: int, message: str, request_id: int | str | None) -> None:
        self._count_refused()
        logger.warning("refused an inbound line: %s", message)
        await self._owner.send_response(request_id, error={"code": code, "message": message})

    def _count_refused(self) -> None:
        if self.adapter is not None:
            self.adapter.refused_lines += 1


@asynccontextmanager
async def open_stream_adapter(
    reader: asyncio.StreamReader | Callable[[], Awaitable[asyncio.StreamReader]],
    writer: asyncio.StreamWriter,
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AsyncIterator[SdkAdapter]:
    """Run an adapter over ``reader`` (the client's messages; or an async callable that opens
    the reader when the SDK first reads) and ``writer`` (the owner's frames) for the duration
    of the block; see :func:`open_stdio_adapter`."""
    if options is None:
        options = SDK_DEFAULT_OPTIONS
    async with open_asyncio_owner(writer, options, store=store) as owner:
        source = NdjsonSource(reader, owner, max_line_bytes=max_line_bytes)
        adapter = SdkAdapter(owner, source, writer=writer)
        source.adapter = adapter
        yield adapter
        if not source.used:
            logger.warning(
                "the SDK never read through the agent_meta adapter: pass "
                "**adapter.connection_kwargs() to acp.run_agent, or the SDK writes on its own"
            )
    if owner.statistics().queued:
        raise unwritten_error(f"within the drain timeout of {options.drain_timeout} s")


@asynccontextmanager
async def open_stdio_adapter(
    options: OwnerOptions | None = None,
    *,
    store: LifetimeStore | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stdout: int | None = None,
) -> AsyncIterator[SdkAdapter]:
    """Run an adapter over this process's stdin and stdout for the duration of the block::

        async with open_stdio_adapter() as meta:
            agent = MyAgent(meta)
            await acp.run_agent(agent, **meta.connection_kwargs(), use_unstable_protocol=True)

    ``options`` and ``store`` are those of :func:`~agent_meta.open_asyncio_owner` (by
    default protocol v1, the SDK's); the version then follows the ``initialize`` the SDK
    answers. Inbound lines longer than ``max_line_bytes`` are refused with ``-32700``. stdin
    and stdout must be pipes (or sockets, or terminals), as for the SDK's own stdio: a regular
    file raises ``ValueError``. ``stdout`` is the file descriptor written instead of
    ``sys.stdout`` (``agent-meta run`` hands the agent its client's stdout this way).

    On leaving the block the owner writes what is queued (up to ``options.drain_timeout``
    seconds) before it stops; frames still unwritten then (a client that stopped reading)
    raise :class:`~agent_meta.TransportBrokenError` from the block.
    """
    writer = await _stdout_writer(sys.stdout if stdout is None else stdout)
    try:
        async with open_stream_adapter(
            _stdin_reader, writer, options, store=store, max_line_bytes=max_line_bytes
        ) as adapter:
            yield adapter
    finally:
        writer.close()


async def _stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _stdout_writer(stdout: IO[bytes] | IO[str] | int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    pipe = (
        os.fdopen(stdout, "wb", buffering=0, closefd=False) if isinstance(stdout, int) else stdout
    )
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), pipe
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)
