"""``agent-meta own`` as a real process over pipes, in front of a child that breaks every rule
(``tests/broken_agents/unruly.py``) and of the reference agent.

Each test drives ``own`` with raw NDJSON lines and folds what the client received with
:class:`~agent_meta.testing.ClientMirror`; a control run of the same child without ``own``
shows the break that ``own`` repairs. Waits are for the frame that ends what is awaited (a
response, a v2 turn's idle ``state_update``), never for time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_meta.sansio.inbound._titles import advertises_titles
from agent_meta.testing import ClientMirror
from tests.agent_process import BOUND, AgentProcess, prompt_params, request, running, stderr_of

if TYPE_CHECKING:
    from collections.abc import Iterable

ROOT = Path(__file__).resolve().parent.parent
UNRULY = [sys.executable, "-m", "tests.broken_agents.unruly"]
REFERENCE = [sys.executable, "-m", "agent_meta", "agent"]

Message = dict[str, Any]


def own(*args: str, child: list[str] = UNRULY) -> list[str]:
    return [sys.executable, "-m", "agent_meta", "own", *args, "--", *child]


def fold(messages: Iterable[Message], version: int) -> ClientMirror:
    mirror = ClientMirror(protocol_version=version)
    for message in messages:
        mirror.feed(message)
    return mirror


def updates(messages: Iterable[object], session_id: str, kind: str | None = None) -> list[Any]:
    found = []
    for message in messages:
        if not isinstance(message, dict):
            continue  # the answers to a batch (AgentProcess.messages holds them as they came)
        params: Any = message.get("params")
        if message.get("method") != "session/update" or params["sessionId"] != session_id:
            continue
        if kind is None or params["update"]["sessionUpdate"] == kind:
            found.append(params["update"])
    return found


def metas(messages: Iterable[Message], session_id: str) -> list[Any]:
    return [u.get("_meta", "omitted") for u in updates(messages, session_id, "session_info_update")]


async def turn(agent: AgentProcess, session_id: str, text: str, version: int) -> Message:
    """A prompt, until its turn ends (v1: the response; v2: the idle state_update after it)."""
    answer = await agent.prompt(session_id, text)
    if version >= 2:
        await until_idle(agent, session_id, after=agent.response_index(answer["id"]) or 0)
    return answer


async def until_idle(agent: AgentProcess, session_id: str, *, after: int) -> None:
    while not any(
        u.get("state") == "idle"
        for u in updates(agent.messages[after:], session_id, "state_update")
    ):
        assert await agent.receive() is not None, "the output ended before the turn did"


async def start(agent: AgentProcess, version: int) -> str:
    await agent.initialize(version)
    return await agent.new_session()


def after(agent: AgentProcess, response: Message) -> int:
    """The position in ``agent.messages`` just after ``response``."""
    index = agent.response_index(response["id"])
    assert index is not None
    return index + 1


async def restore(agent: AgentProcess, session_id: str, version: int) -> tuple[int, Message]:
    """A load (v1) or a resume with replay (v2); where the window began, and the response."""
    mark = len(agent.messages)
    if version == 1:
        answer = await agent.call("session/load", {"sessionId": session_id, "cwd": "/tmp"})
    else:
        params = {"sessionId": session_id, "cwd": "/tmp", "replayFrom": {"type": "start"}}
        answer = await agent.call("session/resume", params)
    assert "result" in answer, answer
    return mark, answer


# --------------------------------------------------------------------------- session info


async def test_v1_partial_objects_reach_the_client_as_whole_objects() -> None:
    text = "/meta set codex 1\n/meta set jetbrains 2"
    async with running(UNRULY) as alone:
        session = await start(alone, 1)
        await turn(alone, session, text, 1)
    assert fold(alone.messages, 1).meta(session) == {"jetbrains": 2}  # the break: one wipes one
    async with running(own()) as agent:
        session = await start(agent, 1)
        await turn(agent, session, text, 1)
        new = {"stage": "new"}  # what it publishes at session/new
        states = [new, {**new, "codex": 1}, {**new, "codex": 1, "jetbrains": 2}]
        sent = metas(agent.messages, session)  # whole objects; coalescing may skip some
        assert sent[-1] == states[-1]
        assert all(state in states for state in sent), sent
        assert fold(agent.messages, 1).meta(session) == states[-1]
        assert await agent.finish() == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_what_the_childs_session_new_handler_publishes_is_state(version: int) -> None:
    """The child publishes ``{"handler": 1}`` before its ``session/new`` response, then
    ``{"stage": "new"}`` after it: the lifetime the response opens knows the first, so the
    next v1 object and the resync of a load or resume carry both (issue 27's first rule)."""
    child = [*UNRULY, "--publish-in-new"]
    both = {"handler": 1, "stage": "new"}
    async with running(child) as alone:
        session = await start(alone, 1)
        await turn(alone, session, "hello", 1)  # its frames after session/new precede this
    assert fold(alone.messages, 1).meta(session) == {"stage": "new"}  # the break, on v1
    async with running(own(child=child)) as agent:
        session = await start(agent, version)
        await turn(agent, session, "hello", version)
        if version == 1:
            assert metas(agent.messages, session)[-1] == both  # one whole object
        mark, _ = await restore(agent, session, version)
        assert fold(agent.messages[mark:], version).meta(session) == both
        assert fold(agent.messages, version).meta(session) == both
        assert await agent.finish() == 0


async def test_replace_takes_a_v1_childs_objects_as_its_whole_meta() -> None:
    async with running(own("--child-meta", "replace", child=REFERENCE)) as agent:
        session = await start(agent, 1)
        await turn(agent, session, "/meta set a 1\n/meta set b 2\n/meta rm a", 1)
        assert fold(agent.messages, 1).meta(session) == {"b": 2}
        assert await agent.finish() == 0


CORRECT = [sys.executable, "-m", "tests.broken_agents.correct"]
REMOVAL = "/meta set k 1\n/meta set j 2\n/meta rm k"


async def test_an_agent_on_agent_meta_says_its_v1_objects_are_whole_and_own_reads_them_so() -> None:
    """Issue 33 (3): ``agent-meta agent`` sends whole objects on v1 and says so in its
    ``initialize`` result; ``own`` without ``--child-meta`` honours it, so a key the agent
    removes is removed for the client too (it used to stay)."""
    async with running(REFERENCE) as alone:
        answer = await alone.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert answer["result"]["_meta"]["agent-meta"] == {"v1MetaObjects": "whole"}
    async with running(own(child=REFERENCE)) as agent:
        session = await start(agent, 1)
        await turn(agent, session, REMOVAL, 1)
        assert fold(agent.messages, 1).meta(session) == {"j": 2}
        assert await agent.finish() == 0
        said = await stderr_of(agent)
    assert "its v1 _meta objects are read as it says: whole" in said


async def test_whole_objects_of_a_child_that_does_not_say_are_warned_about_once() -> None:
    """A v1 child that sends whole objects without saying so (the base broken agent) is read
    as patching, as ``--child-meta`` defaults; ``own`` says once that its objects look whole
    and names the flag. Partial objects (the unruly child's, codex-acp's) never look whole."""
    async with running(own(child=CORRECT)) as agent:
        session = await start(agent, 1)
        await turn(agent, session, REMOVAL + "\n/meta set i 3\n/meta rm j", 1)
        held = fold(agent.messages, 1).meta(session)
        assert held == {"stage": "new", "k": 1, "j": 2, "i": 3}  # read as patches
        assert await agent.finish() == 0
        said = await stderr_of(agent)
    assert said.count("look whole") == 1
    assert "leaves out 'k'" in said
    assert "--child-meta replace" in said
    async with running(own()) as agent:
        session = await start(agent, 1)
        await turn(agent, session, REMOVAL, 1)
        assert await agent.finish() == 0
        assert "look whole" not in await stderr_of(agent)


@pytest.mark.parametrize("version", [1, 2])
async def test_a_replay_is_forwarded_as_sent_then_the_client_is_resynced(version: int) -> None:
    async with running(own()) as agent:
        session = await start(agent, version)
        await turn(agent, session, '/title Work\n/meta set stage "working"', version)
        mark, answer = await restore(agent, session, version)
        window = agent.messages[mark : agent.response_index(answer["id"])]
        stale: Message = {"sessionUpdate": "session_info_update", "title": "New session"}
        stale["_meta"] = {"stage": "new"}
        assert stale in updates(window, session)  # the replay, as the child sent it
        expected: list[Any] = [{"stage": "new"}, {"stage": "working"}]  # v1: the whole object
        if version == 2:
            expected = [{"stage": "new"}, None, {"stage": "working"}]  # clear, then snapshot
        assert metas(window, session) == expected
        held = fold(agent.messages[: agent.response_index(answer["id"])], version)
        assert held.meta(session) == {"stage": "working"}
        assert held.info(session).title == "Work"
        assert await agent.finish() == 0


async def test_the_childs_own_v2_resync_is_taken_and_not_repeated() -> None:
    """The reference agent resyncs itself (R4); ``own`` sees its state restored and adds
    nothing before the response."""
    async with running(own(child=REFERENCE)) as agent:
        session = await start(agent, 2)
        await turn(agent, session, "/title T\n/meta set a 1\n/meta set b 2\n/meta rm b", 2)
        mark, answer = await restore(agent, session, 2)
        window = agent.messages[mark : agent.response_index(answer["id"])]
        assert metas(window, session) == [None, {"a": 1}]
        assert fold(agent.messages, 2).meta(session) == {"a": 1}
        assert await agent.finish() == 0


async def test_stale_info_replayed_after_the_response_is_not_state() -> None:
    async with running(own()) as agent:
        session = await start(agent, 1)
        await turn(agent, session, '/meta set stage "working"\nhello', 1)
        await turn(agent, session, "/late", 1)
        await turn(agent, session, "/meta set stage 2", 1)
        _, answer = await restore(agent, session, 1)
        # The rest of the replay comes after the response; read it with a round trip.
        await agent.call("session/list", {})
        after = agent.messages[agent.response_index(answer["id"]) :]
        assert updates(after, session, "user_message_chunk")  # history went on
        assert not updates(after, session, "session_info_update")  # its info did not
        assert fold(agent.messages, 1).meta(session) == {"stage": 2}
        await agent.stdin.aclose()
        assert "stale session info" in await stderr_of(agent)


# --------------------------------------------------------------------------- close


async def test_nothing_of_a_closed_session_reaches_the_client_until_it_reopens() -> None:
    async with running(UNRULY) as alone:
        session = await start(alone, 2)
        closed = await alone.call("session/close", {"sessionId": session})
        await alone.call("session/list", {})
        late = alone.messages[after(alone, closed) :]
    assert updates(late, session)  # the break: updates and a request after the close

    async with running(own()) as agent:
        session = await start(agent, 2)
        await turn(agent, session, "/meta set a 1", 2)
        closed = await agent.call("session/close", {"sessionId": session})
        await agent.call("session/list", {})
        late = agent.messages[after(agent, closed) :]
        assert [m for m in late if (m.get("params") or {}).get("sessionId") == session] == []
        await restore(agent, session, 2)  # reopened: a fresh lifetime
        await turn(agent, session, "/answers", 2)
        replies = updates(agent.messages, session, "agent_message_chunk")
        # The child's permission request about the closed session was answered for it.
        answers = json.loads(replies[-1]["content"]["text"])
        assert json.loads(answers[0])["error"]["code"] == -32002
        await turn(agent, session, "/meta set b 2", 2)
        # The fresh lifetime was built from the replay (its creation's info), then published.
        assert fold(agent.messages, 2).meta(session) == {"stage": "new", "b": 2}
        await agent.stdin.aclose()
        assert "frames of closed sessions" in await stderr_of(agent)


async def test_what_the_child_sent_before_its_close_response_leaves_before_it() -> None:
    """Fencing begins at the close (R6, issue 33): the child's last updates, sent before its
    ``session/close`` response, reach the client before that response and in order; what it
    sends after the response does not."""
    child = [*UNRULY, "--publish-before-close"]
    async with running(own(child=child)) as agent:
        session = await start(agent, 2)
        closed = await agent.call("session/close", {"sessionId": session})
        await agent.call("session/list", {})
        before = agent.messages[: after(agent, closed) - 1]
        late = agent.messages[after(agent, closed) :]
        assert [m for m in late if (m.get("params") or {}).get("sessionId") == session] == []
        held = fold(before, 2)
        assert held.meta(session) == {"stage": "new", "step": 50, "closing": True}
        steps = [m["step"] for m in metas(before, session) if isinstance(m, dict) and "step" in m]
        assert steps == sorted(steps)  # merged or not, in order (R2, R3)
        await agent.stdin.aclose()
        assert await agent.finish() == 0


# --------------------------------------------------------------------------- bad input


async def test_bad_lines_of_the_child_are_reported_and_the_session_goes_on() -> None:
    async with running(own("--max-line", "4096")) as agent:
        session = await start(agent, 1)
        await turn(
            agent, session, "/raw this is no JSON\n/bad-meta\n/huge 10000\n/meta set ok 1", 1
        )
        assert "this is no JSON" not in b"\n".join(agent.lines).decode()
        assert [m for m in agent.messages if m.get("method") == "_unruly/huge"] == []
        new = {"stage": "new"}  # what it publishes at session/new
        assert metas(agent.messages, session)[-1] == {**new, "ok": 1}  # no [1, 2]
        assert [1, 2] not in metas(agent.messages, session)
        await agent.stdin.aclose()
        said = await stderr_of(agent)
    assert "not JSON" in said
    assert "4096-byte line limit" in said
    assert "that is not session info" in said


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("coalesce", [True, False])
async def test_an_update_nested_past_the_depth_limit_is_refused_and_own_goes_on(
    version: int, coalesce: bool
) -> None:
    """Issue 30 (1): a ``_meta`` nested 600 levels deep (inside the line limit, past the
    owner's depth limit) is refused and reported like any bad update; it used to crash the
    coalescing path (a ``RecursionError`` while the batch was copied), leaving the prompt
    unanswered."""
    flags = () if coalesce else ("--no-coalesce",)
    async with running(own(*flags)) as agent:
        session = await start(agent, version)
        answer = await turn(agent, session, "/deep 600\n/meta set ok 1", version)
        assert "result" in answer, answer
        assert fold(agent.messages, version).meta(session) == {"stage": "new", "ok": 1}
        assert not [
            m for m in metas(agent.messages, session) if isinstance(m, dict) and "deep" in m
        ]
        assert await agent.finish() == 0
        said = await stderr_of(agent)
    assert "nested deeper than" in said
    assert "1 session_info_update frames of the agent that are no session info" in said


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("coalesce", [True, False])
async def test_an_oversized_update_costs_no_other_update_read_with_it(
    version: int, coalesce: bool
) -> None:
    """Issue 30 (2): four updates in one write, of which only the third makes the session's
    info too large for a frame (``--max-line 9000``): exactly that one is refused, however
    the child's writes were read, as publishing them one by one refuses it (R3, R12)."""
    flags = ("--max-line", "9000") if coalesce else ("--max-line", "9000", "--no-coalesce")
    sent = [{"a": 1}, {"big1": "x*5000"}, {"big2": "x*5000"}, {"c": 3}]
    async with running(own(*flags)) as agent:
        session = await start(agent, version)
        await turn(agent, session, "/metas " + json.dumps(sent), version)
        held = fold(agent.messages, version).meta(session)
        assert held == {"stage": "new", "a": 1, "big1": "x" * 5000, "c": 3}
        assert await agent.finish() == 0
        said = await stderr_of(agent)
    assert "1 session_info_update frames of the agent that are no session info" in said
    assert '"big2"' in said
    assert '"big1"' not in said


async def test_no_coalesce_is_one_v1_frame_per_update_behind_a_slow_client() -> None:
    """Issue 30 (3): with ``--no-coalesce`` every update of the child is a frame of its own on
    v1 too, each the whole object after that update, even while the client reads nothing.

    A 2 KB key makes every v1 frame large, so ``own``'s output pipe is full after a few dozen
    frames and the rest wait in the owner's queue (256 entries) and in the child's pipe; the
    client sends 2 MiB the child reads only once its prompt is done, and reads nothing until
    it could. The frames queued meanwhile used to be rendered at write time, as the newest
    object, and the ones behind each silenced."""
    count = 600
    pad = "x" * 2000
    async with running(own("--no-coalesce")) as agent:
        session = await start(agent, 1)
        await turn(agent, session, f"/meta set pad {json.dumps(pad)}", 1)
        prompt = agent.next_id()
        await agent.send(
            request(prompt, "session/prompt", prompt_params(session, f"/spam {count} k"))
        )
        filler = json.dumps({"jsonrpc": "2.0", "method": "_pad", "params": {"p": "x" * 65000}})
        with trio.fail_after(BOUND / 2):
            await agent.send(*[filler.encode() + b"\n"] * 32)
        await agent.response(prompt)
        spam = [m for m in metas(agent.messages, session) if isinstance(m, dict) and "k" in m]
        assert spam == [{"stage": "new", "pad": pad, "k": n} for n in range(1, count + 1)]
        assert await agent.finish() == 0


BAD_CLIENT_LINES = [
    b"this is no JSON",
    b'{"jsonrpc":"2.0","id":5}',
    b'{"jsonrpc":"1.0","id":6,"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":[1]}',
    b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"a\\u0000b"}}',
    b"[]",
]


