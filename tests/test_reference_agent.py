"""The reference agent over memory streams: every command's frames, resume ordering, errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from agent_meta import OwnerOptions, SQLiteStore, serve_agent
from agent_meta.agents._common._commands import COMMANDS
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.testing import ClientMirror
from tests.peer import Peer, serve

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

INFO = {"name": "test", "version": "0"}


def _update(frame: dict[str, Any]) -> dict[str, Any]:
    assert frame["method"] == "session/update"
    update: dict[str, Any] = frame["params"]["update"]
    return update


def _info_updates(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session_info_update payloads, without the discriminator."""
    return [
        {k: v for k, v in _update(f).items() if k != "sessionUpdate"}
        for f in frames
        if f.get("method") == "session/update"
        and _update(f)["sessionUpdate"] == "session_info_update"
    ]


def _replies(frames: list[dict[str, Any]]) -> list[str]:
    return [
        _update(f)["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and _update(f)["sessionUpdate"] == "agent_message_chunk"
    ]


async def _start(peer: Peer, version: int = 2) -> str:
    init = {"protocolVersion": version, "info": INFO, "clientInfo": INFO}
    assert (await peer.request("initialize", init))["result"]["protocolVersion"] == version
    response = await peer.request("session/new", {"cwd": "/work", "mcpServers": []})
    session_id: str = response["result"]["sessionId"]
    commands = await peer.receive()
    assert commands is not None
    assert _update(commands)["sessionUpdate"] == "available_commands_update"
    return session_id


def _ends_turn(frame: dict[str, Any], session_id: str) -> bool:
    """The v2 idle ``state_update`` that ends a turn (it carries the stop reason)."""
    if frame.get("method") != "session/update" or frame["params"]["sessionId"] != session_id:
        return False
    update = frame["params"]["update"]
    return update.get("sessionUpdate") == "state_update" and "stopReason" in update


async def _prompt(
    peer: Peer, session_id: str, text: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A whole turn: the frames it wrote and its response. v1 answers at the end of the turn;
    v2 answers once the prompt is inserted and ends the turn with an idle ``state_update``."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    frames, response = await peer.call("session/prompt", params)
    if "result" in response and "messageId" in response["result"]:
        while not any(_ends_turn(frame, session_id) for frame in frames):
            frame = await peer.receive()
            assert frame is not None, "the output ended inside a turn"
            frames.append(frame)
    return frames, response


async def test_initialize_v2_and_v1_shapes() -> None:
    async with serve(ReferenceAgent()) as peer:
        result = (await peer.request("initialize", {"protocolVersion": 2, "info": INFO}))["result"]
        assert result["info"]["name"] == "agent-meta-reference"
        # session/set_title is the connection's (R13): advertised in both shapes
        assert result["capabilities"] == {"session": {"setTitle": {}, "title": {}}}
        assert "agentCapabilities" not in result
    async with serve(ReferenceAgent(), mirror_version=1) as peer:
        result = (await peer.request("initialize", {"protocolVersion": 1}))["result"]
        assert result["protocolVersion"] == 1
        assert result["agentInfo"]["name"] == "agent-meta-reference"
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is True
        assert capabilities["sessionCapabilities"] == {
            "resume": {},
            "close": {},
            "list": {},
            "setTitle": {},
            "title": {},
        }


@pytest.mark.parametrize("version", [1, 2])
async def test_new_session_responds_then_advertises_the_commands(version: int) -> None:
    async with serve(ReferenceAgent(), mirror_version=version) as peer:
        await peer.request("initialize", {"protocolVersion": version, "info": INFO})
        before, response = await peer.call("session/new", {"cwd": "/w"})
        assert before == []
        session_id = response["result"]["sessionId"]
        frame = await peer.receive()
        assert frame is not None
        assert frame["params"]["sessionId"] == session_id
        commands = _update(frame)["availableCommands"]
        assert [c["name"] for c in commands] == [name for name, _, _ in COMMANDS]
        assert all(("type" in c) == (version == 2) for c in commands)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('/meta set a {"x": [1, null]}', {"_meta": {"a": {"x": [1, None]}}}),
        ("/meta set a null", {"_meta": {"a": None}}),
        ("/meta rm a", {"_meta": {"a": None}}),
        ('/meta patch {"b": 2, "c": null}', {"_meta": {"b": 2, "c": None}}),
        ("/meta clear", {"_meta": None}),
        ("/title Hello  world", {"title": "Hello  world"}),
        ("/title", {"title": None}),
        ("/domain set ext a.b 5", {"_meta": {"ext": {"a": {"b": 5}}}}),
        (
            "/fail inc-1 3 Disk full",
            {
                "_meta": {
                    "agent-meta": {
                        "failure": {
                            "id": "inc-1",
                            "revision": 3,
                            "title": "Disk full",
                            "severity": "error",
                        }
                    }
                }
            },
        ),
    ],
)
async def test_each_command_publishes_its_frame(line: str, expected: dict[str, Any]) -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        frames, response = await _prompt(peer, session_id, line)
        assert _info_updates(frames) == [expected]
        assert _replies(frames)[0].startswith("ok: ")
        # v2 prompt lifecycle: echo, running, replies, idle; the response names the user message.
        kinds = [_update(f)["sessionUpdate"] for f in frames]
        assert kinds[:2] == ["user_message", "state_update"]
        assert kinds[-1] == "state_update"
        assert _update(frames[-1]) == {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "end_turn",
        }
        assert response["result"] == {"messageId": _update(frames[0])["messageId"]}
        assert all(
            "messageId" in _update(f)
            for f in frames
            if _update(f)["sessionUpdate"] == "agent_message_chunk"
        )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/meta set a {", "bad JSON"),
        ("/meta set a NaN", "bad JSON"),
        ("/meta set a", "usage: /meta set"),
        ("/meta patch [1]", "takes a JSON object"),
        ("/meta bogus", "usage: /meta"),
        ("/domain set ext a..b 1", "bad PATH"),
        ("/fail x notanumber", "REVISION must be an integer"),
        ("/resolve x", "usage: /resolve"),
        ("/burst 0 k", "N must be between"),
        ("/domain set k a 1", None),  # valid, then the next one walks through a non-object:
    ],
)
async def test_command_errors_are_agent_messages(line: str, message: str | None) -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        frames, response = await _prompt(peer, session_id, line)
        assert "result" in response
        if message is None:
            frames, response = await _prompt(peer, session_id, "/domain set k a.b 2")
            message = "error:"
        assert _info_updates(frames) == []
        [reply] = _replies(frames)
        assert reply.startswith("error: ")
        assert message in reply


