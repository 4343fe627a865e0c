"""``agent-meta check`` against real agent subprocesses: the reference agent passes, each broken
agent in ``tests/broken_agents`` fails by the name of the one rule it breaks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_meta.tools._check import _offer, check
from agent_meta.tools._peer import AgentPeer

ROOT = Path(__file__).resolve().parent.parent

#: A hung check fails its test instead of the suite.
BOUND = 120

REFERENCE_AGENTS = [
    pytest.param([sys.executable, "-m", "agent_meta", "agent"], id="trio"),
    # The official-SDK example agent goes here (one more parametrization) once it exists.
]

#: Prompts in the broken agents' grammar: set, nested null, remove, clear.
PROMPTS = [
    '/title Broken\n/meta set stage "working"\n/meta set a 1\n/meta set b {"x":null}',
    "/meta rm a\n/meta set c [1]",
    "/meta clear\n/meta set d true",
]
#: Edits of one key, so that the order of the frames decides what the client holds.
SAME_KEY = ["/meta set n 1\n/meta set n 2\n/meta set n 3"]


def run_check(agent: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_meta", "check", *args, "--", *agent],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )


def report(agent: list[str], *args: str) -> tuple[int, dict[str, Any]]:
    done = run_check(agent, "--json", *args)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def statuses(document: dict[str, Any]) -> dict[int, dict[str, str]]:
    return {
        run["protocol"]: {rule["id"]: rule["status"] for rule in run["rules"]}
        for run in document["runs"]
    }


def failed(document: dict[str, Any]) -> dict[int, set[str]]:
    return {
        version: {rule for rule, status in found.items() if status == "fail"}
        for version, found in statuses(document).items()
    }


def prompts(texts: list[str]) -> list[str]:
    return [arg for text in texts for arg in ("--prompt", text)]


def broken(name: str) -> list[str]:
    return [sys.executable, "-m", f"tests.broken_agents.{name}"]


# --------------------------------------------------------------------------- passing agents


@pytest.mark.parametrize("agent", REFERENCE_AGENTS)
def test_the_reference_agent_passes_on_v1_and_v2(agent: list[str]) -> None:
    status, document = report(agent)
    assert status == 0, json.dumps(document, indent=1)
    assert document["ok"] is True
    assert [run["protocol"] for run in document["runs"]] == [1, 2]
    for run in document["runs"]:
        assert run["offered"]
        assert run["script"]
        assert run["error"] is None
        assert any("(reopen, replay)" in step for step in run["steps"])
    found = statuses(document)
    for version in (1, 2):
        for rule in ("json", "shape", "resync", "fence", "state"):
            assert found[version][rule] == "pass", (version, rule)
        assert found[version]["updated-at"] == "not exercised"
    assert found[1]["v1-meaning"] == "pass"
    assert found[2]["v1-meaning"] == "not exercised"


@pytest.mark.parametrize("agent", REFERENCE_AGENTS)
def test_the_text_report(agent: list[str]) -> None:
    done = run_check(agent, "--prompt", "/title extra")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "result: pass"
    assert "protocol 1: agent-meta-reference (its command grammar drives the prompts)" in lines
    assert "  pass           resync" in lines
    assert "  not exercised  updated-at  (the agent sent no updatedAt)" in lines
    assert any(line.startswith("  resync      after session/load") for line in lines)
    assert "session/prompt '/title extra'" in done.stdout  # --prompt comes after the script


#: An official-SDK agent that calls acp.run_agent and replays its history on session/load,
#: removals ({"a": null}) included.
SDK_PLAIN_AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent", "plain"]
REMOVAL = ["meta a 1", "meta b 2", "meta a null"]


def test_an_sdk_agent_under_agent_meta_run_passes_v1_with_a_replayed_removal() -> None:
    """Under ``agent-meta run`` the live removal goes out as the whole object; the load's
    replay passes the agent's ``{"a": null}`` through as it was sent (docs/sdk.md, "Replay is
    replay"), and the resync replaces it before the response: replay, not a v1 frame."""
    supervised = [sys.executable, "-m", "agent_meta", "run", "--", *SDK_PLAIN_AGENT]
    status, document = report(supervised, "--protocol", "1", *prompts(REMOVAL))
    assert status == 0, json.dumps(document, indent=1)
    (run,) = document["runs"]
    assert "session/load (replay)" in run["steps"]
    found = statuses(document)[1]
    assert found["v1-meaning"] == found["resync"] == "pass", found


def test_the_same_sdk_agent_alone_fails_v1_meaning_on_its_live_removal() -> None:
    status, document = report(SDK_PLAIN_AGENT, "--protocol", "1", *prompts(REMOVAL))
    assert status == 1
    assert failed(document) == {1: {"v1-meaning"}}
    (run,) = document["runs"]
    (rule,) = (rule for rule in run["rules"] if rule["id"] == "v1-meaning")
    live, replayed = rule["findings"]  # the prompt's frame; the replay's, left standing
    assert "stores 'a' as null" in live["message"]
    assert "window" not in live["message"]
    assert "no later _meta object replaced it before the response" in replayed["message"]


# --------------------------------------------------------------------------- broken agents