async def answers_to(argv: list[str], lines: list[bytes]) -> list[tuple[object, int]]:
    async with running(argv) as agent:
        await agent.initialize(1)
        await agent.send(*(line + b"\n" for line in lines))
        mark = len(agent.messages)
        await agent.call("session/list", {})  # every line before it is answered by then
        return [(m["id"], m["error"]["code"]) for m in agent.messages[mark:] if "error" in m]


async def test_bad_client_lines_get_the_errors_agent_meta_agent_gives() -> None:
    expected = await answers_to(REFERENCE, BAD_CLIENT_LINES)
    # A malformed response (id 5) is never answered: JSON-RPC answers no response.
    assert [code for _, code in expected] == [-32700, -32600, -32602, -32602, -32600]
    assert await answers_to(own(), BAD_CLIENT_LINES) == expected


# --------------------------------------------------------------------------- byte-exact


async def test_everything_else_passes_byte_for_byte_with_its_ids() -> None:
    odd = b'{ "method" : "_unruly/echo", "jsonrpc":"2.0", "id" : "x-\\u00e9", '
    odd += b'"params":{"k":[1,2.50,null]} }'
    async with running(own()) as agent:
        session = await start(agent, 1)
        await agent.send(odd + b"\n")
        echo = await agent.response("x-\u00e9")
        assert echo["result"]["line"] == odd.decode()  # the child got the client's bytes
        index = agent.response_index("x-\u00e9")
        assert index is not None
        expected = json.dumps(
            {"jsonrpc": "2.0", "id": "x-\u00e9", "result": echo["result"]}, separators=(",", ":")
        )
        assert agent.lines[index] == expected.encode()  # the client got the child's bytes
        unknown = await agent.call("no/such/method", {"a": 1})
        assert unknown["error"]["code"] == -32601
        big_id = 2**53 + 1
        await agent.send(request(big_id, "session/list", {}))
        assert "result" in await agent.response(big_id)

        prompt = agent.next_id()
        await agent.send(request(prompt, "session/prompt", prompt_params(session, "/ask Ship it?")))
        asked = None
        while asked is None:
            message = await agent.receive()
            assert message is not None
            if message.get("method") == "session/request_permission":
                asked = message
        assert asked["id"] == "ask-1"
        answered = b'{"jsonrpc":"2.0","id":"ask-1",'
        answered += b'"result":{"outcome":{"outcome":"selected","optionId":"allow"}} }'
        await agent.send(answered + b"\n")
        await agent.response(prompt)
        await turn(agent, session, "/answers", 1)
        replies = updates(agent.messages, session, "agent_message_chunk")
        assert json.loads(replies[-1]["content"]["text"]) == [answered.decode()]
        assert await agent.finish() == 0


