"""``agent-meta demo``: the reference agent under a real ACP client, as a readable timeline.

The demo spawns ``python -m agent_meta agent`` as a real stdio subprocess under the official
ACP Python SDK client (``agent-client-protocol``, protocol v1) and plays a short story. After
each step it prints every frame the client received, raw and in wire order (from the SDK's
synchronous ``observers=`` hook, never from its handlers, which run as separate tasks), and the
metadata the client holds after folding those frames with
:class:`~agent_meta.testing.ClientMirror` (v1 rules). Every step checks what it shows; the demo
ends by comparing the client's folded state with the snapshot the agent itself sends on a
resume, and exits non-zero when anything differs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from rich.console import Console

    from ..testing import ClientMirror

__all__ = ["main"]

#: The whole story runs in well under this; a stuck agent becomes an error, not a hang.
STORY_TIMEOUT = 20.0
#: How long a step may wait for frames that the agent sends in the background (the burst).
SETTLE_TIMEOUT = 5.0
BURST = 25
#: A burst prints this many frames at each end and elides the middle.
SHOWN_AT_EACH_END = 3

FAILURE_KEY = "agent-meta"
Message = dict[str, Any]


class DemoError(Exception):
    """The story went wrong: a check failed or the agent misbehaved."""


@dataclasses.dataclass
class Wire:
    """What the client received, in wire order, folded as it arrives."""

    mirror: ClientMirror
    incoming: list[Message] = dataclasses.field(default_factory=list)
    requests: dict[Any, str] = dataclasses.field(default_factory=dict)
    waiters: list[tuple[Callable[[], bool], asyncio.Event]] = dataclasses.field(
        default_factory=list
    )

    def observe(self, event: Any) -> None:
        """The SDK's raw ``observers=`` hook; it runs synchronously in the receive loop."""
        message: Message = event.message
        if event.direction.value != "incoming":
            if "method" in message and "id" in message:
                self.requests[message["id"]] = message["method"]
            return
        self.incoming.append(message)
        self.mirror.feed(message)
        for condition, ready in self.waiters:
            if condition():
                ready.set()

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait until the frames received so far make ``condition`` true."""
        if condition():
            return
        ready = asyncio.Event()
        self.waiters.append((condition, ready))
        try:
            await asyncio.wait_for(ready.wait(), SETTLE_TIMEOUT)
        except TimeoutError:
            raise DemoError(f"timed out waiting for {what}") from None
        finally:
            self.waiters.remove((condition, ready))


class Quiet:
    """A duck-typed ``acp.Client``: the observer is the record, so handlers do nothing."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the reference agent never asks for permission")


@dataclasses.dataclass
class Stage:
    """Everything a step needs: the SDK connection, the wire record, the session."""

    conn: Any
    wire: Wire
    cwd: str
    session_id: str = ""

    async def prompt(self, *lines: str) -> None:
        import acp

        await self.conn.prompt(
            session_id=self.session_id, prompt=[acp.text_block("\n".join(lines))]
        )

    def meta(self) -> dict[str, Any] | None:
        return self.wire.mirror.meta(self.session_id)

    def failure(self) -> Any:
        meta = self.meta() or {}
        domain = meta.get(FAILURE_KEY)
        return domain.get("failure") if isinstance(domain, dict) else None

    def position_of_response(self, method: str, since: int) -> int:
        """Index in ``wire.incoming`` of the last response to ``method`` after ``since``."""
        found = [
            i
            for i, m in enumerate(self.wire.incoming)
            if i >= since and "method" not in m and self.wire.requests.get(m.get("id")) == method
        ]
        if not found:
            raise DemoError(f"no response to {method} was received")
        return found[-1]


@dataclasses.dataclass(frozen=True)
class Step:
    title: str
    why: str
    run: Callable[[Stage], Awaitable[None]]
    check: Callable[[Stage, int], str | None]


def _expect(condition: bool, message: str) -> str | None:
    return None if condition else message


