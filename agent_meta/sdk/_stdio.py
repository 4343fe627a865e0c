"""An adapter over a pair of asyncio streams: stdio, a pipe or a socket.

The SDK's own stdio reader skips a line that is not JSON without answering it, has no line
limit, and stops the whole connection on JSON that is not an object (1.0 skips it, unanswered).
:class:`NdjsonSource` reads and decodes lines as agent_meta's trio connection does, and hands
the adapter what makes a line no JSON-RPC message (not JSON, over the limit, not a request,
notification or response, an empty batch) instead: the adapter's gate answers it with the
error it earns, and reading goes on (R12). A batch goes to the adapter as its entries (the SDK
cannot take one: the adapter hands them over one by one and answers with one array).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, Final, final

from ..owner._asyncio import open_asyncio_owner
from ..owner._failures import unwritten_error
from ..sansio._lines import (
    DEFAULT_MAX_LINE_BYTES,
    READ_SIZE,
    IncompleteLineError,
    LineSplitter,
    LineTooLongError,
)
from ..sansio._options import OwnerOptions
from ..wire._decode import MessageDecodeError, decode_raw
from ._adapter import SdkAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from ..sansio.inbound._gate import Undecodable
    from ..stores._store import LifetimeStore

__all__ = ["NdjsonSource", "open_stdio_adapter", "open_stream_adapter"]

logger = logging.getLogger("agent_meta.sdk")

SDK_DEFAULT_OPTIONS: Final = OwnerOptions(protocol_version=1)
"""Options when none are given: protocol v1 until ``initialize`` says otherwise (the SDK 0.12
speaks v1 only; the owner follows the version its ``initialize`` response carries)."""


@final
class NdjsonSource:
    """Reads NDJSON JSON-RPC messages from an :class:`asyncio.StreamReader` for an adapter
    (see :class:`~agent_meta.sdk._adapter.MessageSource`)."""

    def __init__(
        self,
        reader: asyncio.StreamReader | Callable[[], Awaitable[asyncio.StreamReader]],
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
        self._splitter = LineSplitter(max_line_bytes=max_line_bytes)

    async def receive(
        self,
    ) -> dict[str, Any] | Sequence[dict[str, Any] | Undecodable] | Undecodable | None:
        """The next message (or a batch's entries), what makes the next line no message, or
        ``None`` at the end of the input. Cancelling it loses no bytes: what was read stays
        buffered."""
        try:
            line = await self._next_line()
        except (LineTooLongError, IncompleteLineError) as exc:
            return exc  # an incomplete line is the last: the next call ends the input
        if line is None:
            return None
        try:
            return decode_raw(line)
        except MessageDecodeError as exc:
            return exc

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
        source = NdjsonSource(reader, max_line_bytes=max_line_bytes)
        yield SdkAdapter(owner, source, writer=writer)
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
    seconds) before it stops, then stdout's transport flushes what it still buffers (again up
    to ``drain_timeout``); frames still unwritten then (a client that stopped reading) raise
    :class:`~agent_meta.TransportBrokenError` from the block. Cancelled while it flushes, the
    rest of the buffer is dropped.
    """
    if options is None:
        options = SDK_DEFAULT_OPTIONS
    writer = await _stdout_writer(sys.stdout if stdout is None else stdout)
    try:
        async with open_stream_adapter(
            _stdin_reader, writer, options, store=store, max_line_bytes=max_line_bytes
        ) as adapter:
            yield adapter
    except BaseException:
        writer.close()  # ending with an error already: the flush is not waited for
        raise
    await _flushed(writer, options.drain_timeout)


async def _flushed(writer: asyncio.StreamWriter, bound: float) -> None:
    """Close ``writer`` once its transport has written what it buffers. The owner counts a
    frame written once the transport has it, and ``drain()`` lets up to its high-water mark
    stay buffered: without this wait the loop would end with those bytes unwritten (half a
    line, often) while everything looked written. Raises
    :class:`~agent_meta.TransportBrokenError` when they are not written within ``bound``
    seconds (the transport is then aborted)."""
    writer.close()
    try:
        async with asyncio.timeout(None if math.isinf(bound) else bound):
            await writer.wait_closed()
    except TimeoutError:
        left = writer.transport.get_write_buffer_size()
        writer.transport.abort()
        raise unwritten_error(f"({left} bytes still buffered for stdout after {bound} s)") from None
    except OSError as exc:  # the client closed its end: what was buffered is lost
        raise unwritten_error(f"(stdout failed: {exc})") from None


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
