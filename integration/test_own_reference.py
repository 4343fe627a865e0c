"""The real-client suites, run again with ``agent-meta own`` in front of the reference agent.

The reference agent already keeps every rule itself, on both of its runtimes (trio, and the
official SDK with agent_meta's adapter): under ``own`` its clients must see the same, the
child's own resync taken as its state and not repeated, its requests and their answers passed
through. On v1 the reference agent sends whole merged objects, so ``own`` reads them with
``--child-meta replace``. These are the very test functions of the suites they come from; only
the agent command differs (the ``under_own`` fixture).
"""

from __future__ import annotations

import sys

import pytest

from integration import harness, test_python_sdk, test_typescript_v1, test_typescript_v2

pytestmark = pytest.mark.usefixtures("agent_runtime", "under_own")


@pytest.fixture
def under_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """``agent_command()`` wrapped in ``agent-meta own --child-meta replace --``."""
    plain = harness.agent_command

    def owned(*extra: str, runtime: str | None = None) -> list[str]:
        own = [sys.executable, "-m", "agent_meta", "own", "--child-meta", "replace", "--"]
        return [*own, *plain(*extra, runtime=runtime)]

    monkeypatch.setattr(harness, "agent_command", owned)


@pytest.mark.usefixtures("node")
@pytest.mark.acp_v2
def test_typescript_v2_resume_without_and_with_replay() -> None:
    test_typescript_v2.test_resume_without_and_with_replay()


@pytest.mark.usefixtures("node")
@pytest.mark.acp_v2
def test_typescript_v2_close_then_resume_starts_a_fresh_lifetime() -> None:
    test_typescript_v2.test_close_then_resume_starts_a_fresh_lifetime()


@pytest.mark.usefixtures("node")
@pytest.mark.acp_v2
def test_typescript_v2_ask_passes_the_request_and_its_answer() -> None:
    test_typescript_v2.test_ask_sends_request_permission_and_the_answer_reaches_the_prompt()


@pytest.mark.usefixtures("node")
def test_typescript_v1_resume_and_load_resync_the_whole_state() -> None:
    test_typescript_v1.test_resume_and_load_resync_the_whole_state()


def test_python_sdk_load_and_resume_resync_after_replay_before_response() -> None:
    test_python_sdk.test_load_and_resume_resync_after_replay_before_response()