async def test_other_lines_are_echoed_one_chunk_each() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        frames, _ = await _prompt(peer, session_id, "hello\n\n/tmp is a path\n/meta set k 1")
        assert _replies(frames) == ["hello\n", "/tmp is a path\n", "ok: _meta.k set\n"]


async def test_failure_resolves_only_on_matching_id_and_revision_keeping_siblings() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "/fail inc 2\n/domain set agent-meta other true")
        frames, _ = await _prompt(peer, session_id, "/resolve inc 1\n/resolve old 2")
        assert _info_updates(frames) == []
        assert all(r.startswith("not resolved") for r in _replies(frames))
        frames, _ = await _prompt(peer, session_id, "/resolve inc 2")
        assert _info_updates(frames) == [{"_meta": {"agent-meta": {"other": True}}}]
        assert peer.mirror.meta(session_id) == {"agent-meta": {"other": True}}


async def test_failure_path_is_configurable() -> None:
    async with serve(ReferenceAgent(), options=OwnerOptions(failure_path=("x", "y"))) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "/fail i 1 T")
        assert peer.mirror.meta(session_id) == {
            "x": {"y": {"id": "i", "revision": 1, "title": "T", "severity": "error"}}
        }


async def test_v2_resume_replays_then_clears_then_restores_then_responds() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "hi")
        await _prompt(peer, session_id, '/meta set k {"n": null}\n/title T')
        frames, response = await peer.call(
            "session/resume",
            {"sessionId": session_id, "cwd": "/work", "replayFrom": {"type": "start"}},
        )
        assert response["result"] == {}
        updates = [_update(f) for f in frames]
        assert [(u["sessionUpdate"], u.get("messageId")) for u in updates[:4]] == [
            ("user_message", "user-1"),
            ("agent_message", "agent-of-user-1"),  # the id its live chunks carried
            ("user_message", "user-2"),
            ("agent_message", "agent-of-user-2"),
        ]
        assert updates[0]["content"] == [{"type": "text", "text": "hi"}]
        assert updates[4] == {"sessionUpdate": "state_update", "state": "idle"}
        assert updates[5:] == [
            {"sessionUpdate": "session_info_update", "_meta": None},
            {"sessionUpdate": "session_info_update", "title": "T", "_meta": {"k": {"n": None}}},
        ]
        assert peer.mirror.meta(session_id) == {"k": {"n": None}}