@pytest.mark.parametrize(
    ("name", "texts", "expected"),
    [
        ("correct", PROMPTS, {1: set(), 2: set()}),
        ("correct", SAME_KEY, {1: set(), 2: set()}),
        # Its replay carries the session's first title, and nothing restores the current one.
        ("no_resync", PROMPTS, {1: {"resync", "title"}, 2: {"resync", "title"}}),
        ("no_title_restore", PROMPTS, {1: {"title"}, 2: {"title"}}),
        ("null_without_snapshot", PROMPTS, {1: {"resync", "title"}, 2: {"resync", "title"}}),
        ("late_publication", PROMPTS, {1: set(), 2: set()}),
        ("frame_after_close", PROMPTS, {1: {"fence"}, 2: {"fence"}}),
        ("v1_patches", PROMPTS, {1: {"v1-meaning"}, 2: set()}),
        ("out_of_order", SAME_KEY, {1: {"state"}, 2: {"state"}}),
    ],
)
def test_each_broken_agent_fails_by_its_rule(
    name: str, texts: list[str], expected: dict[int, set[str]]
) -> None:
    # These agents answer before they return, but one: a short quiet window keeps them quick,
    # and the late publisher is judged with the default window.
    quiet = () if name == "late_publication" else ("--quiet-ms", "20")
    status, document = report(broken(name), *quiet, *prompts(texts))
    assert failed(document) == expected, json.dumps(document, indent=1)
    assert status == (1 if any(expected.values()) else 0)
    for run in document["runs"]:
        assert run["error"] is None
        for rule in run["rules"]:
            for finding in rule["findings"]:
                assert finding["frames"], finding  # a failure shows its frames


def test_the_text_report_names_the_rule_and_quotes_the_frames() -> None:
    done = run_check(broken("frame_after_close"), "--protocol", "2", *prompts(PROMPTS))
    assert done.returncode == 1
    assert "  FAIL           fence" in done.stdout.splitlines()
    assert '"_meta":{"closed":true}' in done.stdout
    assert done.stdout.splitlines()[-1] == "result: FAIL: fence (v2)"


def test_a_resync_without_its_snapshot_is_named_without_session_list() -> None:
    status, document = report(broken("null_without_snapshot"), *prompts(PROMPTS))
    assert status == 1
    for run in document["runs"]:
        assert not any(step.startswith("session/list") for step in run["steps"])
        rules = {rule["id"]: rule for rule in run["rules"]}
        assert rules["state"]["status"] == "not exercised"
        messages = [finding["message"] for finding in rules["resync"]["findings"]]
        # The load/resume with replay and the resume without: each clears and restores nothing.
        assert len(messages) == 2, messages
        for message in messages:  # what the agent had published last
            assert 'no snapshot of {"d":true}' in message, message


def test_publications_after_the_prompt_response_are_waited_for() -> None:
    """hermes-agent publishes a title from a worker thread about 35 ms after it answers the
    prompt; this agent publishes 50 ms after. check judges each step once the agent has been
    quiet for --quiet-ms (200 by default), so it compares the state the late frames made."""
    status, document = report(broken("late_publication"), *prompts(PROMPTS))
    assert status == 0, json.dumps(document, indent=1)
    for version, found in statuses(document).items():
        for rule in ("json", "shape", "resync", "fence", "state"):
            assert found[rule] == "pass", (version, rule)
    for run in document["runs"]:
        assert not [step for step in run["steps"] if "quiet" in step], run["steps"]


#: Sends a notification every 10 ms until its stdin ends: it never falls quiet.
CHATTY_AGENT = textwrap.dedent(
    """
    import os, sys, threading, time
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    while True:
        sys.stdout.write('{"jsonrpc":"2.0","method":"tick"}\\n')
        sys.stdout.flush()
        time.sleep(0.01)
    """
)


async def test_the_wait_for_quiet_is_bounded() -> None:
    async with AgentPeer.spawn([sys.executable, "-c", CHATTY_AGENT], answer_within=BOUND) as peer:
        assert await peer.wait_quiet(0.5, within=1.0) is False
        assert len(peer.frames) > 5
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    async with AgentPeer.spawn(silent, answer_within=BOUND) as peer:
        assert await peer.wait_quiet(0.05, within=BOUND) is True


# --------------------------------------------------------------------------- what is offered

SILENT_AGENT = textwrap.dedent(
    """
    import json, sys
    results = {
        "initialize": {"protocolVersion": 2, "info": {"name": "silent"},
                       "capabilities": {"session": {}}},
        "session/new": {"sessionId": "quiet"},
        "session/list": {"sessions": [{"sessionId": "quiet", "cwd": "/"}]},
    }
    for line in sys.stdin:
        message = json.loads(line)
        answer = {"jsonrpc": "2.0", "id": message["id"],
                  "result": results.get(message["method"], {})}
        sys.stdout.write(json.dumps(answer) + "\\n")
        sys.stdout.flush()
    """
)