def _is_info(message: Message) -> bool:
    return (
        message.get("method") == "session/update"
        and message["params"]["update"].get("sessionUpdate") == "session_info_update"
    )


def _kind(message: Message) -> str | None:
    if message.get("method") != "session/update":
        return None
    kind = message["params"]["update"].get("sessionUpdate")
    return kind if isinstance(kind, str) else None


# --- the story --------------------------------------------------------------------------------


async def _connect(stage: Stage) -> None:
    import acp
    from acp.schema import ClientCapabilities, Implementation

    await stage.conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="agent-meta-demo", version="0"),
    )
    session = await stage.conn.new_session(cwd=stage.cwd, mcp_servers=[])
    stage.session_id = session.session_id


async def _set(stage: Stage) -> None:
    await stage.prompt(
        "/title Fix the flaky build",
        '/meta set ui {"pinned": true, "color": "teal"}',
        '/meta set scratch "draft notes"',
    )


async def _remove(stage: Stage) -> None:
    await stage.prompt("/meta rm scratch")


async def _failure_and_domain(stage: Stage) -> None:
    await stage.prompt(
        "/fail build-7 1 Build failed",
        f'/domain set {FAILURE_KEY} notes.owner "alice"',
    )


async def _stale_resolve(stage: Stage) -> None:
    await stage.prompt("/fail build-7 2 Build failed again", "/resolve build-7 1")


async def _matching_resolve(stage: Stage) -> None:
    await stage.prompt("/resolve build-7 2")


async def _burst_resume(stage: Stage) -> None:
    await stage.prompt(f"/burst {BURST} counter")
    await stage.conn.resume_session(session_id=stage.session_id, cwd=stage.cwd)
    await stage.wire.until(
        lambda: (stage.meta() or {}).get("counter") == BURST, f"counter == {BURST}"
    )


async def _load(stage: Stage) -> None:
    await stage.conn.load_session(cwd=stage.cwd, session_id=stage.session_id, mcp_servers=[])


async def _close_reopen(stage: Stage) -> None:
    await stage.conn.close_session(session_id=stage.session_id)
    await stage.conn.load_session(cwd=stage.cwd, session_id=stage.session_id, mcp_servers=[])
    await stage.prompt("/meta set fresh true")


EXPECTED_AFTER_SET = {"ui": {"pinned": True, "color": "teal"}, "scratch": "draft notes"}
EXPECTED_AFTER_REMOVE = {"ui": {"pinned": True, "color": "teal"}}
NOTES = {"owner": "alice"}


def _check_connect(stage: Stage, since: int) -> str | None:
    return _expect(bool(stage.session_id), "no session id") or _expect(
        stage.meta() is None, "a brand-new session already has metadata"
    )


def _check_set(stage: Stage, since: int) -> str | None:
    return _expect(stage.meta() == EXPECTED_AFTER_SET, "metadata is not what was set") or _expect(
        stage.wire.mirror.info(stage.session_id).title == "Fix the flaky build", "title not set"
    )


def _check_remove(stage: Stage, since: int) -> str | None:
    return _expect(stage.meta() == EXPECTED_AFTER_REMOVE, "scratch was not removed")


def _check_failure_and_domain(stage: Stage, since: int) -> str | None:
    domain = (stage.meta() or {}).get(FAILURE_KEY)
    return _expect(
        isinstance(domain, dict) and domain.get("notes") == NOTES and "failure" in domain,
        "the domain edit and the failure record are not side by side",
    )


def _revision(failure: Any) -> Any:
    return failure.get("revision") if isinstance(failure, dict) else None


def _check_stale(stage: Stage, since: int) -> str | None:
    return _expect(
        _revision(stage.failure()) == 2, "the stale resolution changed the current incident"
    )


def _check_matching(stage: Stage, since: int) -> str | None:
    domain = (stage.meta() or {}).get(FAILURE_KEY)
    return _expect(stage.failure() is None, "the matching resolution did not clear it") or _expect(
        isinstance(domain, dict) and domain.get("notes") == NOTES,
        "clearing the failure lost its sibling notes",
    )


