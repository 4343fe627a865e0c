"""What ``agent-meta check`` found, per protocol version and rule, as text or JSON."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from typing import TYPE_CHECKING, Any, Final, Literal

from ._watch import RULES, Finding, Frame, Rule

if TYPE_CHECKING:
    from ._peer import AgentPeer

__all__ = [
    "CHECK_RULES",
    "TITLE_RULE",
    "Report",
    "RuleResult",
    "RunResult",
    "render_json",
    "render_text",
]

Status = Literal["pass", "fail", "not exercised"]

EVIDENCE_FRAMES: Final = 12
"""At most this many frames are quoted per finding (the first and last ones)."""
WIDTH: Final = 100
"""Text lines of the report are wrapped at this width (quoted frames are not)."""
LINE_CHARS: Final = 240
"""A quoted frame is cut to this many characters."""


TITLE_RULE: Final = Rule(
    "title",
    "every successful session/load or session/resume carries the session's title before its "
    "response (a client that reconnects holds none), and the title the client holds equals the "
    "agent's session/list entry (check only)",
    "R4, R13",
)
"""The rule only ``check`` judges besides ``state``: it needs the agent's list and the
scenario's load and resume requests."""

CHECK_RULES: Final = (*RULES, TITLE_RULE)
"""Every rule ``check`` reports, in report order."""


@dataclasses.dataclass(frozen=True, slots=True)
class RuleResult:
    """One rule on one protocol version: its status, why, and the findings."""

    rule: Rule
    status: Status
    reason: str
    findings: tuple[Finding, ...]


@dataclasses.dataclass(slots=True)
class RunResult:
    """One protocol version's run: what was offered and done, and the connection's frames."""

    protocol: int
    agent: str | None = None
    offered: bool = True
    script: bool = False
    list_offered: bool = False
    list_reports_meta: bool = False
    steps: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None
    peer: AgentPeer | None = None

    def frames(self) -> dict[int, Frame]:
        return {} if self.peer is None else {frame.seq: frame for frame in self.peer.frames}

    def rules(self) -> list[RuleResult]:
        """Every rule's result (empty when the version was not offered)."""
        if not self.offered or self.peer is None:
            return []
        watcher = self.peer.watcher
        found = [finding for frame in self.peer.frames for finding in frame.findings]
        results = []
        for rule in CHECK_RULES:
            findings = tuple(f for f in found if f.rule == rule.id)
            if findings:
                status: Status = "fail"
            elif watcher.exercised[rule.id]:
                status = "pass"
            else:
                status = "not exercised"
            reason = self._not_exercised(rule.id) if status == "not exercised" else ""
            results.append(RuleResult(rule, status, reason, findings))
        return results

    def _not_exercised(self, rule: str) -> str:
        if rule == "state":
            if not self.list_offered:
                return "session/list is not offered"
            if not self.list_reports_meta:
                return "session/list entries carry no _meta"
        if rule == "v1-meaning" and self.protocol >= 2:
            return "applies to v1 only"
        if rule == "fence":
            return "no session/close succeeded"
        if rule == "updated-at":
            if self.protocol < 2 and self._sent("updatedAt"):
                return (
                    "v1's schema says ISO 8601, with or without an offset: v1 stamps are not judged"
                )
            return "the agent sent no updatedAt"
        if rule == "title":
            if self._sent("title"):
                return "session/list gave no title, and no load or resume followed a title"
            return "the agent sent no title and session/list lists none"
        if rule == "resync":
            return "no load/resume with replay while the client held metadata"
        return "the agent published no metadata"

    def _sent(self, field: str) -> bool:
        """Whether any ``session_info_update`` of the agent carried ``field``."""
        for frame in [] if self.peer is None else self.peer.frames:
            if frame.source != "agent" or frame.message is None:
                continue
            params = frame.message.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            if not isinstance(update, dict) or field not in update:
                continue
            if update.get("sessionUpdate") == "session_info_update":
                return True
        return False

    def failed(self) -> list[str]:
        return [result.rule.id for result in self.rules() if result.status == "fail"]


@dataclasses.dataclass(slots=True)
class Report:
    """Everything one ``agent-meta check`` found."""

    command: list[str]
    versions: list[int]
    runs: list[RunResult] = dataclasses.field(default_factory=list)

    def ok(self, *, explicit: bool = False) -> bool:
        """No rule failed, no run broke off, and at least one version (or each asked) offered."""
        offered = [run for run in self.runs if run.offered]
        if not offered or (explicit and len(offered) != len(self.runs)):
            return False
        return all(run.error is None and not run.failed() for run in self.runs)


