"""Developer sessions. CI runs ``nox -s tests lint docs integration sdk_matrix sdk_v2 thirdparty``
(the README's test command, ``.ci/run``); ``coverage``, ``sdk_releases``, ``thirdparty_all``,
``bench``, ``bench_sdk`` and ``bench_smoke`` are for developers.

Each session builds its own virtualenv under ``.nox/`` and installs the project with the extras
it needs, so a session proves that the declared dependencies are enough.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import nox

nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests", "lint", "docs", "integration"]
# uv builds each session's venv in seconds where virtualenv and pip take minutes (most of a CI
# run was installs); without uv on PATH, nox falls back to virtualenv and pip.
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = "3.11"
ROOT = Path(__file__).parent
NODE_CLIENT = ROOT / "integration" / "node"
CODEX_AGENT = ROOT / "integration" / "codex"
"""codex-acp 2.6.0 from npm, which ``agent-meta own`` is tested in front of (about 450 MB)."""
THIRDPARTY = ROOT / "integration" / "thirdparty"
SDK_PINNED = "0.12.1"
"""The SDK release ``tests`` runs the whole suite on (the demo's pin); ``sdk_matrix`` adds the
oldest and the newest."""
_SHORT_TIMEOUT = {"UV_HTTP_TIMEOUT": "30"}
THIRDPARTY_VENVS = "AGENT_META_THIRDPARTY_BUILDS"
"""The report of the agent venvs' build (``integration/thirdparty/venvs.py``) the tests read."""
THIRDPARTY_SELECTION = "AGENT_META_THIRDPARTY_AGENTS"
"""The agents the tests run (``integration/thirdparty/agents.py``); unset, all of them."""
THIRDPARTY_CHECKS = "AGENT_META_THIRDPARTY_CHECKS"
"""The agents whose ``agent-meta check`` verdicts run; unset, every selected agent's."""


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit, property and actor tests; extra arguments go to pytest.

    The PostgreSQL store's tests start a throwaway server (``tests/support/postgres_server.py``).
    """
    session.install("-e", ".[test,timeline,sdk,postgres]", f"agent-client-protocol=={SDK_PINNED}")
    # Two workers (pytest-xdist): most tests wait on pipes and subprocesses, so two workers
    # halve the wall time on a 2-core machine.
    session.run("pytest", "-n", "2", "tests", *session.posargs)


@nox.session(python=PYTHON)
def coverage(session: nox.Session) -> None:
    """``tests`` with branch coverage, combined across the workers by pytest-cov (not in CI:
    tracing makes the run about 60 % longer on Python 3.11)."""
    session.install("-e", ".[test,timeline,sdk,postgres]", f"agent-client-protocol=={SDK_PINNED}")
    session.run(
        "pytest", "-n", "2", "--cov", "--cov-report=term-missing:skip-covered", "tests",
        *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint, format), mypy --strict, the import-layer contracts, no runtime import
    circle, the complexity limit (and, as information, the largest modules and classes)."""
    session.install("-e", ".[lint,test,demo,sdk-http,postgres,websocket]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")  # the layer contracts of docs/architecture.md
    session.run("python", "scripts/import_cycles.py")  # no module imports its importer
    session.run("python", "scripts/complexity.py")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site; any mkdocs warning fails the build."""
    session.install("-e", ".[docs,sdk]")
    # NO_MKDOCS_2_WARNING silences mkdocs-material's end-of-life banner (not a build warning).
    session.run(
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        str(ROOT / "site"),
        env={"NO_MKDOCS_2_WARNING": "1"},
    )


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Real clients (Python SDK, TypeScript SDK under Node) against the reference agent, and
    the SDK adapter over stdio, WebSocket and streamable HTTP; ``agent-meta own`` in front of
    the reference agent and of codex-acp from npm (offline, a fake model server on loopback)."""
    session.install("-e", ".[test,demo,sdk-http,postgres,websocket]")
    for node_project in (NODE_CLIENT, CODEX_AGENT):
        if (node_project / "package-lock.json").exists():
            with session.chdir(node_project):
                session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    # pytest exits 5 when it collects nothing, which fails the session like any other error.
    # Third-party agents have their own session (thirdparty): they need a venv of their own.
    # Two workers (pytest-xdist): each test waits on agent processes it starts. The benchmarks'
    # smoke test (tiny counts) keeps the performance suite working.
    session.run(
        "pytest", "-n", "2", "integration", "bench/test_smoke.py", f"--ignore={THIRDPARTY}",
        *session.posargs,
    )  # fmt: skip


SDK_SUITE = [
    "tests/test_sdk_adapter.py",
    "tests/test_sdk_gate.py",
    "tests/test_sdk_v2.py",
    "tests/test_inbound_gate.py",
    "tests/test_sdk_remote.py",
    "tests/test_lifetime_tracker.py",
    "tests/test_sdk_agent.py",
    "tests/test_sdk_agent_v2.py",
    "tests/test_v2_pipe_conformance.py",
    "tests/test_sdk_runtime_pipe.py",
    "tests/test_run.py",
    "tests/test_sdk06.py",
]
"""The adapter's suite: what runs against each SDK release in its own venv. Tests whose agents
need what an old release lacks skip saying so (``tests/sdk_release.py``); ``test_sdk06.py`` is
SDK 0.6's own API generation, and runs there only."""

SDK_RELEASES = [
    "0.6.3",
    "0.7.0",
    "0.7.1",
    "0.8.0",
    "0.8.1",
    "0.9.0",
    "0.10.1",
    "0.11.1",
    "0.12.0",
    "0.12.1",
    "1.0.0rc2",
    "1.0.0rc3",
]
"""The latest patch of every SDK minor agent_meta supports, and the releases that differ within
one: 0.7.0 (no ``SessionInfoUpdate``), 0.8.0, 0.12.0 (the dispatcher with the message
transport), 1.0.0rc2 (bub-acp-server pins it)."""

SDK_MATRIX = ["0.6.3", "1.0.0rc3"]
"""What CI runs: the oldest release and the newest (:data:`SDK_PINNED` runs in ``tests``)."""


def _sdk_suite(session: nox.Session, release: str) -> None:
    session.install("-e", ".[test]", f"agent-client-protocol=={release}")
    # python -m: the suite imports tests.support.sdk_mini_agent from the project root.
    session.run("python", "-m", "pytest", "-n", "2", *SDK_SUITE, *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("release", SDK_MATRIX)
def sdk_matrix(session: nox.Session, release: str) -> None:
    """The adapter's suite on the oldest SDK release and the newest, each in its own venv
    (``nox -s sdk_releases`` runs it on every minor)."""
    _sdk_suite(session, release)


@nox.session(python=PYTHON)
@nox.parametrize("release", SDK_RELEASES)
def sdk_releases(session: nox.Session, release: str) -> None:
    """The adapter's suite on every supported SDK minor (not in CI: ``sdk_matrix`` is)."""
    _sdk_suite(session, release)


@nox.session(python=PYTHON)
def sdk_v2(session: nox.Session) -> None:
    """ACP v2 through the official SDK 1.0 (``agent-meta agent --runtime sdk``) against the
    TypeScript SDK's v2 and v1 clients, each a real agent process, next to the trio runtime:
    the integration half of what ``sdk_matrix`` checks in-process on 1.0; and the demo on the
    SDK 1.0, with either v2 client (``integration/test_demo.py``)."""
    session.install("-e", ".[test,timeline,demo]", f"agent-client-protocol=={SDK_MATRIX[-1]}")
    with session.chdir(NODE_CLIENT):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run(
        "pytest",
        "-n",
        "2",
        "integration/test_typescript_v2.py",
        "integration/test_typescript_v1.py",
        "integration/test_runtimes_agree.py",
        "integration/test_demo.py",
        *session.posargs,
        env={"AGENT_META_RUNTIMES": "sdk"},  # the trio cases ran in nox -s integration
    )
    # The demo's v2 story, on the SDK runtime, under the TypeScript SDK's v2 client.
    session.run("python", "-m", "agent_meta", "demo", "--runtime", "sdk", "--protocol", "2")


THIRDPARTY_CI = ("fast-agent", "kimi-cli", "pydantic-acp", "langchain-acp", "bub")
"""The agents CI runs (``nox -s thirdparty``): the most used agent, on the pinned SDK
(fast-agent); SDK 0.8, zero-code and with the five-line glue (kimi-cli); publications inside
the session/new and session/load handlers (pydantic-acp); langchain-acp; SDK 1.0.0rc2 (bub).
``nox -s thirdparty_all`` runs all ten, in about twice the time: the others add SDK 0.6.3, 0.9
and 0.11, duplicated stdio streams (gptme) and deepagents' own tool."""


THIRDPARTY_CI_CHECKS = ("fast-agent", "pydantic-acp", "langchain-acp")
"""The agents whose check verdicts CI runs: two ``agent-meta check`` runs each are the slowest
tests of the suite (kimi-cli's and bub's run in ``thirdparty_all``)."""


@nox.session(python=PYTHON)
def thirdparty(session: nox.Session) -> None:
    """Real agents from PyPI with agent_meta under them (``integration/thirdparty``), CI's
    selection (:data:`THIRDPARTY_CI`), each in a venv of its own on its own Python and SDK
    release (``.nox/thirdparty-agents``). Extra arguments go to pytest."""
    _thirdparty(session, THIRDPARTY_CI)


@nox.session(python=PYTHON)
def thirdparty_all(session: nox.Session) -> None:
    """Every third-party agent: deepagents-acp (in this session's venv), fast-agent,
    mistral-vibe, hermes-agent, kimi-cli, pydantic-acp, langchain-acp, bub, gptme and
    box-agent. Not in CI: about twice ``thirdparty``'s time, and 1.4 GB of venvs (uv
    links them to its cache)."""
    _thirdparty(session, None)


def _thirdparty(session: nox.Session, agents: tuple[str, ...] | None) -> None:
    """The agent venvs are built in the background (``integration/thirdparty/venvs.py``) while
    the session installs its own requirements. When those cannot be installed (no network, no
    PyPI) the session is skipped and says why; an agent whose venv cannot be built (or that
    finds no Python it runs on) has its tests skipped, saying why.
    ``AGENT_META_THIRDPARTY_REQUIRED=1`` makes both failures."""
    report = Path(session.create_tmp()) / "agent-venvs.json"
    report.unlink(missing_ok=True)
    # The builder takes agent names; deepagents has no venv of its own (this session's).
    builds = [name for name in agents or () if name != "deepagents"]
    builder = subprocess.Popen(  # stdlib only: the session's bare interpreter runs it
        [
            str(Path(session.bin) / "python"),
            str(THIRDPARTY / "venvs.py"),
            *builds,
            "--report",
            str(report),
        ],
        cwd=ROOT,
        start_new_session=True,  # its own process group, so that a skip stops its pips too
    )
    try:
        # Few retries and a short timeout: an offline machine skips in seconds, not minutes.
        if session.venv_backend == "uv":
            session.install("-r", str(THIRDPARTY / "requirements.txt"), env=_SHORT_TIMEOUT)
        else:
            session.install(
                "--retries", "2", "--timeout", "30", "-r", str(THIRDPARTY / "requirements.txt")
            )
    except nox.command.CommandFailed:
        os.killpg(builder.pid, signal.SIGTERM)
        builder.wait()
        if os.environ.get("AGENT_META_THIRDPARTY_REQUIRED") == "1":
            raise
        session.skip(
            "cannot install integration/thirdparty/requirements.txt (no network or no PyPI?); "
            "pip's output is above"
        )
    session.install("-e", ".[sdk,test]")
    if builder.wait() != 0:
        session.error("integration/thirdparty/venvs.py failed (its output is above)")
    env = {THIRDPARTY_VENVS: str(report)}
    if agents is not None:
        env[THIRDPARTY_SELECTION] = ",".join(agents)
        env[THIRDPARTY_CHECKS] = ",".join(THIRDPARTY_CI_CHECKS)
    # Two workers (pytest-xdist): each test waits on agent processes.
    session.run("pytest", "-n", "2", str(THIRDPARTY), *session.posargs, env=env)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """The performance suite (``python -m bench``): prints one table of figures.

    Speed is measured here, never asserted. Extra arguments go to the suite (``--only slow``).
    """
    session.install("-e", ".[test,demo,bench,postgres,sdk-http]")
    session.run("python", "-m", "bench", *session.posargs)


BENCH_SDK = ["0.8.0", "0.12.1", "1.0.0rc3"]
"""The releases ``bench_sdk`` measures: its agents are served by ``acp.run_agent``, which SDK
0.6 does not have."""


@nox.session(python=PYTHON)
@nox.parametrize("release", BENCH_SDK)
def bench_sdk(session: nox.Session, release: str) -> None:
    """The SDK adapter's throughput against the plain SDK (f/b) on one SDK release."""
    session.install("-e", ".[test]", f"agent-client-protocol=={release}")
    session.run("python", "-m", "bench", "--only", "sdk", *session.posargs)


@nox.session(python=PYTHON)
def bench_smoke(session: nox.Session) -> None:
    """The performance suite with tiny counts (a few seconds), so that it keeps working."""
    session.install("-e", ".[test,demo,postgres,sdk-http]")
    session.run("python", "-m", "bench", "--smoke", *session.posargs)