# --------------------------------------------------------------------------- the end


async def test_a_child_that_dies_leaves_no_request_unanswered() -> None:
    async with running(own()) as agent:
        session = await start(agent, 1)
        answer = await agent.prompt(session, "/die 3")
        assert answer["error"]["code"] == -32603
        assert "exited (status 3)" in answer["error"]["message"]
        assert await agent.finish() == 3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_ends_both_cleanly(signum: int) -> None:
    async with running(own(child=REFERENCE)) as agent:
        session = await start(agent, 2)
        await turn(agent, session, "/meta set a 1", 2)
        agent.process.send_signal(signum)
        assert await agent.read_to_end() == b""
        assert await agent.process.wait() == 0  # the reference agent stops gracefully


def test_a_child_that_cannot_start_is_a_shell_status() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_meta", "own", "--", "/no/such/agent"],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 127
    assert "cannot start the agent" in done.stderr


# --------------------------------------------------------------------------- slow client


async def test_a_slow_client_gets_coalesced_frames_and_the_child_is_never_blocked() -> None:
    count = 3000
    async with running(own()) as agent:
        session = await start(agent, 2)
        prompt = agent.next_id()
        await agent.send(
            request(prompt, "session/prompt", prompt_params(session, f"/spam {count} k"))
        )
        # Not reading: 2 MiB the child reads only once its prompt is done; while the client
        # reads nothing, the child could not finish if own stopped taking its output.
        pad = json.dumps({"jsonrpc": "2.0", "method": "_pad", "params": {"p": "x" * 65000}})
        with trio.fail_after(BOUND / 2):
            await agent.send(*[pad.encode() + b"\n"] * 32)
        await agent.response(prompt)
        await until_idle(agent, session, after=0)
        sent = metas(agent.messages, session)
        assert len(sent) < count / 2, len(sent)
        assert fold(agent.messages, 2).meta(session) == {"stage": "new", "k": count}
        assert await agent.finish() == 0


