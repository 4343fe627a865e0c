# ruff: noqa: E402  (the psycopg imports follow the skip without it)
"""What uses a store URL, on a real PostgreSQL server (``tests/support/postgres_fixtures.py``):
:func:`agent_meta.open_store`, the reference agents' history (:class:`HistoryStore`, the same
behaviour on SQLite and PostgreSQL), ``agent-meta agent --store`` and ``agent-meta run --store``.

(``integration/test_restart.py`` resumes ``agent-meta agent --store postgresql://...``
sessions on both runtimes from a second process with a real client.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.postgres_fixtures import skip_module_without_psycopg

skip_module_without_psycopg()  # before psycopg is imported (agent_meta.PostgresStore too)

import psycopg
import trio

import agent_meta
from agent_meta import PostgresStore, SQLiteStore, StoreError
from agent_meta.agents._common._storage import HistoryStore, SessionRecord
from tests.agent_process import stderr_of
from tests.test_run import PLAIN_AGENT, ROOT, info_updates, start, supervised

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.postgres_server import PostgresServer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes


async def test_a_path_or_sqlite_url_opens_sqlite_and_a_postgresql_url_opens_postgres(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url, file in (
        (str(tmp_path / "a.sqlite"), str(tmp_path / "a.sqlite")),
        ("sqlite:///b.sqlite", "b.sqlite"),
        (f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "c.sqlite")),
    ):
        async with agent_meta.open_store(url) as store:
            assert isinstance(store, SQLiteStore)
            assert store.location == file
        assert store.closed
    assert sorted(os.listdir(tmp_path)) == ["a.sqlite", "b.sqlite", "c.sqlite"]
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        async with agent_meta.open_store(url) as store:
            assert isinstance(store, PostgresStore)
            assert await store.read("nothing") is None
        assert store.closed


async def test_any_other_url_is_refused_without_its_password() -> None:
    for url in ("mysql://u:s3cret@h/db", "sqlite://relative.sqlite", "sqlite:///"):
        with pytest.raises(StoreError, match="not a store URL") as caught:
            async with agent_meta.open_store(url):
                pass
        assert "s3cret" not in str(caught.value)


def test_opening_a_sqlite_store_by_url_loads_no_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys, trio, agent_meta\n"
        "async def main():\n"
        f"    async with agent_meta.open_store({str(tmp_path / 's.sqlite')!r}):\n"
        "        pass\n"
        "trio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


@pytest.fixture(params=["sqlite", "postgres"])
def history_place(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return str(tmp_path / "history.sqlite")


async def test_the_history_round_trips_the_same_on_either_store(history_place: str) -> None:
    """Two agents on one store (two processes): what one saves, the other loads, in the order
    of the last save (a saved session is listed last, as SQLite's REPLACE does)."""
    async with agent_meta.open_store(history_place) as first_store:
        first = HistoryStore(first_store)
        assert await first.load() == []
        await first.save_session("a", "/a", "2026-01-01T00:00:00Z", {"title": "A"}, 0, False)
        await first.save_session("b", "/b", "2026-01-02T00:00:00Z", {}, 0, False)
        await first.add_message("a", "user", "user-1", "hello")
        await first.add_message("a", "agent", "agent-2", "héllo\nback")
        await first.save_session("a", "/a", "2026-01-03T00:00:00Z", {"title": "A2"}, 2, True)
        async with agent_meta.open_store(history_place) as second_store:
            second = HistoryStore(second_store)
            loaded = await second.load()
            assert loaded == [
                ("b", "/b", "2026-01-02T00:00:00Z", {}, 0, False, []),
                (
                    "a",
                    "/a",
                    "2026-01-03T00:00:00Z",
                    {"title": "A2"},
                    2,
                    True,
                    [("user", "user-1", "hello"), ("agent", "agent-2", "héllo\nback")],
                ),
            ]
            await second.add_message("a", "user", "user-3", "taken over")
            session = SessionRecord("a", "", "")
            assert await first.refresh(session)
            assert [m.message_id for m in session.history] == ["user-1", "agent-2", "user-3"]
            assert (session.counter, session.closed, session.cwd) == (2, True, "/a")
            assert await first.load_one("missing") is None
            assert not await first.refresh(SessionRecord("missing", "", ""))


async def test_two_writers_append_to_one_session_without_colliding(postgres_url: str) -> None:
    """A former holder still echoes prompts into a session the new holder also writes: the
    messages are numbered one after the other, none refused."""
    async with (
        agent_meta.open_store(postgres_url) as one,
        agent_meta.open_store(postgres_url) as other,
    ):
        histories = [HistoryStore(one), HistoryStore(other)]
        await histories[0].load()
        await histories[0].save_session("s", "/", "2026-01-01T00:00:00Z", {}, 0, False)

        async def append(history: HistoryStore, name: str) -> None:
            for i in range(20):
                await history.add_message("s", "user", f"{name}-{i}", "x")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, histories[0], "one")
            nursery.start_soon(append, histories[1], "other")
        stored = await histories[1].load_one("s")
    assert stored is not None
    assert len(stored[-1]) == 40


def test_agent_store_errors_name_the_database_without_its_password(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    wrong = postgres_url.replace(postgres_server.password, "wrong-password")
    for runtime in ("trio", "sdk"):
        done = subprocess.run(
            [sys.executable, "-m", "agent_meta", "agent", "--runtime", runtime, "--store", wrong],
            stdin=subprocess.PIPE,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert "password authentication failed" in done.stderr
        assert "agent_meta_test@127.0.0.1" in done.stderr
        assert "wrong-password" not in done.stderr
        assert done.stdout == ""


async def test_run_keeps_lifetimes_in_postgresql_for_the_next_process(postgres_url: str) -> None:
    """``agent-meta run --store postgresql://...``: what the first process stored, a second
    process on the same database restores on ``session/load`` (resync before the answer)."""
    options = ("--store", postgres_url)
    async with supervised(*PLAIN_AGENT, options=options) as agent:
        sid = await start(agent)
        answer = await agent.prompt(sid, 'meta a {"x": 1}')
        assert answer.get("result") == {"stopReason": "end_turn"}, answer
        assert await agent.finish() == 0
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            "SELECT meta, epoch FROM agent_meta_lifetimes WHERE session_id = %s", (sid,)
        ).fetchone()
    assert row is not None
    assert (json.loads(row[0]), row[1]) == ({"a": {"x": 1}}, 1)
    async with supervised(*PLAIN_AGENT, options=options) as agent:
        await agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        loaded = await agent.call("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        assert loaded["result"] == {}
        assert info_updates(agent)[-1] == {
            "sessionUpdate": "session_info_update",
            "_meta": {"a": {"x": 1}},
        }
        assert await agent.finish() == 0


async def test_run_refuses_a_store_url_it_cannot_use() -> None:
    async with supervised(*PLAIN_AGENT, options=("--store", "mysql://u:s3cret@h/db")) as agent:
        errors = await stderr_of(agent)
        assert await agent.process.wait() == 2
    assert "not a store URL" in errors
    assert "s3cret" not in errors
