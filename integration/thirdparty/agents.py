"""The real agents: how each is started, offline, in its own venv, with or without agent_meta.

Only the model is stubbed: fast-agent runs its built-in ``passthrough`` model, pydantic-acp
pydantic-ai's ``TestModel``, langchain-acp langchain's ``GenericFakeChatModel``; the others point
their OpenAI-compatible provider at :mod:`integration.thirdparty.echo_server`. Each agent's
state (sessions, logs, config) lives in a fresh directory per run, ``HOME`` included.

Three ways to start each (``mode``):

- ``zero-code``: ``agent-meta run --import integration.thirdparty.meta_control -- AGENT_CMD``,
  the agent unchanged (the extension only serves the test's control channel);
- ``glue``: a launcher with the five-line adoption (kimi-cli and hermes-agent, whose own ``main``
  ends in ``asyncio.run(acp.run_agent(agent, ...))``; see :attr:`Agent.no_glue` for the others);
- ``baseline``: ``AGENT_CMD`` alone, with the plain-SDK extension
  (:mod:`integration.thirdparty.plain_control`) for the same control operations.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parent.parent
MODES: Final = ("zero-code", "glue", "baseline")
EXTENSION: Final = "integration.thirdparty.meta_control"

VIBE_CONFIG: Final = """\
active_model = "echo"
enable_telemetry = false
enable_update_checks = false
enable_notifications = false
experimental_enable_model_catalog = false

[[providers]]
name = "llamacpp"
api_base = "{base_url}"
api_key_env_var = ""

[[models]]
name = "echo-model"
provider = "llamacpp"
alias = "echo"
thinking = "off"

[utility_models]
title = "active"
smart_approve = "active"
"""

#: ``context_length`` keeps hermes from looking the model up on openrouter.ai.
HERMES_CONFIG: Final = """\
model:
  provider: custom
  default: echo-model
  base_url: {base_url}
  api_key: no-key-required
  context_length: 128000
auxiliary:
  title_generation:
    provider: custom
    model: echo-model
    base_url: {base_url}
    api_key: no-key-required
"""

KIMI_CONFIG: Final = """\
default_model = "echo"

[models.echo]
provider = "local"
model = "echo-model"
max_context_size = 128000

[providers.local]
type = "openai_legacy"
base_url = "{base_url}"
api_key = "sk-offline-placeholder"
"""

#: box-agent's ``~/.box-agent/config/config.yaml``: the echo model, and nothing that starts
#: other services (memory extraction, MCP servers, skills).
BOX_CONFIG: Final = """\
api_key: "sk-offline-placeholder"
api_base: "{base_url}"
model: "echo-model"
provider: "openai"
enable_memory: false
enable_memory_extraction: false
tools:
  enable_mcp: false
  enable_skills: false