# --------------------------------------------------------------------------- --store


async def test_a_restarted_proxy_and_child_restore_the_lifetime_from_the_store(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "own.sqlite")
    async with running(own("--store", store)) as agent:
        session = await start(agent, 1)
        await turn(agent, session, '/title Work\n/meta set stage "working"', 1)
        assert await agent.finish() == 0
    async with running(own("--store", store)) as agent:  # a new child knows nothing of it
        await agent.initialize(1)
        mark, answer = await restore(agent, session, 1)
        held = fold(agent.messages[mark : agent.response_index(answer["id"])], 1)
        assert held.meta(session) == {"stage": "working"}
        assert held.info(session).title == "Work"
        assert await agent.finish() == 0


# --------------------------------------------------------------------------- client-set titles


def titles(messages: Iterable[Message], session_id: str) -> list[Any]:
    return [
        u["title"] for u in updates(messages, session_id, "session_info_update") if "title" in u
    ]


@pytest.mark.parametrize("version", [1, 2])
async def test_a_client_set_title_is_answered_kept_and_listed_for_a_child_without_it(
    version: int, tmp_path: Path
) -> None:
    store = str(tmp_path / "titles.sqlite")
    async with running(own("--store", store)) as agent:
        answer = await agent.call(
            "initialize", {"protocolVersion": version, "clientCapabilities": {}}
        )
        assert advertises_titles(answer["result"])  # own serves it: the child does not
        session = await agent.new_session()
        await turn(agent, session, "/title Generated", version)
        mark = len(agent.messages)
        answer = await agent.call("session/set_title", {"sessionId": session, "title": "Mine"})
        assert answer["result"] == {"title": "Mine"}
        assert titles(agent.messages[mark:], session) == ["Mine"]  # confirmed, then answered
        mark = len(agent.messages)
        await turn(agent, session, "/title Generated again", version)
        assert titles(agent.messages[mark:], session) == []  # the child's never beats it
        listing = await agent.call("session/list", {})
        assert [e["title"] for e in listing["result"]["sessions"]] == ["Mine"]
        mark, answer = await restore(agent, session, version)
        held = fold(agent.messages[: agent.response_index(answer["id"])], version)
        assert held.info(session).title == "Mine"  # the replayed "New session" was repaired
        unknown = await agent.call("session/set_title", {"sessionId": "nope", "title": "T"})
        assert unknown["error"]["code"] == -32002
        assert await agent.finish() == 0
    async with running(own("--store", store)) as agent:  # restarted, with a new child
        await agent.initialize(version)
        mark, answer = await restore(agent, session, version)
        held = fold(agent.messages[mark : agent.response_index(answer["id"])], version)
        assert held.info(session).title == "Mine"
        listing = await agent.call("session/list", {})
        assert [e["title"] for e in listing["result"]["sessions"]] == ["Mine"]
        assert await agent.finish() == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_a_client_set_title_inside_a_batch_is_answered_by_own(version: int) -> None:
    """Issue 30 (4): R13 holds inside a client's JSON-RPC batch: a ``session/set_title`` for a
    child that does not serve it is confirmed and answered by ``own`` (in an array, as a batch
    is answered) and never reaches the child; the child's later titles never reach the
    client, and ``session/list`` reports the client's."""
    async with running(own()) as agent:
        session = await start(agent, version)
        await turn(agent, session, "hello", version)  # what it sends after session/new is in
        params = {"sessionId": session, "title": "Mine"}
        batch = [{"jsonrpc": "2.0", "id": 50, "method": "session/set_title", "params": params}]
        mark = len(agent.messages)
        await agent.send(json.dumps(batch).encode() + b"\n")
        answers: Any = None
        while answers is None:
            message: Any = await agent.receive()
            assert message is not None, "the output ended before the batch was answered"
            if isinstance(message, list):
                answers = message
        assert [(a["id"], a["result"]) for a in answers] == [(50, {"title": "Mine"})]
        assert titles(agent.messages[mark:], session) == ["Mine"]  # confirmed, then answered
        mark = len(agent.messages)
        await turn(agent, session, "/title Generated", version)
        assert titles(agent.messages[mark:], session) == []  # the child's never beats it
        listing = await agent.call("session/list", {})
        assert [e["title"] for e in listing["result"]["sessions"]] == ["Mine"]
        await turn(agent, session, "/answers", version)
        replies = updates(agent.messages, session, "agent_message_chunk")
        assert json.loads(replies[-1]["content"]["text"]) == []  # nothing reached the child
        assert await agent.finish() == 0


