"""The adapter under the SDK's HTTP and WebSocket server (``agent_meta.sdk._remote``).

Needs a release with the SDK's HTTP server and its ``http`` extra; elsewhere the module skips,
saying why (``agent_meta.sdk`` itself imports on every release).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_meta import OwnerClosedError, OwnerOptions

remote_module = pytest.importorskip(
    "agent_meta.sdk._remote",
    reason="this SDK release has no HTTP server (or no http extra)",
    exc_type=ImportError,
)
RemoteConnection = remote_module.RemoteConnection

Message = dict[str, Any]


class FlakyInner:
    """An SDK message transport (the server end of the SDK's in-memory pair) whose peer goes
    away after ``delivered`` messages."""

    def __init__(self, delivered: int) -> None:
        self.sent: list[Message] = []
        self.delivered = delivered
        self.closed = False

    async def send(self, message: Message) -> None:
        if len(self.sent) == self.delivered:
            raise ConnectionResetError("the peer went away")
        self.sent.append(message)

    async def receive(self) -> Message | None:
        await asyncio.Event().wait()  # the client says nothing
        return None

    async def close(self) -> None:
        self.closed = True


def test_a_remote_transport_that_fails_stops_the_owner_and_keeps_what_it_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = FlakyInner(delivered=2)

    async def scenario() -> None:
        # v2, no coalescing: one frame per publication (v1 frames would absorb the next one).
        remote = RemoteConnection(inner, OwnerOptions(coalesce=False, protocol_version=2))
        adapter = await remote.adapter()
        lifetime = adapter.owner.open_lifetime("s1")
        assert await lifetime.publish(meta={"a": 1})
        assert await lifetime.publish(meta={"b": 2})
        await adapter.owner.wait_flushed()
        await lifetime.publish(meta={"c": 3})  # accepted; its write fails
        with pytest.raises(OwnerClosedError):
            await adapter.owner.wait_flushed()
        with pytest.raises(OwnerClosedError):
            await adapter.send({"jsonrpc": "2.0", "id": 1, "result": {}})
        await remote.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert [m["params"]["update"]["_meta"] for m in inner.sent] == [{"a": 1}, {"b": 2}]
    assert inner.closed
    assert "stopped with an error" in caplog.text
