"""The NDJSON line reader and the JSON-RPC helpers (no owner involved)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agent_meta.core._jsonrpc import (
    ErrorCode,
    JsonRpcError,
    optional_str,
    require_object_list,
    require_str,
)
from agent_meta.trio_connection._lines import (
    IncompleteLineError,
    LineTooLongError,
    NdjsonLineReader,
)


async def _reader(chunks: list[bytes], limit: int = 16) -> NdjsonLineReader:
    send, receive = trio.testing.memory_stream_one_way_pair()
    for chunk in chunks:
        await send.send_all(chunk)
    await send.aclose()
    return NdjsonLineReader(receive, max_line_bytes=limit)


async def _all(reader: NdjsonLineReader) -> list[bytes | str]:
    """Every line, with errors recorded as names, until the end of the stream."""
    out: list[bytes | str] = []
    while True:
        try:
            line = await reader.receive_line()
        except LineTooLongError:
            out.append("too-long")
            continue
        except IncompleteLineError as exc:
            out.append(f"incomplete:{exc.partial.decode()}")
            continue
        if line is None:
            return out
        out.append(line)


async def test_lines_split_across_chunks_crlf_and_blank_lines() -> None:
    reader = await _reader([b'{"a"', b":1}\r\n\n  \n", b"x\ny", b"z\n"])
    assert await _all(reader) == [b'{"a":1}', b"x", b"yz"]


async def test_a_line_at_the_limit_passes_one_byte_more_does_not() -> None:
    reader = await _reader([b"a" * 16 + b"\n" + b"b" * 17 + b"\nnext\n"])
    assert await _all(reader) == [b"a" * 16, "too-long", b"next"]


async def test_the_limit_does_not_count_a_crlf_line_ending() -> None:
    # A message of exactly the limit passes with either line ending, even when its CR
    # arrives in a chunk of its own.
    reader = await _reader([b"a" * 16 + b"\r\n", b"b" * 16, b"\r", b"\n", b"c" * 17 + b"\r\n"])
    assert await _all(reader) == [b"a" * 16, b"b" * 16, "too-long"]


async def test_an_overlong_line_is_reported_early_and_its_tail_skipped() -> None:
    # 1000 bytes arrive in small chunks; the error comes once, then the next line is intact.
    chunks = [b"c" * 10 for _ in range(100)] + [b"\nok\n"]
    reader = await _reader(chunks, limit=32)
    assert await _all(reader) == ["too-long", b"ok"]


async def test_eof_inside_a_line_is_reported_once() -> None:
    reader = await _reader([b'{"ok":1}\n{"jsonrpc":"2.'])
    assert await _all(reader) == [b'{"ok":1}', 'incomplete:{"jsonrpc":"2.']


async def test_eof_after_whitespace_only_is_clean() -> None:
    reader = await _reader([b"x\n  "])
    assert await _all(reader) == [b"x"]


async def test_eof_while_discarding_an_overlong_line_is_clean() -> None:
    reader = await _reader([b"d" * 100], limit=8)
    assert await _all(reader) == ["too-long"]


def test_limit_must_be_positive() -> None:
    _send, receive = trio.testing.memory_stream_one_way_pair()
    with pytest.raises(ValueError, match="positive"):
        NdjsonLineReader(receive, max_line_bytes=0)


def test_params_helpers_name_the_field() -> None:
    assert require_str({"sessionId": "s"}, "sessionId") == "s"
    with pytest.raises(JsonRpcError, match="'sessionId' is missing") as missing:
        require_str({}, "sessionId")
    assert missing.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(JsonRpcError, match="must be a string, not a number"):
        require_str({"sessionId": 3}, "sessionId")
    assert optional_str({"cwd": None}, "cwd") is None
    with pytest.raises(JsonRpcError, match="not a boolean"):
        optional_str({"cwd": True}, "cwd")
    assert require_object_list({"prompt": [{"type": "text"}]}, "prompt") == [{"type": "text"}]
    with pytest.raises(JsonRpcError, match="non-empty array"):
        require_object_list({"prompt": []}, "prompt")


def test_error_object_has_data_only_when_given() -> None:
    assert JsonRpcError(-32602, "bad").to_error() == {"code": -32602, "message": "bad"}
    assert JsonRpcError(-32002, "gone", {"sessionId": "s"}).to_error() == {
        "code": -32002,
        "message": "gone",
        "data": {"sessionId": "s"},
    }
