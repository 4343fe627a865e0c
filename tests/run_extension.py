"""An extension for ``agent-meta run --import run_extension`` (``tests/test_run.py``): it tags the
first session of the agent it is loaded into, knowing nothing of the agent."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_meta.sdk import SdkAdapter, on_connection

_tasks: set[asyncio.Task[None]] = set()


async def _tag(adapter: SdkAdapter) -> None:
    lifetime = await adapter.wait_opened("s1")
    await lifetime.publish(meta={"extension": {"loaded": True}})


def _hook(adapter: SdkAdapter, connection: Any) -> None:
    task = asyncio.get_running_loop().create_task(_tag(adapter))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


on_connection(_hook)
