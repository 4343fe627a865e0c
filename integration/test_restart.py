"""Restart tests: kill ``agent-meta agent --store FILE`` (SIGKILL) and resume from a new process;
two agent processes on one store (a SQLite file, or a PostgreSQL database) take sessions over.

The official Python SDK client (v1) drives real agent subprocesses, on both runtimes (trio, and
``--runtime sdk``, which keeps the same ``--store`` file). After each kill the test reads the
SQLite file as the new process will, then a fresh agent on the same file is resumed
(``session/resume`` without replay, or ``session/load`` with replay). The checks:

- what the client held before the kill is contained in what was stored (persist before write:
  nothing the client saw is missing), and
- after the resume the client's folded state is exactly the stored state (``_meta: null`` then
  the snapshot, before the response).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
from typing import TYPE_CHECKING, Any, cast

import acp
import pytest
from acp.schema import ClientCapabilities, Implementation

from integration.harness import (
    LINE_LIMIT,
    REPO,
    QuietClient,
    Transcript,
    agent_command,
    agent_env,
    info_updates,
    run_async,
    session_updates,
    text,
)
from tests.support.crash_after_persist import crashing_command

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from agent_meta.testing import ClientMirror

pytestmark = pytest.mark.usefixtures("agent_runtime")

CWD = str(REPO)


@contextlib.asynccontextmanager
async def agent(
    store: Path | str, *, crash_after: int | None = None
) -> AsyncIterator[tuple[Any, Transcript, asyncio.subprocess.Process]]:
    """The agent on ``store``; with ``crash_after``, one that ends itself (status 137) right
    after that many store writes (:mod:`tests.support.crash_after_persist`)."""
    record = Transcript()
    env = agent_env()
    if crash_after is None:
        command = agent_command("--store", str(store))
    else:
        command = agent_command("--store", str(store), launcher=crashing_command(crash_after))
    async with acp.spawn_agent_process(
        cast("acp.Client", QuietClient()),
        command[0],
        *command[1:],
        env=env,
        cwd=CWD,
        observers=[record.observe],
        transport_kwargs={"stderr": None, "limit": LINE_LIMIT},
    ) as (conn, process):
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="agent-meta-restart", version="0"),
        )
        try:
            yield conn, record, process
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


def stored_state(store: Path | str, session_id: str) -> dict[str, Any]:
    """The session's stored lifetime, read from the file (or database) the way a new process
    reads it."""
    if isinstance(store, str):  # a PostgreSQL URL
        import psycopg

        with psycopg.connect(store) as pg:
            row = pg.execute(
                "SELECT title, meta FROM agent_meta_lifetimes WHERE session_id = %s",
                (session_id,),
            ).fetchone()
    else:
        conn = sqlite3.connect(store)
        try:
            row = conn.execute(
                "SELECT title, meta FROM agent_meta_lifetimes WHERE session_id = ?", (session_id,)
            ).fetchone()
        finally:
            conn.close()
    if row is None:
        return {"title": None, "meta": None}
    title, meta = row
    return {
        "title": None if title is None else json.loads(title),
        "meta": None if meta is None else json.loads(meta),
    }


def client_state(mirror: ClientMirror, session_id: str) -> dict[str, Any]:
    if session_id not in mirror.session_ids:
        return {"title": None, "meta": None}
    title = mirror.info(session_id).title
    return {"title": title if isinstance(title, str) else None, "meta": mirror.meta(session_id)}


async def kill(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGKILL)
    await process.wait()


async def prompt_quietly(conn: Any, session_id: str, line: str) -> None:
    """A prompt whose agent may die under it: the error (or hang) is expected."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=text(line)), 5)


def resume(store: Path | str, session_id: str, *, replay: bool) -> tuple[Transcript, list[Any]]:
    """A new agent process on ``store``: resume (or load, with replay) and return the record."""

    async def scenario() -> tuple[Transcript, list[Any]]:
        async with agent(store) as (conn, wire, _process):
            start = wire.mark()
            if replay:
                await conn.load_session(cwd=CWD, session_id=session_id, mcp_servers=[])
                method = "session/load"
            else:
                await conn.resume_session(session_id=session_id, cwd=CWD)
                method = "session/resume"
            response = wire.response_position(method, start)
            return wire, wire.incoming(start)[:response]

    return cast("tuple[Transcript, list[Any]]", run_async(scenario()))