async def answers_of(agent: AgentProcess, batch: list[Message]) -> dict[object, Message]:
    """Send ``batch`` as one line; the answers, by id, read up to the array holding them."""
    await agent.send(json.dumps(batch).encode() + b"\n")
    wanted = {entry["id"] for entry in batch}
    answered: dict[object, Message] = {}
    while not wanted <= answered.keys():
        message: Any = await agent.receive()
        assert message is not None, "the output ended before the batch was answered"
        if isinstance(message, list):
            answered.update((entry["id"], entry) for entry in message)
    return answered


@pytest.mark.parametrize("version", [1, 2])
async def test_the_childs_answers_to_a_batch_are_rewritten_as_single_ones(version: int) -> None:
    """Found in the second attack on ``own``: the child's array answering a client's batch
    gets the rewrites a single answer gets. ``initialize`` advertises ``session/set_title``
    (and, on v1, what its ``_meta`` objects mean), ``session/list`` lists the client's title."""
    async with running(own()) as agent:
        init = {"protocolVersion": version, "clientCapabilities": {}}
        answered = await answers_of(
            agent, [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}]
        )
        result = answered[1]["result"]
        assert advertises_titles(result)
        if version == 1:
            assert result["_meta"]["agent-meta"] == {"v1MetaObjects": "whole"}
        session = await agent.new_session()
        await turn(agent, session, "hello", version)
        answer = await agent.call("session/set_title", {"sessionId": session, "title": "Mine"})
        assert answer["result"] == {"title": "Mine"}
        listing = {"jsonrpc": "2.0", "id": 70, "method": "session/list", "params": {}}
        answered = await answers_of(agent, [listing])
        assert [e["title"] for e in answered[70]["result"]["sessions"]] == ["Mine"]
        assert await agent.finish() == 0
