"""``agent-meta demo``: the reference agent under a real ACP client, as a readable timeline.

The demo spawns ``python -m agent_meta agent`` as a real stdio subprocess under the official
ACP Python SDK client (``agent-client-protocol``, protocol v1) and plays a short story. After
each step it prints every frame the client received, raw and in wire order (from the SDK's
synchronous ``observers=`` hook, never from its handlers, which run as separate tasks), with the
requests the client sent between them, and the metadata the client holds after folding those
frames with :class:`~agent_meta.testing.ClientMirror` (v1 rules). Every step checks what it
shows; the demo ends by comparing the client's folded state with the snapshot the agent itself
sends on a resume, and exits non-zero when anything differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._install_hint import install_hint
from ._print import is_info, print_frames, print_legend
from ._story import STORY, STORY_TIMEOUT, DemoError, Quiet, Stage, Step, Wire, expect

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from ._v2 import Exchange


__all__ = ["main"]

# --- printing ---------------------------------------------------------------------------------


def _print_step(console: Console, number: int, step: Step, stage: Stage, since: int) -> None:
    print_frames(
        console,
        f"{number}. {step.title}",
        step.why,
        stage.wire.traffic[since:],
        stage.wire.requests,
        stage.wire.mirror,
        stage.session_id,
    )


# --- running ----------------------------------------------------------------------------------


async def _final_check(stage: Stage, console: Console) -> str | None:
    """Compare the client's folded state with the snapshot the agent sends on resume."""
    held = stage.wire.mirror.info(stage.session_id)
    since = len(stage.wire.incoming)
    await stage.conn.resume_session(session_id=stage.session_id, cwd=stage.cwd)
    response = stage.position_of_response("session/resume", since)
    resync = [m for m in stage.wire.incoming[since:response] if is_info(m)]
    if not resync:
        return "the final resume sent no resync"
    reported = resync[-1]["params"]["update"].get("_meta") or None
    console.rule("[bold]final check")
    console.print(f"  client folded : {json.dumps(held.meta)}")
    console.print(f"  agent reports : {json.dumps(reported)}")
    return expect(held.meta == reported, "the client's folded metadata differs from the agent's")


def _agent(runtime: str, protocol: str) -> list[str]:
    """The reference agent's command line for one half of the story."""
    return [
        sys.executable,
        "-m",
        "agent_meta",
        "agent",
        "--runtime",
        runtime,
        "--protocol",
        protocol,
    ]


async def _play(console: Console, runtime: str) -> None:
    import acp

    from ..testing import ClientMirror

    wire = Wire(ClientMirror(protocol_version=1))
    cwd = os.getcwd()
    command = _agent(runtime, "1")
    async with (
        acp.spawn_agent_process(
            cast("acp.Client", Quiet()),  # duck-typed, as the SDK allows
            command[0],
            *command[1:],
            env=_child_env(),
            observers=[wire.observe],
            transport_kwargs={"stderr": None, "limit": 50 * 2**20},
        ) as (conn, _process)
    ):
        stage = Stage(conn, wire, cwd)
        for number, step in enumerate(STORY, 1):
            since, shown = len(wire.incoming), len(wire.traffic)
            await step.run(stage)
            _print_step(console, number, step, stage, shown)
            problem = step.check(stage, since)
            if problem is not None:
                raise DemoError(f"step {number} ({step.title}): {problem}")
            console.print("  [green]ok")
        problem = await _final_check(stage, console)
        if problem is not None:
            raise DemoError(problem)


def _child_env() -> dict[str, str]:
    """``spawn_agent_process`` passes a trimmed environment; add what the child needs."""
    package_root = str(Path(__file__).resolve().parents[2])  # the directory holding agent_meta
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _play_v2(console: Console, client: str, runtime: str) -> None:
    """The v2 half: the same agent over the same kind of pipe, under a v2 client."""
    from ..testing import ClientMirror
    from ._v2 import V2_STORY

    if runtime == "sdk":
        _check_sdk_v2()
    per_step, session_id = _run_v2_client(console, client, _agent(runtime, "2"))
    mirror = ClientMirror(protocol_version=2)
    requests: dict[Any, str] = {}
    for number, (step, exchange) in enumerate(zip(V2_STORY, per_step, strict=True), 1):
        asked = [m for sent, m in exchange.traffic if sent and "method" in m and "id" in m]
        requests.update({m["id"]: m["method"] for m in asked})
        for message in exchange.received:
            mirror.feed(message)
        print_frames(
            console,
            f"v2 {number}. {step.title}",
            step.why,
            exchange.traffic,
            requests,
            mirror,
            session_id,
        )
        problem = step.check(exchange.received, mirror, session_id)
        if problem is not None:
            raise DemoError(f"v2 step {number} ({step.title}): {problem}")
        console.print("  [green]ok")


