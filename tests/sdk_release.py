"""What the installed official SDK release lacks, as pytest marks (a helper: no tests here).

The adapter's suite runs on every supported release (``nox -s sdk_matrix``). Its test agents are
written against the API of 0.7 on (``acp.run_agent``, snake_case handlers); a test that needs
what an older release does not have is skipped, saying what is missing. SDK 0.6's own API has
tests of its own (``tests/test_sdk06.py``).
"""

from __future__ import annotations

from typing import Final

import pytest

from agent_meta.sdk._release import installed_release

__all__ = ["RELEASE", "needs_reference_agent", "needs_run_agent", "needs_session_info"]

RELEASE: Final = installed_release()

NO_RUN_AGENT: Final = (
    f"agent-client-protocol {RELEASE.version} is SDK 0.6's API generation (no run_agent, "
    "camelCase handlers), which this test's agent is not written for; tests/test_sdk06.py runs "
    "a 0.6 agent"
)

needs_run_agent: Final = pytest.mark.skipif(not RELEASE.runs_agent, reason=NO_RUN_AGENT)
"""The test's agent is served by ``acp.run_agent`` with snake_case handlers (0.7 on)."""

needs_session_info: Final = pytest.mark.skipif(
    not RELEASE.session_info,
    reason=f"agent-client-protocol {RELEASE.version} has no SessionInfoUpdate (0.7.1 on): the "
    "test's agent cannot send a session_info_update through the SDK",
)
"""The test's agent sends ``session_info_update`` through the SDK (0.7.1 on)."""

REFERENCE_AGENT_SKIP: Final = (
    None
    if RELEASE.runs_agent and RELEASE.session_info
    else f"the SDK reference agent (--runtime sdk) needs agent-client-protocol 0.7.1 or later "
    f"(run_agent, SessionInfoUpdate, resume); {RELEASE.version} is installed"
)

needs_reference_agent: Final = pytest.mark.skipif(
    REFERENCE_AGENT_SKIP is not None, reason=REFERENCE_AGENT_SKIP or ""
)
"""The test runs ``agent-meta agent --runtime sdk`` (0.7.1 on)."""
