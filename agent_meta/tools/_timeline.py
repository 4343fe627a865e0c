"""``agent-meta timeline``: an ``agent-meta proxy --log`` file, readable by people.

Per session, each frame in order with what the client held after it (``title`` and the folded
``_meta``), findings highlighted: as a terminal table (rich, the ``timeline`` extra) or as one
self-contained HTML page (no scripts, no external files) to keep with a bug report.
"""

from __future__ import annotations

import dataclasses
import html
import json
import sys
from typing import TYPE_CHECKING, Any, Final

from ._watch import RULES

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

__all__ = ["LogError", "Timeline", "add_parser", "load", "render_html", "render_terminal", "run"]

CONNECTION: Final = ""
"""The group of frames that belong to no session (initialize, session/list, ...)."""


class LogError(ValueError):
    """The file is not an ``agent-meta proxy --log`` file; the message says where and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One frame of the timeline, ready to render."""

    seq: int
    t: float
    source: str
    summary: str
    detail: str
    line: str
    state: dict[str, Any] | None
    changed: bool
    findings: tuple[dict[str, Any], ...]


@dataclasses.dataclass(slots=True)
class Timeline:
    """A log grouped by session (``CONNECTION`` last), in frame order within each."""

    name: str
    groups: dict[str, list[Row]] = dataclasses.field(default_factory=dict)
    frames: int = 0
    protocol: int | None = None

    def findings(self) -> list[dict[str, Any]]:
        return [f for rows in self.groups.values() for row in rows for f in row.findings]


def load(path: str) -> Timeline:
    """Read a proxy log. Raises :class:`LogError` (with the line number) or ``OSError``."""
    timeline = Timeline(name=path)
    requests: dict[tuple[str, str], str] = {}
    last_state: dict[str, Any] = {}
    with open(path, encoding="utf-8") as file:
        for number, text in enumerate(file, 1):
            if not text.strip():
                continue
            record = _record(text, f"{path}:{number}")
            session = record.get("session") or CONNECTION
            message = _message(record["line"])
            summary, detail = _summarize(record["from"], message, requests)
            state = record.get("state")
            state = state if isinstance(state, dict) else None
            changed = state is not None and state != last_state.get(session)
            if state is not None:
                last_state[session] = state
            row = Row(
                seq=record["seq"],
                t=float(record.get("t") or 0.0),
                source=record["from"],
                summary=summary,
                detail=detail,
                line=record["line"],
                state=state,
                changed=changed,
                findings=tuple(record["findings"]),
            )
            timeline.groups.setdefault(session, []).append(row)
            timeline.frames += 1
            if isinstance(record.get("protocol"), int):
                timeline.protocol = record["protocol"]
    if CONNECTION in timeline.groups:  # sessions first: they are what the page is for
        timeline.groups[CONNECTION] = timeline.groups.pop(CONNECTION)
    return timeline