"""

#: kimi's ACP server refuses session/new and session/load without a Kimi Code token file,
#: whatever the provider; this one is only read, never sent (the provider is the echo model).
KIMI_CREDENTIALS: Final = {
    "access_token": "offline-placeholder",
    "refresh_token": "offline-placeholder",
    "expires_at": 4102444800.0,
    "scope": "",
    "token_type": "Bearer",
    "expires_in": 0.0,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Agent:
    """One third-party agent and what the tests may expect of it."""

    name: str
    package: str
    """The PyPI package and version."""
    sdk: str
    """The ``agent-client-protocol`` release it pins."""
    load: bool
    """``session/load`` works (advertised)."""
    resume: bool
    """``session/resume`` is advertised."""
    close: bool
    """``session/close`` is answered with success (advertised or not)."""
    late_title: bool
    """It publishes a generated title after the prompt's response (an ``echo:`` title here)."""
    own_updates: int
    """How many ``session_info_update`` frames it sends itself for the first prompt."""
    own_meta: tuple[str, ...]
    """The top-level ``_meta`` keys of its own updates."""
    replays: tuple[str, ...]
    """The steps (``load``, ``resume``) that replay the history in the same process."""
    command_line: tuple[str, ...]
    """The agent's own command: ``{bin}`` is its venv's ``bin``, ``{here}`` this folder (the
    launchers of agents that have no command of their own), ``{state}`` the run's state."""
    glue: str | None = None
    """The launcher with the five-line adoption, next to this module."""
    no_glue: str = ""
    """Why there is no launcher."""
    client_name: str = "agent-meta-thirdparty"
    """The ``clientInfo.name`` the scenario's client sends."""
    new_meta: bool = False
    """It publishes in its ``session/new`` handler, before the response (issue 27, item 1)."""
    fresh_info_on_load: bool = False
    """Its ``session/load`` handler sends its current info with a fresh ``updatedAt`` after the
    replay (issue 27, item 2)."""
    ends_at_end_of_input: bool = True
    """It exits once its input ends. SDK 0.6 agents wait forever (the SDK's own examples do):
    the scenario then ends it with SIGTERM, as a client does."""
    notes: str = ""
    """What the scenario's expectations rest on, where the agent's advertised capabilities
    say otherwise."""

    def command(self, bin_dir: Path, state: Path, *, glue: bool = False) -> list[str]:
        """The agent's own command (``glue``: the launcher's)."""
        if glue:
            assert self.glue is not None, self.no_glue
            return [str(bin_dir / "python"), str(HERE / self.glue)]
        places = {"bin": str(bin_dir), "here": str(HERE), "state": str(state)}
        return [part.format(**places) for part in self.command_line]

    @property
    def exit_status(self) -> dict[str, int]:
        """The status each mode exits with at the end of the scenario."""
        if self.ends_at_end_of_input:
            return {"zero-code": 0, "glue": 0, "baseline": 0}
        # Killed by the scenario's SIGTERM: agent-meta run reports it as a shell does.
        return {"zero-code": 128 + 15, "glue": 128 + 15, "baseline": -15}

    def argv(self, mode: str, bin_dir: Path, state: Path) -> list[str]:
        """The command for ``mode`` (see the module docstring)."""
        command = self.command(bin_dir, state, glue=mode == "glue")
        if mode == "zero-code":
            return [str(bin_dir / "agent-meta"), "run", "--import", EXTENSION, "--", *command]
        return command

    def environment(self, mode: str, bin_dir: Path, state: Path, base_url: str) -> dict[str, str]:
        """Write the agent's offline configuration under ``state``; its environment."""
        home = state / "home"
        home.mkdir(parents=True, exist_ok=True)
        boot = [str(HERE / "baseline_boot")] if mode == "baseline" else []
        env = {
            "PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONPATH": os.pathsep.join([*boot, str(REPO)]),
        }
        if self.name == "mistral-vibe":
            vibe_home = state / "vibe-home"
            vibe_home.mkdir()
            (vibe_home / "config.toml").write_text(VIBE_CONFIG.format(base_url=base_url))
            env["VIBE_HOME"] = str(vibe_home)
        elif self.name == "hermes-agent":
            hermes_home = state / "hermes-home"
            hermes_home.mkdir()
            (hermes_home / "config.yaml").write_text(HERMES_CONFIG.format(base_url=base_url))
            env["HERMES_HOME"] = str(hermes_home)
        elif self.name == "bub":
            env |= {
                "BUB_HOME": str(state / "bub-home"),
                "BUB_MODEL": "openai:echo-model",
                "BUB_API_KEY": "sk-offline-placeholder",
                "BUB_API_BASE": base_url,
            }
        elif self.name == "gptme":
            env |= {
                "MODEL": "local/echo-model",
                "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": "sk-offline-placeholder",
            }
        elif self.name == "box-agent":
            config = home / ".box-agent" / "config"
            config.mkdir(parents=True)
            (config / "config.yaml").write_text(BOX_CONFIG.format(base_url=base_url))
        elif self.name == "kimi-cli":
            share = state / "kimi-share"
            (share / "credentials").mkdir(parents=True)
            (share / "config.toml").write_text(KIMI_CONFIG.format(base_url=base_url))
            (share / "credentials" / "kimi-code.json").write_text(json.dumps(KIMI_CREDENTIALS))
            env |= {
                "KIMI_SHARE_DIR": str(share),
                "KIMI_CLI_NO_AUTO_UPDATE": "1",
                "KIMI_DISABLE_TELEMETRY": "1",
            }
        return env