async def test_v2_resume_without_replay_and_an_empty_state_sends_only_the_clear() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "hi")
        frames, _ = await peer.call("session/resume", {"sessionId": session_id, "cwd": "/work"})
        assert [_update(f) for f in frames] == [
            {"sessionUpdate": "state_update", "state": "idle"},
            {"sessionUpdate": "session_info_update", "_meta": None},
        ]


async def test_v1_load_replays_chunks_then_one_merged_frame_and_v1_resume_does_not_replay() -> None:
    async with serve(ReferenceAgent(), mirror_version=1) as peer:
        session_id = await _start(peer, version=1)
        frames, response = await _prompt(peer, session_id, "hello\n/meta set a 1")
        assert response["result"] == {"stopReason": "end_turn"}
        assert all("messageId" not in _update(f) for f in frames)
        frames, response = await peer.call(
            "session/load", {"sessionId": session_id, "cwd": "/work", "mcpServers": []}
        )
        assert response["result"] == {}
        updates = [_update(f) for f in frames]
        assert [u["sessionUpdate"] for u in updates] == [
            "user_message_chunk",
            "agent_message_chunk",
            "session_info_update",
        ]
        assert updates[0]["content"] == {"type": "text", "text": "hello\n/meta set a 1"}
        assert updates[2]["_meta"] == {"a": 1}
        frames, _ = await peer.call("session/resume", {"sessionId": session_id, "cwd": "/work"})
        assert [_update(f)["sessionUpdate"] for f in frames] == ["session_info_update"]
        assert peer.mirror.meta(session_id) == {"a": 1}


