"""``agent-meta timeline``: a proxy log as a terminal table and as one self-contained HTML page."""

from __future__ import annotations

import io
import json
import re
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
from rich.console import Console

from agent_meta.cli._main import main
from agent_meta.tools._peer import AgentPeer
from agent_meta.tools._timeline import CONNECTION, LogError, load, render_html, render_terminal

if TYPE_CHECKING:
    from pathlib import Path

AGENT = [sys.executable, "-m", "agent_meta", "agent"]
PROXY = [sys.executable, "-m", "agent_meta", "proxy"]


def rpc(**message: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **message})


def info(meta: Any, session: str = "s1") -> str:
    update = {"sessionUpdate": "session_info_update", "_meta": meta}
    return rpc(method="session/update", params={"sessionId": session, "update": update})


def record(seq: int, source: str, line: str, session: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"seq": seq, "t": seq / 1000, "from": source, "protocol": 2}
    body.update({"session": session, "line": line, "findings": []})
    body.update(extra)
    return json.dumps(body)


FINDING = {"rule": "fence", "message": "<b>late</b> & after close", "frames": [4, 5]}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A small log: a request, an update, a close, a frame after it, a malformed line."""
    lines = [
        record(1, "client", rpc(id=1, method="initialize", params={})),
        record(2, "agent", rpc(id=1, result={"protocolVersion": 2})),
        record(3, "agent", info({"a": "<script>alert(1)</script>"}), "s1",
               state={"title": "T", "_meta": {"a": "<script>alert(1)</script>"}}),
        record(4, "agent", rpc(id=7, result={}), "s1", state={"_meta": {"a": "x"}}),
        record(5, "agent", info({"late": 1}), "s1", state={"_meta": {"late": 1}},
               findings=[FINDING]),
        record(6, "agent", "{not json", None, findings=[{"rule": "json", "message": "bad"}]),
        record(7, "agent", info(None, "s2"), "s2", state={"_meta": None}),
        record(8, "agent", rpc(id=9, error={"code": -32002, "message": "gone"}), "s2",
               state={"_meta": None}),
    ]  # fmt: skip
    path = tmp_path / "log.ndjson"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return path


def test_load_groups_by_session_and_summarizes(log: Path) -> None:
    timeline = load(str(log))
    assert list(timeline.groups) == ["s1", "s2", CONNECTION]
    assert timeline.frames == 8
    assert timeline.protocol == 2
    s1 = timeline.groups["s1"]
    assert [row.summary for row in s1] == [
        "session_info_update",
        "result of request (id 7)",
        "session_info_update",
    ]
    assert s1[0].detail == '{"_meta":{"a":"<script>alert(1)</script>"}}'
    assert [row.changed for row in s1] == [True, True, True]
    connection = timeline.groups[CONNECTION]
    assert [row.summary for row in connection] == [
        "initialize (id 1)",
        "result of initialize (id 1)",
        "(not a JSON-RPC message)",
    ]
    s2 = timeline.groups["s2"]
    assert [row.changed for row in s2] == [True, False]
    assert s2[1].summary == "error -32002 for request (id 9)"
    assert len(timeline.findings()) == 2


def test_a_batch_line_is_summarized_entry_by_entry(tmp_path: Path) -> None:
    batch = "[" + rpc(id=1, method="session/list", params={}) + "," + rpc(method="x") + ",3]"
    answers = "[" + rpc(id=1, result={"sessions": []}) + "]"
    path = tmp_path / "log.ndjson"
    lines = [record(1, "client", batch), record(2, "agent", answers), record(3, "agent", "[]")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = load(str(path)).groups[CONNECTION]
    assert [row.summary for row in rows] == [
        "batch of 3: session/list (id 1); x; (not a JSON-RPC message)",
        "batch of 1: result of session/list (id 1)",
        "(not a JSON-RPC message)",
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("not json\n", "log.ndjson:1: not JSON"),
        ("[1]\n", "log.ndjson:1: a record is a JSON object"),
        ('{"seq": 1}\n', "log.ndjson:1: not an agent-meta proxy log record (no 'from')"),
    ],
)
def test_a_file_that_is_no_log_is_named(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "log.ndjson"
    path.write_text(text)
    with pytest.raises(LogError, match=re.escape(error)):
        load(str(path))


def test_the_terminal_table(log: Path) -> None:
    out = io.StringIO()
    render_terminal(load(str(log)), Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert text.index("session s1") < text.index("session s2") < text.index("connection")
    assert "[fence] <b>late</b> & after close (#4, #5)" in text
    assert '{"late":1}' in text
    assert "(same)" in text  # s2's error answer changed nothing
    assert text.rstrip().endswith("8 frames, 2 session(s), protocol v2: 1 fence, 1 json")


def test_the_terminal_table_of_one_session(log: Path) -> None:
    out = io.StringIO()
    render_terminal(load(str(log)), Console(file=out, width=200), session="s2")
    assert "session s2" in out.getvalue()
    assert "session s1" not in out.getvalue()


def test_the_html_page_is_self_contained_and_escaped(log: Path) -> None:
    page = render_html(load(str(log)))
    assert page.startswith("<!doctype html>")
    assert "<script" not in page  # agent data is text, never markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;late&lt;/b&gt; &amp; after close" in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # no outside resources
    assert '<tr id="f5" class="agent finding">' in page
    assert '<a href="#f4">#4</a>' in page  # a finding links the frames that show it
    assert page.count("<table>") == 3


def test_the_command_line(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.html"
    assert main(["timeline", str(log), "--html", str(page)]) == 0
    assert "<h1>agent-meta timeline:" in page.read_text()
    assert capsys.readouterr().out.startswith(f"wrote {page}: 8 frames")
    assert main(["timeline", str(log)]) == 0
    assert "session s1" in capsys.readouterr().out
    assert main(["timeline", str(log), "--session", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["timeline", str(tmp_path / "missing")]) == 2
    assert "No such file" in capsys.readouterr().err
    assert main(["timeline", str(log), "--html", str(tmp_path / "no" / "dir.html")]) == 2
    assert "cannot write the page" in capsys.readouterr().err


async def test_a_real_proxy_log_renders(tmp_path: Path) -> None:
    """The proxy's own log, from a real session, is what the timeline reads."""
    path = tmp_path / "log.ndjson"
    with trio.fail_after(30):
        command = [*PROXY, "--log", str(path), "--", *AGENT]
        async with AgentPeer.spawn(command, answer_within=30) as peer:
            await peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            new = await peer.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session = new.result["sessionId"]
            prompt = [{"type": "text", "text": '/meta set a {"x":1}\n/title Real'}]
            await peer.request("session/prompt", {"sessionId": session, "prompt": prompt})
            load_params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
            await peer.request("session/load", load_params)
    timeline = load(str(path))
    assert timeline.protocol == 1
    assert timeline.frames == len(peer.frames)
    assert timeline.findings() == []
    last = timeline.groups[session][-1]
    assert last.summary == "result of session/load (id 4)"
    assert last.state == {"title": "Real", "_meta": {"a": {"x": 1}}}


def test_the_page_of_one_session(log: Path, tmp_path: Path) -> None:
    """``--session`` with ``--html`` used to be ignored: the page showed every session."""
    page = tmp_path / "page.html"
    assert main(["timeline", str(log), "--html", str(page), "--session", "s2"]) == 0
    text = page.read_text()
    assert "session s2" in text
    assert "session s1" not in text
    assert "connection (no session)" not in text
    assert text.count("<table>") == 1
    assert "8 frames, 2 session(s)" in text  # the log's summary, as under the terminal table
    assert main(["timeline", str(log), "--html", str(page), "--session", "nope"]) == 2
