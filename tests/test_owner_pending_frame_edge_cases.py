"""A frame not yet written while its lifetime changes: a retry once its session has closed,
the repair of a lost frame before a drain returns, a patch merged into a queued entry after a
clear.

Deterministic pins for bugs property tests once found (``test_owner_stateful.py``; the last one
``test_owner_direct_writes.py``). Each test names the program hypothesis shrank to, so the
failure stays covered even when the random search does not draw it again.
"""

from __future__ import annotations

import json

import trio
import trio.testing

import agent_meta
from agent_meta.testing import ClientMirror, FailingTransport, GatedTransport


async def test_a_frame_retried_after_not_sent_is_still_written_once_its_session_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # publish; the write fails with FrameNotSentError; the session closes during the backoff.
    # The frame was queued before the close, so the retry still sends it (R6: fencing begins
    # at the close), before the response queued after the close (R2).
    # The direct write and the policy's immediate first retry fail; then it backs off.
    transport = FailingTransport(fail_on=[1, 2], mode="not_sent")
    async with agent_meta.open_owner(transport) as owner:
        lifetime = owner.open_lifetime("s0")
        await lifetime.publish(meta={"a": 1})
        await trio.testing.wait_all_tasks_blocked()  # the writer sleeps in its backoff now
        assert transport.calls == 2
        owner.close_lifetime("s0")
        await owner.send_response(1, result={})
        await owner.wait_flushed()  # virtual time: through the backoff of the retry policy
        assert owner.statistics().fenced == 0
    assert transport.calls == 4
    assert [json.loads(frame) for frame in transport.frames] == [
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s0",
                "update": {"sessionUpdate": "session_info_update", "_meta": {"a": 1}},
            },
        },
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]


async def test_a_drain_waits_for_the_repair_of_a_lost_frame(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Shrunk program: reopen s0 (open + resync), two lost writes, publish title=None, drain.
    # The drain used to return before the repair resync went out, leaving the client behind.
    mirror = ClientMirror(protocol_version=2)
    transport = FailingTransport(fail_on=[1, 2], mode="lost")
    transport.mirror = mirror
    async with agent_meta.open_owner(transport) as owner:
        lifetime = owner.open_lifetime("s0")
        lifetime.resync()
        await lifetime.publish(title=None)
        await owner.wait_flushed()
        assert mirror.info("s0").title is None
        assert mirror.info("s0") == lifetime.snapshot()
        assert owner.statistics().repairs >= 1


async def test_a_patch_merged_after_a_clear_into_a_queued_entry_is_kept() -> None:
    # Shrunk program (tests/test_owner_direct_writes.py, coalescing on, the pipe full so the
    # entry stays queued): publish {"c": None}, publish {"b": None}, clear, publish {"a": None}.
    # The entry took its own copy of the patch at the second merge; the clear dropped the copy
    # but not the mark, so the last merge found no patch to write into (AssertionError).
    transport = GatedTransport()
    mirror = ClientMirror(protocol_version=2)
    async with agent_meta.open_owner(transport) as owner:
        lifetime = owner.open_lifetime("s0")
        await owner.send_response(0, result=None)  # holds the writer at the gate
        await trio.testing.wait_all_tasks_blocked()
        assert lifetime.publish_nowait(meta={"c": None})
        assert lifetime.publish_nowait(meta={"b": None})
        assert lifetime.publish_nowait(meta=None)
        assert lifetime.publish_nowait(meta={"a": 1})
        transport.open()
        await owner.wait_flushed()
    for frame in transport.frames:
        mirror.feed(frame)
    assert [frame["params"]["update"]["_meta"] for frame in mirror.frames_for("s0")] == [
        None,
        {"a": 1},
    ]