async def test_close_fences_the_lifetime_and_resume_opens_a_fresh_one() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "/meta set a 1\n/title T")
        assert (await peer.request("session/close", {"sessionId": session_id}))["result"] == {}
        response = await peer.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
        )
        assert response["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        listed = (await peer.request("session/list", {}))["result"]["sessions"]
        assert listed[0]["title"] == "T"
        assert listed[0]["_meta"] == {"a": 1}
        frames, _ = await peer.call("session/resume", {"sessionId": session_id, "cwd": "/work"})
        # A fresh lifetime: no metadata, and the agent knows the old title is gone (issue 13).
        assert _info_updates(frames) == [{"_meta": None}, {"title": None}]
        assert peer.mirror.info(session_id).title is None
        await _prompt(peer, session_id, "/meta set b 2")
        assert peer.mirror.meta(session_id) == {"b": 2}


async def test_unknown_sessions_and_bad_resume_params_get_errors_without_harm() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
            ("session/resume", {"sessionId": "nope", "cwd": "/"}),
        ]
        for method, params in calls:
            response = await peer.request(method, params)
            assert response["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
            assert response["error"]["data"] == {"sessionId": "nope"}
        # Closing a session that does not exist SHOULD succeed (ACP v2 schema).
        assert (await peer.request("session/close", {"sessionId": "nope"}))["result"] == {}
        bad = {"sessionId": session_id, "cwd": "/", "replayFrom": {"type": "message"}}
        assert (await peer.request("session/resume", bad))["error"][
            "code"
        ] == ErrorCode.INVALID_PARAMS
        load = {"sessionId": session_id, "cwd": "/", "mcpServers": []}
        assert (await peer.request("session/load", load))["error"][
            "code"
        ] == ErrorCode.METHOD_NOT_FOUND
        bad_prompt = {"sessionId": session_id, "prompt": []}
        assert (await peer.request("session/prompt", bad_prompt))["error"][
            "code"
        ] == ErrorCode.INVALID_PARAMS
        await _prompt(peer, session_id, "/meta set still 1")
        assert peer.mirror.meta(session_id) == {"still": 1}


async def test_list_filters_by_cwd() -> None:
    async with serve(ReferenceAgent()) as peer:
        first = await _start(peer)
        await peer.request("session/new", {"cwd": "/other"})
        await _prompt(peer, first, "/title A")
        listed = (await peer.request("session/list", {"cwd": "/work"}))["result"]["sessions"]
        assert [(s["sessionId"], s["title"], s["cwd"]) for s in listed] == [(first, "A", "/work")]
        assert listed[0]["updatedAt"].endswith("Z")


async def test_burst_races_a_resume_and_the_client_ends_with_the_last_value() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        frames, _ = await _prompt(peer, session_id, "/burst 300 n")
        assert _replies(frames) == ["ok: burst of 300 publications of n started\n"]
        frames, response = await peer.call(
            "session/resume",
            {"sessionId": session_id, "cwd": "/work", "replayFrom": {"type": "start"}},
        )
        assert response["result"] == {}
        kinds = [_update(f)["sessionUpdate"] for f in frames]
        clear = _info_updates(frames).index({"_meta": None})
        assert "user_message" in kinds
        assert clear >= 0
        with trio.fail_after(10):
            while peer.mirror.meta(session_id) != {"n": 300}:
                await peer.receive()
        listed = (await peer.request("session/list", {}))["result"]["sessions"]
        assert listed[0]["_meta"] == {"n": 300}


async def test_burst_stops_when_the_session_closes() -> None:
    async with serve(ReferenceAgent()) as peer:
        session_id = await _start(peer)
        await _prompt(peer, session_id, "/burst 1000000 n")
        assert (await peer.request("session/close", {"sessionId": session_id}))["result"] == {}
        count = len(peer.frames)
        listed = (await peer.request("session/list", {}))["result"]["sessions"]
        last = listed[0]["_meta"]["n"]
        assert last < 1_000_000
        # Nothing more is written for the closed lifetime.
        assert all(
            _update(f)["sessionUpdate"] != "session_info_update"
            for f in peer.frames[count:]
            if f.get("method") == "session/update"
        )


async def test_a_v2_prompt_cancelled_while_its_answer_waits_for_room_still_succeeds() -> None:
    """ACP v2 schema, ``session/prompt``: "Once it is inserted, the Agent MUST NOT answer with
    an error." A ``$/cancel_request`` that arrives after the insertion, while the
    ``{"messageId"}`` answer waits for queue room (the client is not reading), must end the
    turn ``cancelled`` and still answer with the message id and echo the message. The handler
    used to be cancelled inside ``respond()``, and the prompt was answered ``-32800``.

    Deterministic: the output is a lockstep stream (a write waits for the reader) and the
    owner's queue holds one frame, so two unread responses leave no room; every step waits
    until all tasks are blocked.
    """
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.lockstep_stream_one_way_pair()
    peer = Peer(to_agent, from_agent, ClientMirror(protocol_version=2))
    with trio.fail_after(10):  # a hang guard
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                async with agent_out:
                    options = OwnerOptions(capacity=1)
                    await serve_agent(ReferenceAgent(), agent_in, agent_out, options=options)

            nursery.start_soon(run)
            session_id = await _start(peer)
            for list_id in ("l1", "l2"):  # one stuck in the writer, one filling the queue
                await peer.send({"id": list_id, "method": "session/list", "params": {}})
            await trio.testing.wait_all_tasks_blocked()
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            await peer.send({"id": "p", "method": "session/prompt", "params": prompt})
            await trio.testing.wait_all_tasks_blocked()  # inserted; its answer waits for room
            await peer.notify("$/cancel_request", {"requestId": "p"})
            await trio.testing.wait_all_tasks_blocked()
            frames: list[dict[str, Any]] = []
            while not any(
                _ends_turn(frame, session_id) or (frame.get("id") == "p" and "error" in frame)
                for frame in frames
            ):
                frame = await peer.receive()
                assert frame is not None
                frames.append(frame)
            await to_agent.aclose()
    answers = [f for f in frames if "method" not in f and f.get("id") == "p"]
    assert len(answers) == 1, answers
    assert "result" in answers[0], f"an inserted prompt was answered {answers[0]}"
    echoes = [_update(f) for f in frames if f.get("method") == "session/update"]
    user = [u for u in echoes if u["sessionUpdate"] == "user_message"]
    assert [u["messageId"] for u in user] == [answers[0]["result"]["messageId"]], echoes
    assert echoes[-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "cancelled",
    }


_V1_TABLES = """
CREATE TABLE reference_sessions (
    session_id TEXT PRIMARY KEY NOT NULL, cwd TEXT NOT NULL, updated_at TEXT NOT NULL,
    last_info TEXT NOT NULL, counter INTEGER NOT NULL
);
CREATE TABLE reference_messages (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
    message_id TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (session_id, seq)
);
INSERT INTO reference_sessions VALUES ('old', '/work', '2026-01-01T00:00:00Z', '{}', 1);
INSERT INTO reference_messages VALUES ('old', 1, 'user', 'user-1', 'kept');
"""


async def test_a_store_from_before_the_closed_flag_is_migrated(tmp_path: Path) -> None:
    """The reference agent's tables gained a ``closed`` column (version 2 of its tables): a
    file written by the earlier version is migrated when loaded (sessions open, history kept),
    and the flag is then kept: a session closed before a restart reopens with ``title: null``."""
    path = tmp_path / "old.sqlite"
    async with await SQLiteStore.open(path) as store:

        def create(conn: sqlite3.Connection) -> None:
            for statement in _V1_TABLES.split(";"):
                conn.execute(statement)

        await store.run(create)
    for step in ("close", "reopen"):
        async with (
            await SQLiteStore.open(path) as store,
            serve(await ReferenceAgent.with_store(store)) as peer,
        ):
            init = {"protocolVersion": 2, "info": INFO}
            assert (await peer.request("initialize", init))["result"]["protocolVersion"] == 2
            params = {"sessionId": "old", "cwd": "/work", "replayFrom": {"type": "start"}}
            frames, response = await peer.call("session/resume", params)
            assert "result" in response, response
            assert "kept" in str(frames)
            if step == "close":
                await _prompt(peer, "old", "/title Before")
                assert "result" in await peer.request("session/close", {"sessionId": "old"})
            else:
                assert {"title": None} in _info_updates(frames), frames


@pytest.mark.parametrize("version", [2, 1])
async def test_a_replay_repeats_the_live_agent_message(version: int) -> None:
    """A replayed agent message is the message the client saw live: on v2 the same
    ``messageId`` (a v2 client dedupes by it) and, on both versions, the same text (the live
    chunks end each reply with a newline). The live chunks used to say ``agent-of-user-1`` and
    the replay ``agent-2``, and the replayed text lacked the trailing newlines."""
    async with serve(ReferenceAgent(), mirror_version=version) as peer:
        session_id = await _start(peer, version)
        frames, _response = await _prompt(peer, session_id, "hello\n/meta set k 1\nworld")
        live = [_update(f) for f in frames if f.get("method") == "session/update"]
        chunks = [u for u in live if u["sessionUpdate"] == "agent_message_chunk"]
        if version == 2:
            params = {"sessionId": session_id, "cwd": "/work", "replayFrom": {"type": "start"}}
            replay, _ = await peer.call("session/resume", params)
        else:
            replay, _ = await peer.call("session/load", {"sessionId": session_id, "cwd": "/work"})
    replayed = [
        u
        for u in (_update(f) for f in replay if f.get("method") == "session/update")
        if u["sessionUpdate"] in ("agent_message", "agent_message_chunk")
    ]
    texts = [
        block["text"]
        for u in replayed
        for block in (u["content"] if isinstance(u["content"], list) else [u["content"]])
    ]
    assert "".join(texts) == "".join(c["content"]["text"] for c in chunks)
    if version == 2:
        assert {u["messageId"] for u in replayed} == {c["messageId"] for c in chunks}