def _line(frame: Frame) -> str:
    text = frame.line.decode("utf-8", "replace")
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


def _evidence(finding: Finding, frames: dict[int, Frame]) -> list[Frame]:
    seqs = list(finding.frames)
    if len(seqs) > EVIDENCE_FRAMES:
        half = EVIDENCE_FRAMES // 2
        seqs = seqs[:half] + seqs[-half:]
    return [frames[seq] for seq in seqs if seq in frames]


def render_text(report: Report) -> str:
    """The report for a terminal: per version, each rule, and the frames of each failure."""
    out = [f"agent-meta check -- {' '.join(report.command)}", ""]
    for run in report.runs:
        out.extend(_run_text(run))
        out.append("")
    out.append("rules:")
    for rule in CHECK_RULES:
        out.extend(
            textwrap.wrap(
                f"{rule.text} ({rule.design})",
                WIDTH,
                initial_indent=f"  {rule.id:<10}  ",
                subsequent_indent=" " * 14,
            )
        )
    out.append("")
    out.append(_verdict(report))
    return "\n".join(out) + "\n"


def _run_text(run: RunResult) -> list[str]:
    head = f"protocol {run.protocol}: {run.agent or 'unnamed agent'}"
    if not run.offered:
        return [f"{head}: not offered (initialize answered another version)"]
    if run.script:
        head += " (its command grammar drives the prompts)"
    out = [head, *_steps(run.steps)]
    if run.error is not None:
        out.append(f"  ERROR: the scenario stopped: {run.error}")
    frames = run.frames()
    for result in run.rules():
        status = "FAIL" if result.status == "fail" else result.status
        detail = f"({result.reason})" if result.reason else ""
        out.append(f"  {status:<13}  {result.rule.id:<10}  {detail}".rstrip())
        for finding in result.findings:
            out.extend(
                textwrap.wrap(
                    finding.describe(),
                    WIDTH,
                    initial_indent=" " * 6,
                    subsequent_indent=" " * 8,
                    break_long_words=False,  # never cut inside quoted JSON
                    break_on_hyphens=False,
                )
            )
            out.extend(
                f"        #{frame.seq:<4} {frame.source:<6} {_line(frame)}"
                for frame in _evidence(finding, frames)
            )
    return out


def _steps(steps: list[str]) -> list[str]:
    """The steps run, several to a line, never cut inside one."""
    lines: list[str] = []
    current = "  steps:"
    for step in steps:
        if len(current) + len(step) + 3 > WIDTH and current.strip() != "steps:":
            lines.append(current + " ·")
            current = "        "
        elif current.strip() != "steps:":
            current += " ·"
        current += " " + step
    return [*lines, current]


def _verdict(report: Report) -> str:
    failed = [f"{rule} (v{run.protocol})" for run in report.runs for rule in run.failed()]
    errors = [f"v{run.protocol}: {run.error}" for run in report.runs if run.error is not None]
    if not any(run.offered for run in report.runs):
        return "result: FAIL: the agent offered none of the protocol versions checked"
    if failed or errors:
        return "result: FAIL: " + "; ".join(failed + errors)
    if not report.ok(explicit=True):
        missing = [f"v{run.protocol}" for run in report.runs if not run.offered]
        return f"result: pass ({', '.join(missing)} not offered)"
    return "result: pass"


def render_json(report: Report, *, explicit: bool = False) -> str:
    """The report as one JSON document (for scripts and tests)."""
    runs: list[dict[str, Any]] = []
    for run in report.runs:
        frames = run.frames()
        runs.append(
            {
                "protocol": run.protocol,
                "agent": run.agent,
                "offered": run.offered,
                "script": run.script,
                "steps": run.steps,
                "error": run.error,
                "rules": [
                    {
                        "id": result.rule.id,
                        "status": result.status,
                        "reason": result.reason,
                        "findings": [
                            {
                                "message": f.message,
                                "session": f.session,
                                "frames": [
                                    {"seq": fr.seq, "from": fr.source, "line": _line(fr)}
                                    for fr in _evidence(f, frames)
                                ],
                            }
                            for f in result.findings
                        ],
                    }
                    for result in run.rules()
                ],
            }
        )
    document = {"command": report.command, "ok": report.ok(explicit=explicit), "runs": runs}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