def test_an_agent_that_publishes_nothing_exercises_little() -> None:
    status, document = report([sys.executable, "-c", SILENT_AGENT], "--timeout", "2")
    assert status == 0
    v1, v2 = document["runs"]
    assert v1["offered"] is False
    assert v2["steps"][2] == "session/prompt 'Hello from agent-meta check.'"
    # A v2 turn must end with an idle state_update; this agent never sends one.
    assert v2["steps"][3] == (
        "session/prompt 'Hello from agent-meta check.': the turn did not report idle"
    )
    found = statuses(document)[2]
    assert found.pop("json") == found.pop("fence") == "pass"
    assert set(found.values()) == {"not exercised"}
    reasons = {rule["id"]: rule["reason"] for rule in v2["rules"]}
    assert reasons["shape"] == "the agent published no metadata"
    assert reasons["state"] == "session/list entries carry no _meta"


def test_a_version_asked_for_but_not_offered_fails() -> None:
    v1_only = [sys.executable, "-m", "agent_meta", "agent", "--protocol", "1"]
    status, document = report(v1_only)
    assert status == 0
    assert [run["offered"] for run in document["runs"]] == [True, False]
    done = run_check(v1_only, "--protocol", "2")
    assert done.returncode == 1
    assert "protocol 2: agent-meta-reference: not offered" in done.stdout


def test_an_agent_that_never_answers_is_an_error() -> None:
    mute = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    done = run_check(mute, "--protocol", "1", "--timeout", "0.5")
    assert done.returncode == 1
    assert "did not answer initialize within 0.5 s" in done.stdout


def test_an_agent_that_exits_is_an_error() -> None:
    done = run_check([sys.executable, "-c", "pass"], "--protocol", "1")
    assert done.returncode == 1
    assert "the agent's output ended before it answered initialize" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--"],
        ["--timeout", "0", "--", "x"],
        ["--protocol", "3", "--", "x"],
        ["--quiet-ms", "-1", "--", "x"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", "check", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 2
    assert "agent-meta check" in done.stderr


def test_a_missing_agent_is_reported() -> None:
    done = run_check([str(ROOT / "no-such-agent")])
    assert done.returncode == 127
    assert "cannot start the agent" in done.stderr


# --------------------------------------------------------------------------- initialize


def test_offers_are_read_from_initialize() -> None:
    v1 = _offer(
        {
            "protocolVersion": 1,
            "agentInfo": {"name": "a"},
            "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"close": {}}},
        }
    )
    assert (v1.version, v1.name, v1.load, v1.resume, v1.close, v1.list) == (
        1, "a", True, False, True, False,
    )  # fmt: skip
    v2 = _offer({"protocolVersion": 2, "info": {"name": "b"}, "capabilities": {"session": {}}})
    assert (v2.version, v2.name, v2.load, v2.resume, v2.close, v2.list) == (
        2, "b", False, True, True, True,
    )  # fmt: skip
    assert _offer("nonsense").version == 0
    assert _offer({"protocolVersion": "2"}).version == 0


@pytest.mark.parametrize(
    ("name", "child_meta"),
    [
        ("no_resync", "replace"),  # its v1 frames are whole objects
        ("null_without_snapshot", "replace"),
        ("no_title_restore", "replace"),
        ("frame_after_close", "replace"),
        ("v1_patches", "patch"),  # its v1 frames are partial objects
    ],
)
def test_agent_meta_own_repairs_what_these_agents_break(name: str, child_meta: str) -> None:
    """The same agents, each failing alone (above), pass under ``agent-meta own``."""
    own = [sys.executable, "-m", "agent_meta", "own", "--child-meta", child_meta, "--"]
    status, document = report([*own, *broken(name)], "--quiet-ms", "20", *prompts(PROMPTS))
    assert failed(document) == {1: set(), 2: set()}, json.dumps(document, indent=1)
    assert status == 0


AIR = {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": ["sessionFailure"]}}}}


async def test_the_client_capabilities_given_are_announced() -> None:
    done = await check(broken("correct"), versions=(1, 2), capabilities=AIR, quiet=0)
    announced = []
    for run in done.runs:
        assert run.peer is not None
        params = run.peer.frames[0].message["params"]  # type: ignore[index]
        announced.append(params["clientCapabilities" if run.protocol == 1 else "capabilities"])
    assert announced == [AIR, AIR]


@pytest.mark.parametrize("value", ["[1]", "not json", "3"])
def test_client_capabilities_that_are_no_object_are_a_usage_error(value: str) -> None:
    done = run_check(broken("correct"), "--client-capabilities", value)
    assert done.returncode == 2
    assert "--client-capabilities" in done.stderr


def test_a_v1_updated_at_is_sent_but_not_judged_and_says_so() -> None:
    stamp = ["--prompt", "/updated 2026-01-01T00:00:00"]  # ISO 8601 without an offset
    _, document = report(broken("correct"), "--quiet-ms", "20", *stamp)
    rules = {
        run["protocol"]: {rule["id"]: rule for rule in run["rules"]} for run in document["runs"]
    }
    assert rules[1]["updated-at"]["status"] == "not exercised"
    assert "v1 stamps are not judged" in rules[1]["updated-at"]["reason"]
    assert rules[2]["updated-at"]["status"] == "fail"  # v2 wants an offset