def _record(text: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise LogError(f"{where}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise LogError(f"{where}: a record is a JSON object")
    for key, kind in (("seq", int), ("from", str), ("line", str), ("findings", list)):
        if not isinstance(record.get(key), kind):
            raise LogError(f"{where}: not an agent-meta proxy log record (no {key!r})")
    return record


def _message(line: str) -> dict[str, Any] | list[Any] | None:
    """A frame's message, a batch (a non-empty array), or ``None`` for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) or (isinstance(message, list) and message):
        return message
    return None


def _summarize(
    source: str, message: dict[str, Any] | list[Any] | None, requests: dict[tuple[str, str], str]
) -> tuple[str, str]:
    """A one-line summary of a frame, and a detail (the update's fields) for session info."""
    if isinstance(message, list):
        return _summarize_batch(source, message, requests), ""
    if message is None:
        return "(not a JSON-RPC message)", ""
    if isinstance(message.get("method"), str):
        return _summarize_call(source, message, requests)
    request_id = json.dumps(message.get("id"))
    asker = "agent" if source == "client" else "client"
    method = requests.pop((asker, request_id), "request")
    error = message.get("error")
    if isinstance(error, dict):
        summary = f"error {error.get('code')} for {method} (id {request_id})"
        return summary, str(error.get("message"))
    return f"result of {method} (id {request_id})", ""


def _summarize_batch(source: str, batch: list[Any], requests: dict[tuple[str, str], str]) -> str:
    parts = []
    for entry in batch:
        summary, _ = _summarize(source, entry if isinstance(entry, dict) else None, requests)
        parts.append(summary)
    return f"batch of {len(batch)}: " + "; ".join(parts)


def _summarize_call(
    source: str, message: dict[str, Any], requests: dict[tuple[str, str], str]
) -> tuple[str, str]:
    """A request or a notification."""
    method = message["method"]
    if "id" in message:
        request_id = json.dumps(message.get("id"))
        requests[(source, request_id)] = method
        return f"{method} (id {request_id})", ""
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if method == "session/update" and isinstance(update, dict):
        kind = str(update.get("sessionUpdate"))
        if kind == "session_info_update":
            fields = {k: v for k, v in update.items() if k != "sessionUpdate"}
            return kind, _compact(fields)
        return kind, ""
    return method, ""


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _state_text(row: Row) -> str:
    """The state after a frame, or ``(same)`` when the frame changed nothing the client holds."""
    state = row.state
    if state is None:
        return ""
    if not row.changed:
        return "(same)"
    parts = [f"title: {_compact(state['title'])}"] if "title" in state else []
    meta = state.get("_meta")
    parts.append("no _meta" if meta is None else _compact(meta))
    return "\n".join(parts)


def _group_title(session: str) -> str:
    return "connection (no session)" if session == CONNECTION else f"session {session}"


# --------------------------------------------------------------------------- terminal


def render_terminal(timeline: Timeline, console: Console, *, session: str | None = None) -> None:
    """Print one table per session: frame, the state after it, findings in red."""
    from rich.table import Table
    from rich.text import Text

    for name, rows in timeline.groups.items():
        if session is not None and name != session:
            continue
        table = Table(title=_group_title(name), title_justify="left", expand=False)
        table.add_column("#", justify="right", style="dim")
        table.add_column("t (s)", justify="right", style="dim")
        table.add_column("from")
        table.add_column("frame", overflow="fold", ratio=3)
        table.add_column("client holds after it", overflow="fold", ratio=2)
        table.add_column("findings", overflow="fold", ratio=2)
        for row in rows:
            frame = Text(row.summary, style="bold" if row.detail else "")
            if row.detail:
                frame.append("\n" + row.detail, style="cyan")
            held = Text(_state_text(row), style="green" if row.changed else "dim")
            findings = Text("\n".join(_finding_text(f) for f in row.findings), style="bold red")
            arrow = "client →" if row.source == "client" else "← agent"
            table.add_row(
                str(row.seq),
                f"{row.t:.3f}",
                arrow,
                frame,
                held,
                findings,
                style="on grey23" if row.findings else None,
            )
        console.print(table)
    console.print(_summary(timeline))


def _finding_text(finding: dict[str, Any]) -> str:
    frames = ", ".join(f"#{seq}" for seq in finding.get("frames", []))
    return f"[{finding.get('rule')}] {finding.get('message')} ({frames})"


def _summary(timeline: Timeline) -> str:
    findings = timeline.findings()
    counts: dict[str, int] = {}
    for finding in findings:
        counts[str(finding.get("rule"))] = counts.get(str(finding.get("rule")), 0) + 1
    sessions = len([name for name in timeline.groups if name != CONNECTION])
    text = f"{timeline.frames} frames, {sessions} session(s), protocol v{timeline.protocol}: "
    if not findings:
        return text + "no findings"
    return text + ", ".join(f"{count} {rule}" for rule, count in sorted(counts.items()))


# --------------------------------------------------------------------------- HTML

_STYLE: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1f21; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.1em; margin: 1.6em 0 .4em; }
p.summary { margin: 0 0 .8em; color: #444; }
p.summary.bad { color: #a40000; font-weight: 600; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
col.num { width: 3.5em; } col.t { width: 4.5em; } col.from { width: 5.5em; }
col.frame { width: 40%; } col.held { width: 28%; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; position: sticky; top: 0; }
td.num { color: #777; text-align: right; white-space: nowrap; }
td.from { white-space: nowrap; }
tr.client td.from { color: #2457a6; }
tr.agent td.from { color: #6b4f00; }
code, pre { font: 12px/1.6 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.detail { color: #05668d; }
td.held pre { color: #1b6e2a; }
tr.same td.held pre { color: #999; }
tr.finding { background: #fde4e4; }
tr.finding td:first-child { border-left: 4px solid #c00; }
td.findings { color: #a40000; font-weight: 600; }
ul.found { margin: 0 0 .6em; padding: 0; list-style: none; }
li.finding { background: #fde4e4; border-left: 4px solid #c00; padding: 4px 8px; margin: 2px 0;
  color: #a40000; font-weight: 600; }
ul.rules { margin: 0; padding-left: 1.2em; color: #444; }
details summary { cursor: pointer; color: #777; font-size: 12px; }
"""


def render_html(timeline: Timeline, *, session: str | None = None) -> str:
    """One self-contained page: a summary, then a table per session (``session``: that one
    only, under the log's summary, as the terminal table); findings highlighted."""
    title = f"agent-meta timeline: {timeline.name}"
    summary = _summary(timeline)
    if session is not None:
        timeline = _only(timeline, session)
    findings = timeline.findings()
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="summary{" bad" if findings else ""}">{html.escape(summary)}</p>',
        "<nav>",
    ]
    anchors = {name: f"group-{index}" for index, name in enumerate(timeline.groups)}
    for name, anchor in anchors.items():
        out.append(f'<a href="#{anchor}">{html.escape(_group_title(name))}</a>')
    out.append("</nav>")
    if findings:
        out.append(_findings_html(timeline))
    for name, rows in timeline.groups.items():
        out.append(f'<h2 id="{anchors[name]}">{html.escape(_group_title(name))}</h2>')
        out.append(
            '<table><colgroup><col class="num"><col class="t"><col class="from">'
            '<col class="frame"><col class="held"><col></colgroup>'
            "<thead><tr><th>#</th><th>t (s)</th><th>from</th><th>frame</th>"
            "<th>client holds after it</th><th>findings</th></tr></thead><tbody>"
        )
        out.extend(_html_row(row) for row in rows)
        out.append("</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _only(timeline: Timeline, session: str) -> Timeline:
    """``timeline`` with the frames of ``session`` alone."""
    return dataclasses.replace(timeline, groups={session: timeline.groups.get(session, [])})


def _findings_html(timeline: Timeline) -> str:
    """Every finding first, each linked to its frame, then what the rules it names say."""
    items: list[str] = []
    for name, rows in timeline.groups.items():
        where = "" if name == CONNECTION else f"session {name}, "
        for row in rows:
            items.extend(
                f'<li class="finding">{html.escape(where)}frame <a href="#f{row.seq}">'
                f"#{row.seq}</a>: {_finding_html(finding)}</li>"
                for finding in row.findings
            )
    seen = {str(f.get("rule")) for f in timeline.findings()}
    rules = [
        f"<li><b>{html.escape(rule.id)}</b>: {html.escape(rule.text)}</li>"
        for rule in RULES
        if rule.id in seen
    ]
    return (
        '<h2>Findings</h2><ul class="found">'
        + "".join(items)
        + '</ul><ul class="rules">'
        + "".join(rules)
        + "</ul>"
    )


def _finding_html(finding: dict[str, Any]) -> str:
    frames = [int(seq) for seq in finding.get("frames", [])]
    links = ", ".join(f'<a href="#f{seq}">#{seq}</a>' for seq in frames)
    text = html.escape(f"[{finding.get('rule')}] {finding.get('message')}")
    return f"{text} ({links})"


def _html_row(row: Row) -> str:
    classes = [row.source, "finding" if row.findings else "", "" if row.changed else "same"]
    frame = f"<code>{html.escape(row.summary)}</code>"
    if row.detail:
        frame += f'<pre class="detail">{html.escape(row.detail)}</pre>'
    frame += f"<details><summary>raw</summary><pre>{html.escape(row.line)}</pre></details>"
    findings = "".join(f"<div>{_finding_html(finding)}</div>" for finding in row.findings)
    arrow = "client →" if row.source == "client" else "← agent"
    return (
        f'<tr id="f{row.seq}" class="{" ".join(c for c in classes if c)}">'
        f'<td class="num">{row.seq}</td><td class="num">{row.t:.3f}</td>'
        f'<td class="from">{arrow}</td><td>{frame}</td>'
        f'<td class="held"><pre>{html.escape(_state_text(row))}</pre></td>'
        f'<td class="findings">{findings}</td></tr>'
    )


# --------------------------------------------------------------------------- command line


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agent-meta timeline`` to the command line."""
    parser = subparsers.add_parser(
        "timeline",
        help="render an 'agent-meta proxy --log' file as a table or an HTML page",
        description=(
            "Show an 'agent-meta proxy --log' file per session: each frame, what the client "
            "held after it (title and the folded _meta), findings highlighted. Prints a "
            "terminal table (needs the 'timeline' extra), or with --html writes "
            "one self-contained HTML page."
        ),
    )
    parser.add_argument("file", metavar="FILE", help="the log written by agent-meta proxy --log")
    parser.add_argument("--html", metavar="OUT", help="write the HTML page to OUT instead")
    parser.add_argument(
        "--session", metavar="ID", help="only this session's frames (the table or the page)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``agent-meta timeline`` with parsed arguments; return the exit status."""
    try:
        timeline = load(args.file)
    except (OSError, LogError, UnicodeDecodeError) as exc:
        print(f"agent-meta timeline: {exc}", file=sys.stderr)
        return 2
    if args.session is not None and args.session not in timeline.groups:
        print(f"agent-meta timeline: no session {args.session!r} in {args.file}", file=sys.stderr)
        return 2
    if args.html is not None:
        try:
            with open(args.html, "w", encoding="utf-8") as file:
                file.write(render_html(timeline, session=args.session))
        except OSError as exc:
            print(f"agent-meta timeline: cannot write the page: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.html}: {_summary(timeline)}")
        return 0
    try:
        from rich.console import Console
    except ImportError:
        from .._install_hint import install_hint

        print(
            "agent-meta timeline needs rich for the terminal table: "
            f"{install_hint('timeline')} (or use --html OUT)",
            file=sys.stderr,
        )
        return 2
    render_terminal(timeline, Console(), session=args.session)
    return 0
