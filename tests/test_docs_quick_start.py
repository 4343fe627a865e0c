"""The quick start of ``docs/index.md``, run as written (issue 33, item 4).

The code block is read out of the page itself, so the page cannot promise what the owner does
not do: ``lt.resync()``, then ``send_response(7, ...)`` ("leaves after the resync frames"),
then ``close_lifetime``. Fencing begins at the close, so the resync queued before it is written,
before the response, and nothing of the session follows the response.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import trio
import trio.testing

import agent_meta
from agent_meta.testing import ClientMirror

ROOT = Path(__file__).resolve().parent.parent
SID = "sess-1"


def quick_start_source() -> str:
    """The owner example of the quick start, exactly as the page shows it."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    examples = [block for block in blocks if "open_owner" in block]
    assert len(examples) == 1, "the quick start has one owner example"
    return str(examples[0])


def info_update(message: dict[str, Any]) -> dict[str, Any] | None:
    """The ``session_info_update`` of ``sess-1`` a frame carries, if it is one."""
    params = message.get("params")
    if message.get("method") != "session/update" or not isinstance(params, dict):
        return None
    update = params["update"]
    if params.get("sessionId") != SID or update.get("sessionUpdate") != "session_info_update":
        return None
    return {k: v for k, v in update.items() if k != "sessionUpdate"}


async def test_the_quick_start_runs_as_written_and_keeps_its_promise() -> None:
    source = quick_start_source()
    assert "lt.resync()" in source
    assert source.index("lt.resync()") < source.index("send_response(7")
    assert source.index("send_response(7") < source.index("close_lifetime(")
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/index.md", "exec"), namespace)  # our own page, run as written
    stream = trio.testing.MemorySendStream()
    with trio.fail_after(10):
        await namespace["serve"](stream)

    data = bytes(stream.get_data_nowait())
    messages = [json.loads(line) for line in data.splitlines()]
    state = {"acme.dev/progress": 0.5, "acme.dev/review": {"state": "pending"}}
    # The response is the last frame: nothing of the session is written after the close.
    assert messages[-1] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    # The resync frames precede it: _meta: null, then the state (R4).
    assert [info_update(m) for m in messages[-3:-1]] == [
        {"_meta": None},
        {"title": "Fix the parser", "_meta": state},
    ]
    # Before them, the publication and the domain edit (merged or not, R3).
    assert messages[:-3]
    assert all(info_update(m) is not None for m in messages[:-3])
    mirror = ClientMirror(protocol_version=2)
    for line in data.splitlines():
        mirror.feed(line)
    assert mirror.info(SID) == agent_meta.SessionInfo(title="Fix the parser", meta=state)
