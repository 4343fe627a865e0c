"""A test-only agent: the reference agent plus one command that sets notification ``_meta``.

``/trace TRACEPARENT KEY JSON`` publishes ``{"_meta": {KEY: JSON}}`` with
``params._meta = {"traceparent": TRACEPARENT}`` on that notification only, through the public
``SessionLifetime.publish(..., notification_meta=...)``. The reference agent has no command for
per-notification metadata (R9), so the integration tests use this to prove that a real client
receives it once and that a resync never restores it.

Run: ``python -m integration.trace_agent`` (stdio, ACP v1 or v2).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_meta.acp._connection import run_stdio_agent
from agent_meta.apps.reference_agent import ReferenceAgent

if TYPE_CHECKING:
    from agent_meta import SessionLifetime
    from agent_meta.acp._connection import RequestContext

USAGE = "usage: /trace TRACEPARENT KEY JSON"


class TraceAgent(ReferenceAgent):
    """The reference agent with ``/trace``; every other line behaves as in the reference."""

    async def _run_line(self, ctx: RequestContext, lifetime: SessionLifetime, line: str) -> str:
        head, _, rest = line.strip().partition(" ")
        if head != "/trace":
            return await super()._run_line(ctx, lifetime, line)
        parts = rest.split(None, 2)
        if len(parts) != 3:
            return f"error: {USAGE}"
        traceparent, key, value = parts
        done = await lifetime.publish(
            meta={key: json.loads(value)}, notification_meta={"traceparent": traceparent}
        )
        return f"ok: _meta.{key} set with trace {traceparent}" if done else "not published"


if __name__ == "__main__":
    run_stdio_agent(TraceAgent)