def _run_v2_client(console: Console, client: str, agent: list[str]) -> tuple[list[Exchange], str]:
    """Play the v2 story under the client ``--v2-client`` picks, saying which and why."""
    from ._node import find_node_client
    from ._v2 import run_python_client, run_typescript_client

    found = find_node_client()
    script = None if client == "python" else found.script
    if script is None and client == "typescript":
        raise DemoError(f"--v2-client typescript: {found.missing}")
    if script is not None:
        console.print(
            "[bold]ACP v2[/] under the official TypeScript SDK client "
            f"(@agentclientprotocol/sdk/experimental/v2, {script}), over a real stdio pipe"
        )
        return run_typescript_client(script, agent, _child_env())
    why = "--v2-client python" if client == "python" else found.missing
    console.print(
        "[bold]ACP v2[/] under agent_meta's own raw NDJSON client, folded by "
        "agent_meta.testing.ClientMirror, over a real stdio pipe (not the TypeScript SDK "
        f"client: {why})"
    )
    return run_python_client(agent, _child_env())


def _sdk_has_v2() -> bool:
    from ..sdk._release import UnsupportedSdkError, installed_release

    try:
        return installed_release().v2
    except UnsupportedSdkError:
        return False


def _check_sdk_v2() -> None:
    """The SDK runtime speaks v2 on the SDK 1.0 only: say so before starting anything."""
    from ..sdk._release import UnsupportedSdkError, installed_release

    try:
        release = installed_release()
    except UnsupportedSdkError as exc:
        raise DemoError(f"--runtime sdk: {exc}") from None
    if not release.v2:
        raise DemoError(
            f"--runtime sdk speaks ACP v2 on agent-client-protocol 1.0 on; {release.version} is "
            "installed (pip install 'agent-client-protocol==1.0.0rc3', then "
            "agent-meta demo --runtime sdk --protocol 2)"
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-meta demo",
        description=(
            "Run the reference agent as a real stdio subprocess under real ACP clients and show, "
            "step by step, every frame the client received and the metadata it holds. v1 uses "
            "the official Python SDK client; v2 the official TypeScript SDK client when Node.js "
            "and integration/node/node_modules are present, else agent_meta's own raw v2 client."
        ),
    )
    parser.add_argument(
        "--protocol",
        choices=("1", "2", "both"),
        default="both",
        help="which ACP version(s) to show (default: both)",
    )
    parser.add_argument(
        "--runtime",
        choices=("trio", "sdk"),
        default="trio",
        help="the reference agent's runtime: agent_meta's own connection, or the official "
        "Python SDK with agent_meta's adapter (v2 there needs the SDK 1.0) (default: trio)",
    )
    parser.add_argument(
        "--v2-client",
        choices=("auto", "typescript", "python"),
        default="auto",
        help="the v2 client: the TypeScript SDK, agent_meta's raw client, or the first available "
        "(default: auto)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Play the story; 0 when every check passed (``argv`` defaults to ``sys.argv[1:]``)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        from rich.console import Console
    except ImportError:
        print(f"agent-meta demo needs the 'demo' extra: {install_hint('demo')}", file=sys.stderr)
        return 2
    # Piped (not a terminal), lines are not wrapped: a JSON frame stays on one line, whole.
    console = Console(highlight=False)
    console.soft_wrap = not console.is_terminal
    print_legend(console)
    if args.protocol in ("1", "both"):
        status = _run_v1(console, args.runtime)
        if status:
            return status
    if args.protocol == "both" and args.runtime == "sdk" and not _sdk_has_v2():
        console.print(
            "[yellow]ACP v2 skipped:[/] --runtime sdk speaks v2 on agent-client-protocol 1.0 on "
            "(pip install 'agent-client-protocol==1.0.0rc3', then "
            "agent-meta demo --runtime sdk --protocol 2)"
        )
    elif args.protocol in ("2", "both"):
        try:
            _play_v2(console, args.v2_client, args.runtime)
        except Exception as exc:  # one line, never a traceback
            _say_failed(console, exc, "v2: ")
            return 1
        console.print("[bold green]v2 passed:[/] the client's metadata matches the agent's")
    console.print("[bold green]demo passed")
    return 0


def _say_failed(console: Console, exc: Exception, half: str = "") -> None:
    """The one ``demo failed:`` line."""
    from rich.markup import escape

    console.print(f"[bold red]demo failed:[/] {escape(half + _failure(exc))}")


def _failure(exc: Exception) -> str:
    """What went wrong, in words."""
    if isinstance(exc, DemoError | RuntimeError):
        return str(exc)
    if isinstance(exc, TimeoutError | subprocess.TimeoutExpired):
        return f"the story did not finish in time ({exc or STORY_TIMEOUT})"
    if isinstance(exc, AssertionError):  # ClientMirror rejects a malformed frame (MirrorError)
        return f"the agent sent a malformed frame: {exc}"
    return f"{type(exc).__name__}: {exc}"  # an error response, a dead agent, an SDK mismatch


def _run_v1(console: Console, runtime: str) -> int:
    """The v1 half under the official Python SDK client; an exit status (0: passed)."""
    try:
        import acp  # noqa: F401
    except ImportError:
        console.print(f"[red]agent-meta demo needs the 'demo' extra: {install_hint('demo')}")
        return 2
    console.print(
        "[bold]ACP v1[/] under the official Python SDK client (agent-client-protocol), "
        f"the agent on the {runtime} runtime"
    )

    async def bounded() -> None:
        await asyncio.wait_for(_play(console, runtime), STORY_TIMEOUT)

    try:
        asyncio.run(bounded())
    except Exception as exc:  # one line, never a traceback
        _say_failed(console, exc)
        return 1
    console.print("[bold green]v1 passed:[/] the client's metadata matches the agent's")
    return 0