AGENTS: Final = {
    a.name: a
    for a in (
        Agent(
            "fast-agent",
            "fast-agent-mcp 0.10.48",
            "0.12.1",
            load=True,
            resume=True,
            close=False,
            late_title=False,
            own_updates=1,
            own_meta=(),
            replays=("load", "resume"),
            command_line=(
                "{bin}/fast-agent-acp",
                "--model",
                "passthrough",
                "--home",
                "{state}/fast-agent-home",
            ),
            no_glue="its `fast-agent-acp` builds a whole FastAgent application (CLI, runtime, "
            "model factory) before `AgentACPServer.run_async()` calls `run_agent`; a launcher "
            "would copy that start-up, so the diff belongs in its source "
            "(`agent_acp_server.py:904`)",
        ),
        Agent(
            "mistral-vibe",
            "mistral-vibe 3.0.2",
            "0.11.0",
            load=True,
            resume=False,
            close=True,
            late_title=True,
            own_updates=2,
            own_meta=(),
            replays=("load",),
            command_line=("{bin}/vibe-acp",),
            no_glue="`run_agent` is called from the private `_serve_acp_agent`, after about "
            "40 lines of `vibe-acp` start-up (home, harness files, logging, dotenv, "
            "orchestrator, telemetry, the experimental-harness gate, a SIGTERM handler); a "
            "launcher would copy them, so the diff belongs in its source (`agent.py:1856`)",
        ),
        Agent(
            "hermes-agent",
            "hermes-agent 0.19.0 [acp]",
            "0.9.0",
            load=True,
            resume=True,
            close=True,
            late_title=True,
            own_updates=1,
            own_meta=("hermes",),
            replays=("load", "resume"),
            command_line=("{bin}/hermes-acp",),
            glue="hermes_launcher.py",
        ),
        Agent(
            "kimi-cli",
            "kimi-cli 1.52.0",
            "0.8.0",
            load=True,
            resume=True,
            close=False,
            late_title=False,
            own_updates=0,
            own_meta=(),
            replays=(),
            # The `kimi` console script of 1.52.0 only prints a deprecation notice (and runs an
            # installer when given no arguments); its ACP server is started as `kimi acp` did.
            command_line=(
                "{bin}/python",
                "-c",
                "from kimi_cli.acp import acp_main; acp_main()",
            ),
            glue="kimi_launcher.py",
        ),
        Agent(
            "pydantic-acp",
            "pydantic-acp 1.10.0",
            "0.12.1",
            load=True,
            resume=False,
            close=False,
            late_title=False,
            own_updates=1,
            own_meta=("pydantic_acp",),
            replays=("load",),
            command_line=("{bin}/python", "{here}/pydantic_acp_agent.py"),
            no_glue="`run_acp` ends in `asyncio.run(run_agent(adapter))` inside "
            "`pydantic_acp.runtime.server` (`server.py:65`); the one-line change belongs there",
            new_meta=True,
            fresh_info_on_load=True,
            notes="it advertises session/resume, fork and close, but its `run_agent` call has "
            "no `use_unstable_protocol=True`, so the SDK answers them -32601: the scenario "
            "expects that",
        ),
        Agent(
            "langchain-acp",
            "langchain-acp 1.10.0",
            "0.12.1",
            load=True,
            resume=False,
            close=False,
            late_title=False,
            own_updates=1,
            own_meta=(),
            replays=("load",),
            command_line=("{bin}/python", "{here}/langchain_acp_agent.py"),
            no_glue="`run_acp` ends in `asyncio.run(run_agent(adapter))` inside "
            "`langchain_acp.runtime.server` (`server.py:63`); the one-line change belongs there",
            notes="it advertises session/resume, fork and close, but its `run_agent` call has "
            "no `use_unstable_protocol=True`, so the SDK answers them -32601: the scenario "
            "expects that",
        ),
        Agent(
            "bub",
            "bub-acp-server 0.1.1 (bub 0.5.1)",
            "1.0.0rc2",
            load=True,
            resume=True,
            close=True,
            late_title=True,
            own_updates=1,
            own_meta=("lody",),
            replays=("load",),
            command_line=("{bin}/bub", "acp"),
            no_glue="`bub acp` is a plugin of the bub framework, whose `run_acp_agent` calls "
            "`run_agent` (`agent.py:1501`); the one-line change belongs there",
            client_name="lody (agent-meta-thirdparty)",
            notes="it generates a session title only for clients whose name starts with "
            "`lody` (`agent.py:544`): the scenario's client is named so",
        ),
        Agent(
            "gptme",
            "gptme-acp 0.35.1 (gptme 0.35.1)",
            "0.12.1",
            load=True,
            resume=False,
            close=False,
            late_title=False,
            own_updates=0,
            own_meta=(),
            replays=(),
            command_line=("{bin}/gptme-acp",),
            no_glue="`gptme-acp` duplicates its stdio and hands `run_agent` the duplicates "
            "(`gptme/acp/__main__.py:183`); the one-line change belongs there",
            notes="its load answers first and sends its `Resumed session` chunk after the "
            "response (no replay before it); it advertises session/resume, which the SDK "
            "answers -32601 (no `use_unstable_protocol`)",
        ),
        Agent(
            "box-agent",
            "box-agent 0.9.7",
            "0.6.3",
            load=False,
            resume=False,
            close=False,
            late_title=False,
            own_updates=0,
            own_meta=(),
            replays=(),
            command_line=("{bin}/box-agent-acp",),
            no_glue="it builds SDK 0.6's `AgentSideConnection` itself in `run_acp_server` "
            "(`box_agent/acp/__init__.py:5864`) and waits forever; the one-line change "
            "(`agent_meta.sdk.run_agent(factory)` for both) belongs there",
            ends_at_end_of_input=False,
            notes="SDK 0.6: no session/list (the scenario's barrier gets -32601, a response all "
            "the same), no session/close, no SessionInfoUpdate; `loadSession: false`",
        ),
    )
}