def check_resumed(
    store: Path | str, session_id: str, before: dict[str, Any], *, replay: bool
) -> None:
    stored = stored_state(store, session_id)
    # Nothing the client saw is missing from the store (every key it holds is stored as seen
    # or newer: these scenarios only add keys or raise counters).
    for key, value in (before["meta"] or {}).items():
        assert key in (stored["meta"] or {}), f"{key!r} was seen by the client but not stored"
        held = stored["meta"][key]
        assert held == value or (isinstance(value, int) and held >= value), (key, value, held)
    if before["title"] is not None:
        assert stored["title"] == before["title"]
    wire, segment = resume(store, session_id, replay=replay)
    infos = info_updates(segment)
    assert infos, "no resync before the response"
    # v1 merged mode: the resync is the complete stored object.
    assert infos[-1]["_meta"] == (stored["meta"] or {})
    assert client_state(wire.mirror, session_id)["meta"] == stored["meta"]
    if stored["title"] is not None:
        assert client_state(wire.mirror, session_id)["title"] == stored["title"]
    if replay:
        assert any(u.get("sessionUpdate") == "user_message_chunk" for u in session_updates(segment))


async def new_session(conn: Any) -> str:
    return cast("str", (await conn.new_session(cwd=CWD, mcp_servers=[])).session_id)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A store two agent processes share: a SQLite file, or a PostgreSQL database (a real
    server, ``tests/support/postgres_fixtures.py``), as replicas share one."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return tmp_path / "agent.sqlite"


def test_kill_after_publish_restores_state_and_failure(tmp_path: Path) -> None:
    store = tmp_path / "agent.sqlite"

    async def first() -> tuple[str, dict[str, Any]]:
        async with agent(store) as (conn, wire, process):
            session = await new_session(conn)
            await conn.prompt(
                session_id=session,
                prompt=text('/title Kept\n/meta set a {"x":1}\n/meta set b 2\n/fail inc 3 boom'),
            )
            await kill(process)
            return session, client_state(wire.mirror, session)

    session, before = run_async(first())
    assert before["meta"]["agent-meta"]["failure"]["id"] == "inc"
    assert stored_state(store, session) == before
    check_resumed(store, session, before, replay=True)

    async def resolve() -> str:
        async with agent(store) as (conn, wire, _process):
            await conn.resume_session(session_id=session, cwd=CWD)
            await conn.prompt(session_id=session, prompt=text("/resolve inc 2\n/resolve inc 3"))
            replies = [
                u["content"]["text"]
                for u in session_updates(wire.incoming())
                if u.get("sessionUpdate") == "agent_message_chunk"
            ]
            assert client_state(wire.mirror, session)["meta"] == {"a": {"x": 1}, "b": 2}
            return "".join(replies)

    replies = run_async(resolve())
    assert "not resolved: inc rev 2" in replies
    assert "ok: failure inc rev 3 resolved" in replies
    assert stored_state(store, session)["meta"] == {"a": {"x": 1}, "b": 2}


@pytest.mark.parametrize("seen", [1, 5, 20])
def test_kill_during_a_burst(shared_store: Path | str, seen: int) -> None:
    store = shared_store

    async def first() -> tuple[str, dict[str, Any]]:
        async with agent(store) as (conn, wire, process):
            session = await new_session(conn)
            await conn.prompt(session_id=session, prompt=text("/meta set base 1\n/burst 5000 n"))

            def burst_seen() -> bool:
                meta = client_state(wire.mirror, session)["meta"] or {}
                return isinstance(meta.get("n"), int) and meta["n"] >= seen

            await wire.until(burst_seen)
            await kill(process)
            return session, client_state(wire.mirror, session)

    session, before = run_async(first())
    check_resumed(store, session, before, replay=False)


