"""``agent-meta check``: drive any stdio ACP agent through a fixed scenario and judge its metadata.

For each protocol version the agent offers (v1, v2), a fresh agent process goes through:
initialize, session/new, the prompts, a load/resume with replay, a resume without replay,
session/close, a reopen (load/resume with replay again) and a last close. Every frame is
judged by the same watcher as ``agent-meta proxy``. One more rule needs a client that asks:
after each step the checker calls ``session/list`` (when offered) and compares the ``_meta``
the client folded with the agent's own entry (``state``). On v1, a difference that the v2 patch
rule explains is reported as ``v1-meaning``: the agent sends v2 patches to a v1 client.

Prompts make the agent publish: ``--prompt`` adds them, and a known agent (see
:data:`SCRIPTS`, keyed by the name it gives in ``initialize``) gets its own command grammar.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any, Final

import trio

from .._agent_command import add_agent_command
from .._version import __version__
from ..core._sentinel import OMITTED
from ._peer import AgentExitedError, AgentPeer, NoAnswerError, Reply
from ._report import Report, RunResult, render_json, render_text
from ._watch import short_meta

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence

    from ._watch import Frame

__all__ = ["SCRIPTS", "Script", "add_parser", "check", "run"]


@dataclasses.dataclass(frozen=True, slots=True)
class Script:
    """Prompts in an agent's own command grammar that make it publish session info."""

    prompts: tuple[str, ...]
    """Sent after session/new, one request each."""
    before_close: str | None = None
    """Sent just before session/close, to race the close (a background burst, say)."""
    after_reopen: str | None = None
    """Sent after the reopen."""


REFERENCE_SCRIPT: Final = Script(
    prompts=(
        "/title agent-meta check\n"
        '/meta set check.progress {"step":1,"note":null}\n'
        "/meta set check.gone true\n"
        "/meta rm check.gone\n"
        "/fail check-1 1 checked failure",
        "/meta clear\n"
        "/meta set check.list [1,2]\n"
        '/meta patch {"check.a":1,"check.b":{"x":null},"check.none":null}\n'
        "/resolve check-1 1",
    ),
    before_close="/burst 50 check.burst",
    after_reopen="/meta set check.reopened true",
)

SCRIPTS: Final[dict[str, Script]] = {"agent-meta-reference": REFERENCE_SCRIPT}
"""Agents whose grammar the checker knows, by the name they give in ``initialize``."""

DEFAULT_PROMPT: Final = "Hello from agent-meta check."
"""The one prompt sent to an unknown agent when no ``--prompt`` is given."""

_QUIET_ATTEMPTS: Final = 5
"""How many times the ``state`` rule asks ``session/list`` for an answer no update overtook."""

DEFAULT_QUIET: Final = 0.2
"""Seconds without a frame from the agent before a step is judged (``--quiet-ms``): an agent
may publish after its answer (hermes-agent sends a title from a worker thread about 35 ms
after the prompt's response)."""

QUIET_BOUND: Final = 5.0
"""The longest a step waits for the agent to fall quiet; then it is judged as it stands."""

_VERSIONS: Final = {"auto": (1, 2), "1": (1,), "2": (2,)}


@dataclasses.dataclass(frozen=True, slots=True)
class _Offer:
    """What ``initialize`` said: the version, the agent's name, the session methods offered."""

    version: int
    name: str | None
    load: bool
    resume: bool
    close: bool
    list: bool


_NOTHING_OFFERED: Final = _Offer(0, None, False, False, False, False)


def _offer(result: Any) -> _Offer:
    if not isinstance(result, dict):
        return _NOTHING_OFFERED
    version = result.get("protocolVersion")
    version = version if type(version) is int else 0
    if version >= 2:
        info, session = result.get("info"), _dict(result.get("capabilities")).get("session")
        offered = isinstance(session, dict)  # v2: session/resume, close, list come together
        return _Offer(version, _name(info), False, offered, offered, offered)
    capabilities = _dict(result.get("agentCapabilities"))
    sessions = _dict(capabilities.get("sessionCapabilities"))
    return _Offer(
        version,
        _name(result.get("agentInfo")),
        capabilities.get("loadSession") is True,
        isinstance(sessions.get("resume"), dict),
        isinstance(sessions.get("close"), dict),
        isinstance(sessions.get("list"), dict),
    )


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _name(info: object) -> str | None:
    name = _dict(info).get("name")
    return name if isinstance(name, str) else None


