"""Both runtimes give the same folded state for the same ACP v2 scenario.

The demo's v2 story (set, remove, clear, resume with replay, close, reopen) is played by the
official TypeScript SDK's v2 client against ``agent-meta agent`` on the trio runtime and on the
official Python SDK (``--runtime sdk``, the SDK 1.0); after every step the client's folded
``title`` and ``_meta`` must be the same on both, and each step must send the same kinds of
session-info frames (a patch, a clear, a resync's ``null`` and snapshot) in the same order.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_meta.demo._v2 import V2_STORY
from agent_meta.testing import ClientMirror
from integration.harness import agent_command, run_node_client, sdk_speaks_v2

pytestmark = [pytest.mark.usefixtures("node")]


def _story(runtime: str) -> list[tuple[Any, Any, list[tuple[str, ...]]]]:
    """Per step: the folded title, the folded ``_meta``, and the session-info frames' fields."""
    run = run_node_client(
        "steps",
        agent=agent_command("--protocol", "2", runtime=runtime),
        steps=[step.op for step in V2_STORY],
    )
    created = [line for line in run.lines if line["type"] == "response" and line["op"] == "new"]
    session_id = created[0]["result"]["sessionId"]
    mirror = ClientMirror(protocol_version=2)
    steps = []
    for index in range(len(V2_STORY)):
        frames = []
        for message in run.step_received(index):
            mirror.feed(message)
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "session_info_update":
                frames.append(tuple(sorted(key for key in update if key != "sessionUpdate")))
        info = mirror.info(session_id)
        steps.append((info.title, info.meta, frames))
    return steps


def test_the_trio_and_the_sdk_runtimes_fold_to_the_same_state_at_every_step() -> None:
    if not sdk_speaks_v2():
        pytest.skip("the installed official Python SDK has no ACP v2 side (1.0 on)")
    trio_steps = _story("trio")
    sdk_steps = _story("sdk")
    steps = zip(V2_STORY, trio_steps, sdk_steps, strict=True)
    for number, (step, on_trio, on_sdk) in enumerate(steps, 1):
        assert on_trio == on_sdk, f"step {number} ({step.title}): trio {on_trio}, sdk {on_sdk}"
    assert trio_steps[-1][:2] == (None, None)  # the reopened lifetime is fresh on both