def _check_burst(stage: Stage, since: int) -> str | None:
    response = stage.position_of_response("session/resume", since)
    before = stage.wire.incoming[since:response]
    return _expect(
        any(_is_info(m) for m in before), "no resync frame before the resume response"
    ) or _expect((stage.meta() or {}).get("counter") == BURST, "the burst's last value was lost")


def _check_load(stage: Stage, since: int) -> str | None:
    received = stage.wire.incoming[since:]
    response = stage.position_of_response("session/load", since) - since
    replayed = [i for i, m in enumerate(received) if (_kind(m) or "").endswith("_message_chunk")]
    resync = [i for i, m in enumerate(received) if _is_info(m)]
    return (
        _expect(bool(replayed), "session/load replayed no history")
        or _expect(bool(resync), "session/load sent no resync")
        or _expect(
            bool(resync) and bool(replayed) and max(replayed) < min(resync) < response,
            "the resync is not after the replay and before the response",
        )
    )


def _check_reopen(stage: Stage, since: int) -> str | None:
    return _expect(stage.meta() == {"fresh": True}, "the new lifetime did not start fresh")


STORY: tuple[Step, ...] = (
    Step("connect", "initialize (v1) and session/new", _connect, _check_connect),
    Step("set metadata", "a title and two top-level keys", _set, _check_set),
    Step("remove a key", "/meta rm publishes {scratch: null}", _remove, _check_remove),
    Step(
        "failure next to a domain edit",
        "the failure record and an extension's notes share the agent-meta key",
        _failure_and_domain,
        _check_failure_and_domain,
    ),
    Step(
        "stale resolution",
        "revision 2 replaces revision 1; resolving revision 1 must change nothing",
        _stale_resolve,
        _check_stale,
    ),
    Step(
        "matching resolution",
        "resolving revision 2 clears the record and keeps its sibling",
        _matching_resolve,
        _check_matching,
    ),
    Step(
        "burst racing a resume",
        f"{BURST} background publications race session/resume",
        _burst_resume,
        _check_burst,
    ),
    Step(
        "load with replay",
        "session/load: history replay, then the resync, then the response",
        _load,
        _check_load,
    ),
    Step(
        "close and reopen",
        "session/close ends the lifetime; loading the session again starts a fresh, empty one "
        "(the agent knows the old title went with it, and every v1 frame carries the title)",
        _close_reopen,
        _check_reopen,
    ),
)


# --- printing ---------------------------------------------------------------------------------


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _frame_line(message: Message, requests: dict[Any, str]) -> str:
    """One received frame: session-info updates verbatim, everything else summarized."""
    if "method" not in message:
        method = requests.get(message.get("id"), "?")
        body = message["error"] if "error" in message else message.get("result")
        return f"response to {method}  {_short(json.dumps(body), 80)}"
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(update, dict):
        return f"{message['method']}  {_short(json.dumps(params), 80)}"
    extra = f"  params._meta={json.dumps(params['_meta'])}" if "_meta" in params else ""
    if _is_info(message):
        return f"update  {json.dumps(update)}{extra}"
    if update.get("sessionUpdate") == "state_update":
        reason = f" ({update['stopReason']})" if "stopReason" in update else ""
        return f"update  state_update {update.get('state')}{reason}"
    content = update.get("content")
    said = content.get("text") if isinstance(content, dict) else None
    detail = f"  {json.dumps(_short(said))}" if isinstance(said, str) else ""
    return f"update  {update.get('sessionUpdate')}{detail}{extra}"