class _StepError(Exception):
    """A step the scenario cannot go on without failed (the message says which)."""


class _Scenario:
    """One protocol version's run against one agent process."""

    def __init__(
        self,
        peer: AgentPeer,
        result: RunResult,
        prompts: Sequence[str],
        quiet: float,
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.peer = peer
        self.capabilities = dict(capabilities or {})
        self.result = result
        self.user_prompts = list(prompts)
        self.quiet = quiet
        self.cwd = os.getcwd()
        self.offer = _NOTHING_OFFERED
        self.session = ""
        self.compared_up_to = 0
        self.mismatch: tuple[object, object] | None = None
        self.title_mismatch: tuple[object, object] | None = None
        self.listed_title: object = OMITTED  # the title of the last session/list entry

    async def run(self) -> None:
        if not await self._open():
            return
        script = SCRIPTS.get(self.offer.name or "")
        self.result.script = script is not None
        prompts = list(script.prompts) if script is not None else []
        if script is None and not self.user_prompts:
            prompts.append(DEFAULT_PROMPT)
        for text in [*prompts, *self.user_prompts]:
            await self._prompt(text)
            await self._judge()
        await self._restore(replay=True)
        await self._restore(replay=False)
        if not self.offer.close:
            self.result.steps.append("session/close: not offered")
            return
        await self._close_and_reopen(script)

    async def _open(self) -> bool:
        """``initialize`` at this run's version and ``session/new``; ``False`` when the agent
        does not offer the version."""
        version = self.result.protocol
        info = {"name": "agent-meta-check", "version": __version__}
        capabilities = dict(self.capabilities)
        if version >= 2:
            params: dict[str, Any] = {
                "protocolVersion": 2,
                "capabilities": capabilities,
                "info": info,
            }
        else:
            params = {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": info}
        reply = await self._required("initialize", params)
        self.offer = _offer(reply.result)
        self.result.agent = self.offer.name
        self.result.list_offered = self.offer.list
        if self.offer.version != version:
            self.result.offered = False
            return False
        reply = await self._required("session/new", {"cwd": self.cwd, "mcpServers": []})
        session = _dict(reply.result).get("sessionId")
        if not isinstance(session, str):
            raise _StepError(f"session/new answered no sessionId: {reply.message}")
        self.session = session
        return True

    async def _close_and_reopen(self, script: Script | None) -> None:
        if script is not None and script.before_close is not None:
            await self._prompt(script.before_close)
        await self._step("session/close", {"sessionId": self.session})
        await self._barrier()
        if await self._restore(replay=True, reopen=True):
            if script is not None and script.after_reopen is not None:
                await self._prompt(script.after_reopen)
                await self._judge()
            await self._step("session/close", {"sessionId": self.session})

    async def _required(self, method: str, params: dict[str, Any]) -> Reply:
        reply = await self.peer.request(method, params)
        self.result.steps.append(method)
        if not reply.ok:
            raise _StepError(f"{method} failed: {reply.error_text()}")
        return reply

    async def _step(self, label: str, params: dict[str, Any], method: str = "") -> Reply:
        """One request of the scenario; an error answer is noted and the scenario goes on."""
        reply = await self.peer.request(method or label, params)
        self.result.steps.append(label if reply.ok else f"{label}: {reply.error_text()}")
        return reply

    async def _prompt(self, text: str) -> None:
        first = text.splitlines()[0] if text.strip() else text
        label = f"session/prompt {first!r}" + (" ..." if "\n" in text.strip() else "")
        params = {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}
        reply = await self.peer.request("session/prompt", params)
        self.result.steps.append(label if reply.ok else f"{label}: {reply.error_text()}")
        if reply.ok and "stopReason" not in _dict(reply.result):
            # ACP v2 answers a prompt once its message is stored; the turn ends with `idle`.
            ended = await self.peer.wait_for_turn_end(reply.frame.seq, self.session)
            if ended is None:
                self.result.steps.append(f"{label}: the turn did not report idle")

    async def _restore(self, *, replay: bool, reopen: bool = False) -> bool:
        """Load or resume the session (v1: session/load replays; v2: replayFrom)."""
        params: dict[str, Any] = {"sessionId": self.session, "cwd": self.cwd}
        if self.result.protocol >= 2:
            method, offered = "session/resume", self.offer.resume
            if replay:
                params["replayFrom"] = {"type": "start"}
        elif replay and (self.offer.load or not reopen):
            method, offered = "session/load", self.offer.load
            params["mcpServers"] = []
        else:  # v1 resume never replays; a reopen uses it when session/load is not offered
            method, offered, replay = "session/resume", self.offer.resume, False
        label = f"{method} ({'reopen, ' if reopen else ''}{'replay' if replay else 'no replay'})"
        if not offered:
            self.result.steps.append(f"{label}: not offered")
            return False
        held = None if reopen else self._client_title(len(self.peer.frames))
        asked_at = len(self.peer.frames)
        reply = await self._step(label, params, method)
        if reply.ok:
            await self._judge()
            self._judge_restored_title(label, self.peer.frames[asked_at : reply.frame.seq], held)
        return reply.ok

    def _client_title(self, upto: int) -> object:
        """The title the client holds after the first ``upto`` frames (``OMITTED``: none was
        ever sent): the last ``title`` of this session's ``session_info_update`` frames."""
        title: object = OMITTED
        for frame in self.peer.frames[:upto]:
            update = self._info_update(frame)
            if update is not None and "title" in update:
                title = update["title"]
        return title

    def _info_update(self, frame: Frame) -> dict[str, Any] | None:
        """``frame``'s ``session_info_update`` if it is one of this session's, from the agent."""
        if frame.source != "agent" or frame.session != self.session:
            return None
        update = _dict(_dict(_dict(frame.message).get("params")).get("update"))
        return update if update.get("sessionUpdate") == "session_info_update" else None

    def _judge_restored_title(self, label: str, window: list[Frame], held: object) -> None:
        """The ``title`` rule at a load or resume (``window``: its request, and every frame
        up to its response): the window must carry the session's title (the agent's
        ``session/list`` entry, else what the client held before), for a client that
        reconnects holds none."""
        expected = self.listed_title if self.listed_title is not OMITTED else held
        if not isinstance(expected, str) or not window:
            return
        carried = [f for f in window if "title" in (self._info_update(f) or {})]
        watcher = self.peer.watcher
        watcher.exercised["title"] += 1
        request = window[0]
        if not carried:
            message = (
                f"{label} (frame #{request.seq}) carried no title before its response: a client "
                f"that reconnects shows none, where the agent's is {expected!r}"
            )
            watcher.fail(request, "title", message, session=self.session)
            return
        last = carried[-1]
        title = (self._info_update(last) or {}).get("title")
        if title != expected:
            message = (
                f"{label} (frame #{request.seq}) restored the title {title!r}, where the "
                f"agent's is {expected!r}"
            )
            watcher.fail(last, "title", message, request.seq, session=self.session)

    async def _barrier(self) -> None:
        """A round trip, so that whatever the agent sent before it has been read, then
        whatever it sends late too (:meth:`_settle`)."""
        if self.offer.list:
            await self.peer.request("session/list", {})
        else:
            await self.peer.request("_agent-meta/barrier", {})
        await self._settle()

    async def _settle(self) -> None:
        """Wait for the agent to fall quiet (no frame for :attr:`quiet` seconds, at most
        :data:`QUIET_BOUND`), so that what it publishes after an answer is judged with the
        step that made it; note in the steps an agent that never pauses."""
        if self.quiet > 0 and not await self.peer.wait_quiet(self.quiet, QUIET_BOUND):
            last = self.result.steps[-1] if self.result.steps else "start"
            self.result.steps.append(
                f"{last}: no {self.quiet * 1000:g} ms quiet within {QUIET_BOUND:g} s"
            )

    async def _judge(self) -> None:
        """After a step: let late publications arrive, then compare (``state``)."""
        await self._settle()
        await self._compare()

    async def _compare(self) -> None:
        """The ``state`` rule: the client's folded ``_meta`` against the agent's session/list.

        The comparison is exact only over a quiet window: when no ``session_info_update`` of
        the session arrives between the request and its answer. Then every publication made
        before the agent built the answer is already folded (R2), and none made after it (an
        owner may merge a later patch into a frame queued ahead of the answer, and a v1 or
        resync frame carries the state when it is written). Otherwise the list is asked again,
        up to :data:`_QUIET_ATTEMPTS` times, and the step is not compared if it never settles.
        """
        if not self.offer.list:
            return
        for attempt in range(_QUIET_ATTEMPTS):
            if attempt:
                await self._settle()  # it was publishing as it answered: let it finish
            asked_at = len(self.peer.frames)
            reply = await self.peer.request("session/list", {}, capture=True)
            if not self._info_frames_between(asked_at, reply.frame.seq):
                break
        else:
            return  # the agent kept publishing: nothing comparable
        self._compare_title(reply)
        listed, agent = self._listed_meta(reply)
        if not listed:
            return
        client = reply.meta.get(self.session)
        self.peer.watcher.exercised["state"] += 1
        evidence = self._info_frames_since_last_compare(reply.frame.seq)
        if client == agent:
            self.mismatch = None
            return
        if self.mismatch == (client, agent):
            return  # the same difference as at the last comparison: reported there
        self.mismatch = (client, agent)
        self._mismatch(reply, client, agent, evidence)

    def _compare_title(self, reply: Reply) -> None:
        """The ``title`` rule after a step: the title the client holds equals the one the
        agent lists."""
        entry = self._entry(reply)
        title = entry.get("title", OMITTED) if entry is not None else OMITTED
        self.listed_title = title
        if not isinstance(title, str):
            return
        client = self._client_title(reply.frame.seq)
        self.peer.watcher.exercised["title"] += 1
        if client == title:
            self.title_mismatch = None
            return
        if self.title_mismatch == (client, title):
            return
        self.title_mismatch = (client, title)
        shown = "no title" if client is OMITTED else f"the title {client!r}"
        message = f"the client holds {shown}, but the agent's session/list says {title!r}"
        self.peer.watcher.fail(reply.frame, "title", message, session=self.session)

    def _entry(self, reply: Reply) -> dict[str, Any] | None:
        """This session's ``session/list`` entry in ``reply``, if it lists it."""
        sessions = _dict(reply.result).get("sessions")
        entries = [e for e in sessions if isinstance(e, dict)] if isinstance(sessions, list) else []
        return next((e for e in entries if e.get("sessionId") == self.session), None)

    def _listed_meta(self, reply: Reply) -> tuple[bool, Any]:
        """Whether the ``session/list`` reply lists this session with comparable ``_meta``, and
        that ``_meta`` (``None`` for none). Agents whose entries never carry ``_meta`` are not
        compared."""
        entry = self._entry(reply)
        if entry is None:
            return False, None
        if "_meta" in entry:
            self.result.list_reports_meta = True
        agent = entry.get("_meta") or None
        if not self.result.list_reports_meta or not (agent is None or isinstance(agent, dict)):
            return False, None
        return True, agent

    def _mismatch(self, reply: Reply, client: Any, agent: Any, evidence: list[int]) -> None:
        watcher = self.peer.watcher
        said = f"the agent's session/list says {short_meta(agent)}"
        if self.result.protocol == 1 and reply.meta_as_v2.get(self.session) == agent:
            message = (
                f"a v1 client holds {short_meta(client)}, but {said}: that is what the frames give "
                "under the v2 patch rule, so the agent sends v2 patches to a v1 client"
            )
            watcher.fail(reply.frame, "v1-meaning", message, *evidence, session=self.session)
        else:
            message = f"the client holds {short_meta(client)}, but {said}"
            watcher.fail(reply.frame, "state", message, *evidence, session=self.session)

    def _info_frames_since_last_compare(self, upto: int) -> list[int]:
        frames = self._info_frames_between(self.compared_up_to, upto)
        self.compared_up_to = upto
        return frames

    def _info_frames_between(self, start: int, upto: int) -> list[int]:
        """The sequence numbers of this session's ``session_info_update`` frames among the
        peer's frames ``start`` (an index) up to the frame numbered ``upto``."""
        frames = []
        for frame in self.peer.frames[start:upto]:
            update = _dict(_dict(_dict(frame.message).get("params")).get("update"))
            if frame.session == self.session and update.get("sessionUpdate") == (
                "session_info_update"
            ):
                frames.append(frame.seq)
        return frames


async def _run_version(
    command: Sequence[str],
    version: int,
    prompts: Sequence[str],
    *,
    answer_within: float,
    quiet: float,
    capabilities: Mapping[str, Any] | None,
) -> RunResult:
    result = RunResult(protocol=version)
    async with AgentPeer.spawn(command, answer_within=answer_within) as peer:
        result.peer = peer
        try:
            await _Scenario(peer, result, prompts, quiet, capabilities).run()
        except (_StepError, NoAnswerError, AgentExitedError) as exc:
            result.error = str(exc)
    return result


async def check(
    command: Sequence[str],
    *,
    versions: Sequence[int] = (1, 2),
    prompts: Sequence[str] = (),
    answer_within: float = 30.0,
    quiet: float = DEFAULT_QUIET,
    capabilities: Mapping[str, Any] | None = None,
) -> Report:
    """Run the scenario once per protocol version in ``versions``, each in a fresh process.

    Each answer is awaited at most ``answer_within`` seconds. Each step is judged once the
    agent has sent nothing for ``quiet`` seconds (at most :data:`QUIET_BOUND`; 0: at once).
    ``capabilities`` are the client capabilities ``initialize`` announces (v1
    ``clientCapabilities``, v2 ``capabilities``): metadata an agent sends only to some clients
    (JetBrains AIR's, announced in their ``_meta``) is then exercised too.
    """
    report = Report(command=list(command), versions=list(versions))
    for version in versions:
        run = await _run_version(
            command,
            version,
            prompts,
            answer_within=answer_within,
            quiet=quiet,
            capabilities=capabilities,
        )
        report.runs.append(run)
    return report


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agent-meta check`` to the command line."""
    parser = subparsers.add_parser(
        "check",
        usage="%(prog)s [options] -- AGENT_CMD [ARGS...]",
        help="drive an ACP agent through a fixed scenario and report its _meta rules",
        description=(
            "Run AGENT_CMD as an ACP agent and drive it as a client: initialize (v1 and v2 "
            "where offered), session/new, prompts, load/resume with and without replay, close, "
            "reopen. Print each rule as pass, FAIL or not exercised, with the frames that show "
            "a failure. Exit status 0 only when nothing failed."
        ),
    )
    parser.add_argument(
        "--protocol",
        choices=sorted(_VERSIONS),
        default="auto",
        help="the version(s) to check; auto checks every version the agent offers",
    )
    parser.add_argument(
        "--prompt",
        action="append",
        default=[],
        metavar="TEXT",
        help="a prompt that makes the agent publish session info (repeatable; known agents "
        "such as the reference agent get their own command grammar as well)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for each answer (default: 30)",
    )
    parser.add_argument(
        "--quiet-ms",
        type=float,
        default=DEFAULT_QUIET * 1000,
        metavar="MS",
        help="judge each step once the agent has sent nothing for MS milliseconds, so that "
        f"what it publishes late is seen (default: {DEFAULT_QUIET * 1000:g}; at most "
        f"{QUIET_BOUND:g} s per step; 0 judges at once)",
    )
    parser.add_argument(
        "--client-capabilities",
        type=_json_object,
        metavar="JSON",
        help="the client capabilities initialize announces, a JSON object (default: {}); "
        'JetBrains AIR\'s, {"_meta":{"jetbrains":{"air":{"version":1,"capabilities":'
        '["sessionFailure"]}}}}, exercises what an agent sends only to AIR',
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_agent_command(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``agent-meta check`` with parsed arguments; return the exit status."""
    if not args.timeout > 0:
        print("agent-meta check: --timeout must be positive", file=sys.stderr)
        return 2
    if not args.quiet_ms >= 0:
        print("agent-meta check: --quiet-ms must not be negative", file=sys.stderr)
        return 2
    versions = _VERSIONS[args.protocol]
    try:
        report = trio.run(
            _check,
            args.agent,
            versions,
            args.prompt,
            args.timeout,
            args.quiet_ms / 1000,
            args.client_capabilities,
        )
    except OSError as exc:
        print(f"agent-meta check: cannot start the agent: {exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    except KeyboardInterrupt:
        return 130
    explicit = args.protocol != "auto"
    sys.stdout.write(render_json(report, explicit=explicit) if args.json else render_text(report))
    return 0 if report.ok(explicit=explicit) else 1


async def _check(
    command: list[str],
    versions: tuple[int, ...],
    prompts: list[str],
    answer_within: float,
    quiet: float,
    capabilities: dict[str, Any] | None,
) -> Report:
    return await check(
        command,
        versions=versions,
        prompts=prompts,
        answer_within=answer_within,
        quiet=quiet,
        capabilities=capabilities,
    )


def _json_object(text: str) -> dict[str, Any]:
    """``--client-capabilities``: a JSON object, else a usage error."""
    import argparse
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("client capabilities are a JSON object")
    return value
