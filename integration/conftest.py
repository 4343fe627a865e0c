"""Integration tests: real ACP clients drive the reference agent as a real subprocess.

Run them with ``pytest integration`` from the repository root (or ``nox -s integration``). They
are plain synchronous tests: each runs its asyncio client with ``asyncio.run`` (the Python SDK)
or a Node subprocess (the TypeScript SDK, acpx), so pytest-trio's ``trio_mode`` leaves them
alone. The Node clients need ``npm ci`` in ``integration/node``; without it they are skipped
with that reason.
"""

from __future__ import annotations

import pytest

from integration.harness import node_ready


@pytest.fixture
def node() -> None:
    """Skip when the Node clients cannot run here (no node, or no ``npm ci`` yet)."""
    reason = node_ready()
    if reason is not None:
        pytest.skip(reason)