@pytest.mark.parametrize("after", [0, 3, 8])
def test_kill_during_a_resync(tmp_path: Path, after: int) -> None:
    store = tmp_path / "agent.sqlite"

    async def first() -> tuple[str, dict[str, Any]]:
        async with agent(store) as (conn, wire, process):
            session = await new_session(conn)
            for i in range(5):
                await conn.prompt(session_id=session, prompt=text(f"/meta set k{i} {i}\nhello"))
            await conn.prompt(session_id=session, prompt=text("/burst 3000 n"))
            start = len(wire.incoming())
            loading = asyncio.ensure_future(
                conn.load_session(cwd=CWD, session_id=session, mcp_servers=[])
            )
            await wire.until(lambda: len(wire.incoming()) >= start + after)
            await kill(process)
            loading.cancel()
            with contextlib.suppress(BaseException):
                await loading
            return session, client_state(wire.mirror, session)

    session, before = run_async(first())
    check_resumed(store, session, before, replay=True)


@pytest.mark.parametrize("writes", [1, 2, 3, 5])
def test_crash_between_persist_and_write(tmp_path: Path, writes: int) -> None:
    """The crashing store ends the agent right after its Nth store write, before the frame."""
    store = tmp_path / "agent.sqlite"

    async def first() -> tuple[str, dict[str, Any]]:
        async with agent(store) as (conn, wire, _process):
            session = await new_session(conn)
        async with agent(store, crash_after=writes) as (conn, wire, process):
            await conn.resume_session(session_id=session, cwd=CWD)
            for i in range(1, 7):
                await prompt_quietly(conn, session, f"/meta set k{i} {i}")
                if process.returncode is not None:
                    break
            await process.wait()
            assert process.returncode == 137
            return session, client_state(wire.mirror, session)

    session, before = run_async(first())
    stored = stored_state(store, session)
    # The store is exactly one publication ahead of the client: the frame never went out.
    assert len(stored["meta"]) == writes
    assert len(before["meta"] or {}) == writes - 1
    check_resumed(store, session, before, replay=False)


def test_closed_session_is_gone_after_restart(tmp_path: Path) -> None:
    store = tmp_path / "agent.sqlite"

    async def first() -> str:
        async with agent(store) as (conn, _wire, process):
            session = await new_session(conn)
            await conn.prompt(session_id=session, prompt=text("/meta set a 1"))
            await conn.close_session(session_id=session)
            await kill(process)
            return session

    session = run_async(first())
    assert stored_state(store, session) == {"title": None, "meta": None}
    _wire, segment = resume(store, session, replay=False)
    assert info_updates(segment)[-1]["_meta"] == {}


def test_a_second_agent_on_the_same_file_takes_a_session_over(shared_store: Path | str) -> None:
    """Two agent processes on one store (two editor windows, or two replicas on one
    database): the second resumes a session of the first, restores what the first stored and
    its history and resyncs its client; from then on the first one's publications for that
    session reach neither the store nor its own client."""
    store = shared_store

    async def scenario() -> tuple[str, dict[str, Any], dict[str, Any]]:
        async with (
            agent(store) as (first, first_wire, _process),
            agent(store) as (second, second_wire, _other),
        ):
            # The session is created after the second process started: it reads it then.
            session = await new_session(first)
            await first.prompt(session_id=session, prompt=text("/title Shared\n/meta set a 1"))
            start = second_wire.mark()
            await second.load_session(cwd=CWD, session_id=session, mcp_servers=[])
            segment = second_wire.incoming(start)
            replayed = [
                u
                for u in session_updates(segment)
                if u.get("sessionUpdate") == "user_message_chunk"
            ]
            assert replayed, "the history the first process stored was not replayed"
            assert info_updates(segment)[-1]["_meta"] == {"a": 1}  # the resync
            await second.prompt(session_id=session, prompt=text("/meta set b 2"))
            # The first process does not hold the session any more: its prompt is refused
            # before anything is stored (RESOURCE_NOT_FOUND: resume it to continue there).
            with pytest.raises(acp.RequestError) as refused:
                await first.prompt(session_id=session, prompt=text("/meta set c 3"))
            assert refused.value.code == -32002
            return (
                session,
                client_state(first_wire.mirror, session),
                client_state(second_wire.mirror, session),
            )

    session, first_view, second_view = run_async(scenario())
    assert first_view["meta"] == {"a": 1}  # its client heard nothing of c
    assert second_view == {"title": "Shared", "meta": {"a": 1, "b": 2}}
    assert stored_state(store, session) == {"title": "Shared", "meta": {"a": 1, "b": 2}}