def _shown(received: list[Message]) -> list[tuple[int, Message] | int]:
    """Frames to print, with runs elided (an int is "this many frames left out").

    Session-info frames and responses are what the demo is about, so they are kept, except in
    the middle of a long run of them (a burst); other frames keep only the first of a run.
    """
    shown: list[tuple[int, Message] | int] = []
    run: list[tuple[int, Message]] = []
    run_is_info = False

    def flush() -> None:
        if run_is_info and len(run) > 2 * SHOWN_AT_EACH_END + 1:
            shown.extend(run[:SHOWN_AT_EACH_END])
            shown.append(len(run) - 2 * SHOWN_AT_EACH_END)
            shown.extend(run[-SHOWN_AT_EACH_END:])
        elif not run_is_info and len(run) > 2:
            shown.append(run[0])
            shown.append(len(run) - 1)
        else:
            shown.extend(run)
        run.clear()

    for index, message in enumerate(received):
        is_info = _is_info(message) or "method" not in message or _kind(message) == "state_update"
        if run and is_info != run_is_info:
            flush()
        run_is_info = is_info
        run.append((index, message))
    flush()
    return shown


def _print_step(console: Console, number: int, step: Step, stage: Stage, since: int) -> None:
    print_frames(
        console,
        f"{number}. {step.title}",
        step.why,
        stage.wire.incoming[since:],
        stage.wire.requests,
        stage.wire.mirror,
        stage.session_id,
    )


def print_frames(
    console: Console,
    title: str,
    why: str,
    received: list[Message],
    requests: dict[Any, str],
    mirror: ClientMirror,
    session_id: str,
) -> None:
    """One step of a story: its frames as received, then what the client holds."""
    from rich.markup import escape

    console.rule(f"[bold]{escape(title)}")
    console.print(f"[dim]{escape(why)}")
    for item in _shown(received):
        if isinstance(item, int):
            console.print(f"  [dim]     ... {item} more ...")
            continue
        index, message = item
        style = "cyan" if _is_info(message) else ("green" if "method" not in message else "dim")
        console.print(f"  [{style}]{index + 1:>3}  {escape(_frame_line(message, requests))}")
    info = mirror.info(session_id)
    console.print(
        f"  [bold]client holds[/] title={escape(json.dumps(_plain(info.title)))} "
        f"_meta={escape(json.dumps(info.meta))}"
    )


def _plain(value: object) -> object:
    return value if value is None or isinstance(value, str) else "<never told>"


# --- running ----------------------------------------------------------------------------------


async def _final_check(stage: Stage, console: Console) -> str | None:
    """Compare the client's folded state with the snapshot the agent sends on resume."""
    held = stage.wire.mirror.info(stage.session_id)
    since = len(stage.wire.incoming)
    await stage.conn.resume_session(session_id=stage.session_id, cwd=stage.cwd)
    response = stage.position_of_response("session/resume", since)
    resync = [m for m in stage.wire.incoming[since:response] if _is_info(m)]
    if not resync:
        return "the final resume sent no resync"
    reported = resync[-1]["params"]["update"].get("_meta") or None
    console.rule("[bold]final check")
    console.print(f"  client folded : {json.dumps(held.meta)}")
    console.print(f"  agent reports : {json.dumps(reported)}")
    return _expect(held.meta == reported, "the client's folded metadata differs from the agent's")


async def _play(console: Console) -> None:
    import acp

    from ..testing import ClientMirror

    wire = Wire(ClientMirror(protocol_version=1))
    cwd = os.getcwd()
    async with acp.spawn_agent_process(
        cast("acp.Client", Quiet()),  # duck-typed, as the SDK allows
        sys.executable,
        "-m",
        "agent_meta",
        "agent",
        env=_child_env(),
        observers=[wire.observe],
        transport_kwargs={"stderr": None, "limit": 50 * 2**20},
    ) as (conn, _process):
        stage = Stage(conn, wire, cwd)
        for number, step in enumerate(STORY, 1):
            since = len(wire.incoming)
            await step.run(stage)
            _print_step(console, number, step, stage, since)
            problem = step.check(stage, since)
            if problem is not None:
                raise DemoError(f"step {number} ({step.title}): {problem}")
            console.print("  [green]ok")
        problem = await _final_check(stage, console)
        if problem is not None:
            raise DemoError(problem)


