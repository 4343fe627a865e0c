"""Both drivers are an ``agent_meta.Owner``, and take their destination as ``output``."""

from __future__ import annotations

import asyncio

import agent_meta
from agent_meta.testing import RecordingTransport


async def publish_through(owner: agent_meta.Owner) -> None:
    """Written once against the protocol: serves either driver."""
    lifetime = owner.open_lifetime("s")
    await lifetime.publish(meta={"a": 1})
    await owner.send_notification("x/tick", {"sessionId": "s"})
    await owner.wait_flushed()


async def test_the_trio_owner_is_an_owner() -> None:
    transport = RecordingTransport()
    async with agent_meta.open_owner(output=transport) as owner:
        assert isinstance(owner, agent_meta.Owner)
        await publish_through(owner)
    assert [m.get("method") for m in transport.messages] == ["session/update", "x/tick"]


def test_the_asyncio_owner_is_an_owner() -> None:
    transport = RecordingTransport()

    async def main() -> None:
        async with agent_meta.open_asyncio_owner(output=transport) as owner:
            assert isinstance(owner, agent_meta.Owner)
            await publish_through(owner)

    asyncio.run(main())
    assert [m.get("method") for m in transport.messages] == ["session/update", "x/tick"]


def test_something_that_is_not_an_owner_is_not_one() -> None:
    assert not isinstance(object(), agent_meta.Owner)
    assert not isinstance(RecordingTransport(), agent_meta.Owner)