SELECTION_ENV: Final = "AGENT_META_THIRDPARTY_AGENTS"
"""A comma-separated list of the agents to run (:data:`AGENTS`' names, and ``deepagents`` for
:mod:`.test_deepagents`); unset, every agent runs. ``nox -s thirdparty`` sets it to CI's
selection, ``nox -s thirdparty_all`` leaves it unset."""
DEEPAGENTS: Final = "deepagents"


def _named(variable: str, among: tuple[str, ...], known: tuple[str, ...]) -> tuple[str, ...]:
    """The names of ``among`` that the comma-separated ``variable`` lists, in ``among``'s order;
    all of them when it is unset or empty. A name outside ``known`` is an error."""
    chosen = os.environ.get(variable)
    if not chosen:
        return among
    names = {name.strip() for name in chosen.split(",") if name.strip()}
    unknown = sorted(names - set(known))
    if unknown:
        raise ValueError(f"{variable} names unknown agents: {', '.join(unknown)}")
    return tuple(name for name in among if name in names)


def selected() -> tuple[str, ...]:
    """The agents this run is for (:data:`SELECTION_ENV`), in :data:`AGENTS`' order."""
    every = (*AGENTS, DEEPAGENTS)
    return _named(SELECTION_ENV, every, every)


CHECKS_ENV: Final = "AGENT_META_THIRDPARTY_CHECKS"
"""A comma-separated list of the selected agents whose ``agent-meta check`` verdicts run (two
checks each, the slowest tests of the suite); unset, every selected agent's."""


def judged() -> tuple[str, ...]:
    """The selected agents whose check verdicts run (:data:`CHECKS_ENV`)."""
    agents = tuple(name for name in selected() if name in AGENTS)
    return _named(CHECKS_ENV, agents, tuple(AGENTS))