def _child_env() -> dict[str, str]:
    """``spawn_agent_process`` passes a trimmed environment; add what the child needs."""
    package_root = str(Path(__file__).resolve().parent.parent)
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _play_v2(console: Console, client: str) -> None:
    """The v2 half: the same agent over the same kind of pipe, under a v2 client."""
    from ..testing import ClientMirror
    from ._demo_v2 import V2_STORY, node_client, run_python_client, run_typescript_client

    agent = [sys.executable, "-m", "agent_meta", "agent"]
    script = None if client == "python" else node_client()
    if script is None and client == "typescript":
        raise DemoError("--v2-client typescript: Node.js or integration/node/node_modules missing")
    if script is not None:
        console.print(
            "[bold]ACP v2[/] under the official TypeScript SDK client "
            "(@agentclientprotocol/sdk/experimental/v2), over a real stdio pipe"
        )
        per_step, session_id = run_typescript_client(script, agent, _child_env())
    else:
        console.print(
            "[bold]ACP v2[/] under agent_meta's own raw NDJSON client, folded by "
            "agent_meta.testing.ClientMirror (not the TypeScript SDK: --v2-client python, or "
            "Node.js and integration/node/node_modules are not here), over a real stdio pipe"
        )
        per_step, session_id = run_python_client(agent, _child_env())
    mirror = ClientMirror(protocol_version=2)
    requests: dict[Any, str] = {}
    for number, (step, received) in enumerate(zip(V2_STORY, per_step, strict=True), 1):
        for message in received:
            mirror.feed(message)
            if "method" not in message:
                requests.setdefault(message.get("id"), _METHODS[step.op["op"]])
        print_frames(
            console, f"v2 {number}. {step.title}", step.why, received, requests, mirror, session_id
        )
        problem = step.check(received, mirror, session_id)
        if problem is not None:
            raise DemoError(f"v2 step {number} ({step.title}): {problem}")
        console.print("  [green]ok")


_METHODS = {
    "new": "session/new",
    "prompt": "session/prompt",
    "resume": "session/resume",
    "close": "session/close",
}


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
        print(
            "agent-meta demo needs the demo extra: pip install 'agent-meta[demo]'", file=sys.stderr
        )
        return 2
    console = Console(highlight=False)
    if args.protocol in ("1", "both"):
        status = _run_v1(console)
        if status:
            return status
    if args.protocol in ("2", "both"):
        try:
            _play_v2(console, args.v2_client)
        except (DemoError, RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            console.print(f"[bold red]demo failed (v2):[/] {exc}")
            return 1
        except AssertionError as exc:  # ClientMirror rejects a malformed frame
            console.print(f"[bold red]demo failed (v2):[/] the agent sent a malformed frame: {exc}")
            return 1
        console.print("[bold green]v2 passed:[/] the client's metadata matches the agent's")
    console.print("[bold green]demo passed")
    return 0


def _run_v1(console: Console) -> int:
    """The v1 half under the official Python SDK client; an exit status (0: passed)."""
    try:
        import acp  # noqa: F401
    except ImportError:
        console.print("[red]agent-meta demo needs the demo extra: pip install 'agent-meta[demo]'")
        return 2
    console.print("[bold]ACP v1[/] under the official Python SDK client (agent-client-protocol)")

    async def bounded() -> None:
        await asyncio.wait_for(_play(console), STORY_TIMEOUT)

    try:
        asyncio.run(bounded())
    except DemoError as exc:
        console.print(f"[bold red]demo failed:[/] {exc}")
        return 1
    except TimeoutError:
        console.print(f"[bold red]demo failed:[/] the story did not finish in {STORY_TIMEOUT} s")
        return 1
    except AssertionError as exc:  # ClientMirror rejects a malformed frame with a MirrorError
        console.print(f"[bold red]demo failed:[/] the agent sent a malformed frame: {exc}")
        return 1
    except Exception as exc:  # an error response, a dead agent: say what, without a traceback
        console.print(f"[bold red]demo failed:[/] {type(exc).__name__}: {exc}")
        return 1
    console.print("[bold green]v1 passed:[/] the client's metadata matches the agent's")
    return 0
