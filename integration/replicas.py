"""Replicas of ``agent-meta agent`` on one lifetime store, driven by the official Python SDK.

A replica is one agent process on the shared store: ``ws`` is ``agent-meta agent --runtime sdk
--listen 127.0.0.1:0`` (any number of WebSocket connections), ``stdio-trio`` and ``stdio-sdk``
are ``agent-meta agent [--runtime sdk]`` on a pipe (one connection: the process's own). Every
connection is an SDK client (:class:`Client`) whose :class:`~integration.harness.Transcript`
keeps the wire order and folds it (v1, merged ``_meta``). A :class:`Fleet` starts them and kills
whatever is left at the end; each process's stderr is kept (:meth:`Replica.said`).

The store is a :class:`StoreUnderTest`: what ``--store`` is given, and the stored row of a
session (state, epoch and holder) read the way another process reads it. Used by
``integration/test_replicas.py`` and the takeover section of ``python -m bench``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import acp
import acp.ws
from acp.schema import ClientCapabilities, Implementation

from integration.harness import (
    LINE_LIMIT,
    REPO,
    QuietClient,
    Transcript,
    agent_command,
    agent_env,
    info_updates,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

TOKEN = "replica-token-0123456789abcdef"
"""The bearer token the ``ws`` replicas are started with (a test value, not a secret)."""
TRANSPORTS = ("ws", "stdio-trio", "stdio-sdk")
"""The replica kinds: what :meth:`Fleet.start` takes."""
HANG = 30.0
"""Bound on any single wait: a hang fails the step that hung instead of the whole run."""
CWD = str(REPO)


# --- the store ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """One stored lifetime as another process reads it."""

    title: str | None
    meta: dict[str, Any] | None
    epoch: int
    holder: str

    @classmethod
    def decode(cls, title: str | None, meta: str | None, epoch: int, holder: str) -> Row:
        """A row from the stored columns (``title`` and ``meta`` are JSON texts)."""
        return cls(
            title=None if title is None else json.loads(title),
            meta=None if meta is None else json.loads(meta),
            epoch=epoch,
            holder=holder,
        )

    @property
    def state(self) -> dict[str, Any]:
        """``title`` and ``meta`` as a client folds them (no metadata is ``None``)."""
        return {"title": self.title, "meta": self.meta or None}


class StoreUnderTest(Protocol):
    """A fresh lifetime store the replicas share (one per test).

    A store kind gives the ``--store`` argument and reads what it holds, as another process
    would: a SQLite file (:class:`SQLiteFile`) or a PostgreSQL schema (:class:`PostgresDatabase`).
    """

    @property
    def argument(self) -> str:
        """What ``agent-meta agent --store`` is given."""
        ...

    def row(self, session_id: str) -> Row | None:
        """The stored lifetime of ``session_id``, or ``None``."""
        ...

    def claim_would_wait(self, session_id: str) -> bool:
        """Whether a claim of ``session_id`` now would have to wait for another connection's
        transaction (a writer frozen inside a store write holds what the claim needs)."""
        ...


class SQLiteFile:
    """A :class:`StoreUnderTest` in one SQLite file (``--store PATH``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def argument(self) -> str:
        return str(self.path)

    @contextlib.contextmanager
    def _connection(self, timeout: float = 5.0) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    def row(self, session_id: str) -> Row | None:
        with self._connection() as conn:
            found = conn.execute(
                "SELECT title, meta, epoch, holder FROM agent_meta_lifetimes WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        return None if found is None else Row.decode(*found)

    def claim_would_wait(self, session_id: str) -> bool:
        # One write lock for the whole file: a claim of any session needs it.
        with self._connection(timeout=0) as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            conn.execute("ROLLBACK")
        return False

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the file's write lock, as a process frozen inside a store write does."""
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                conn.execute("ROLLBACK")


class PostgresDatabase:
    """A :class:`StoreUnderTest` in one PostgreSQL schema (``--store postgresql://...``): every
    replica connects to it, as replicas on several machines would."""

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def argument(self) -> str:
        return self.url

    def row(self, session_id: str) -> Row | None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            found = conn.execute(
                "SELECT title, meta, epoch, holder FROM agent_meta_lifetimes WHERE session_id = %s",
                (session_id,),
            ).fetchone()
        return None if found is None else Row.decode(*found)

    def claim_would_wait(self, session_id: str) -> bool:
        # A claim is an UPDATE of the session's row: it waits only for that row's lock.
        import psycopg
        from psycopg import errors

        with psycopg.connect(self.url) as conn:
            try:
                conn.execute(
                    "SELECT 1 FROM agent_meta_lifetimes WHERE session_id = %s FOR UPDATE NOWAIT",
                    (session_id,),
                )
            except errors.LockNotAvailable:
                return True
            finally:
                conn.rollback()
        return False


# --- clients --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Answer:
    """A prompt's outcome as its client saw it: the agent's reply lines for the session before
    the response, and the error code if it was refused."""

    replies: list[str]
    error: int | None = None

    def says(self, text: str) -> bool:
        return any(text in line for line in self.replies)


class Client:
    """One SDK client connection (v1) to a replica, with its transcript."""

    def __init__(self, name: str, conn: Any, wire: Transcript) -> None:
        self.name = name
        self.conn = conn
        self.wire = wire

    def __repr__(self) -> str:
        return f"<client {self.name}>"

    async def bounded(self, call: Any, what: str) -> Any:
        """Await ``call``; a hang fails with what hung, on which client.

        Once the connection's receive loop has ended (the agent closed its output: it died),
        a call still running can never be answered: it raises ``ConnectionError``. The SDK
        (0.12) fails such a call itself, except one whose request was queued for sending when
        its send loop failed on the broken pipe: that one would wait forever."""
        task = asyncio.ensure_future(call)
        receiving = self.conn._conn._recv_task  # the SDK's receive loop (no public handle)
        waits = {task} if receiving is None else {task, receiving}
        done, _ = await asyncio.wait(waits, timeout=HANG, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if not done:
            raise AssertionError(f"{self.name}: {what} hung for {HANG} s")
        raise ConnectionError(f"{self.name}: the agent closed the connection during {what}")

    async def initialize(self) -> None:
        await self.bounded(
            self.conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="agent-meta-replicas", version="0"),
            ),
            "initialize",
        )

    async def new_session(self) -> str:
        created = await self.bounded(self.conn.new_session(cwd=CWD, mcp_servers=[]), "new")
        return cast("str", created.session_id)

    async def prompt(self, session_id: str, line: str) -> Answer:
        """Send one prompt and wait for its answer; an error answer is returned, not raised
        (a dead connection raises ``ConnectionError``)."""
        start = self.wire.mark()
        request = self.conn.prompt(session_id=session_id, prompt=[acp.text_block(line)])
        error = None
        try:
            await self.bounded(request, f"prompt {line!r}")
        except acp.RequestError as exc:
            error = exc.code
        replies = [
            m["params"]["update"]["content"]["text"]
            for m in session_messages(
                self._until_answered(start, "session/prompt", session_id), session_id
            )
            if m["params"].get("update", {}).get("sessionUpdate") == "agent_message_chunk"
        ]
        return Answer(replies, error)

    def _until_answered(self, start: int, method: str, session_id: str) -> list[dict[str, Any]]:
        """The messages received from mark ``start`` up to the answer to the first ``method``
        request for ``session_id`` sent since (other requests may be in flight meanwhile).
        ``ConnectionError`` if the agent never answered it (the SDK fails a request pending
        when its connection ends)."""
        events = self.wire.events[start:]
        request_ids = [
            e.message["id"]
            for e in events
            if not e.incoming
            and e.message.get("method") == method
            and e.message["params"].get("sessionId") == session_id
        ]
        received = [e.message for e in events if e.incoming]
        for end, message in enumerate(received):
            if request_ids and "method" not in message and message.get("id") == request_ids[0]:
                return received[:end]
        raise ConnectionError(f"{self.name}: {method} on {session_id} was never answered")

    async def resume(self, session_id: str, *, replay: bool) -> list[dict[str, Any]]:
        """``session/load`` (``replay``) or ``session/resume``; the messages received from the
        request up to its response, the response excluded. A refusal raises
        ``acp.RequestError``."""
        start = self.wire.mark()
        if replay:
            call = self.conn.load_session(cwd=CWD, session_id=session_id, mcp_servers=[])
            method = "session/load"
        else:
            call = self.conn.resume_session(session_id=session_id, cwd=CWD)
            method = "session/resume"
        await self.bounded(call, method)
        return self._until_answered(start, method, session_id)

    def adopt(self, other: Client, session_id: str) -> None:
        """Start from what ``other`` holds for ``session_id``: the same client, reconnected
        (its folded state carried over; nothing of the session arrived here yet)."""
        assert session_id not in self.wire.mirror.session_ids, "adopt before any frame of it"
        for message in other.wire.mirror.frames_for(session_id):
            self.wire.mirror.feed(message)

    def state(self, session_id: str) -> dict[str, Any]:
        """What this client holds for the session: ``title`` and ``meta`` (``None``: none)."""
        title = self.wire.mirror.info(session_id).title
        return {
            "title": title if isinstance(title, str) else None,
            "meta": self.wire.mirror.meta(session_id),
        }

    def value(self, session_id: str, key: str) -> Any:
        """The value this client holds for ``_meta[key]`` (``None``: none)."""
        return (self.wire.mirror.meta(session_id) or {}).get(key)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()


def answered_prompts(wire: Transcript, session_id: str) -> list[str]:
    """The prompt lines of ``session_id`` that were answered with a result, in the order sent."""
    sent = {
        e.message["id"]: e.message["params"]["prompt"][0]["text"]
        for e in wire.events
        if not e.incoming
        and e.message.get("method") == "session/prompt"
        and e.message["params"]["sessionId"] == session_id
    }
    answered = {
        m["id"] for m in wire.incoming() if "method" not in m and "result" in m and m["id"] in sent
    }
    return [line for request_id, line in sent.items() if request_id in answered]


def session_messages(messages: list[dict[str, Any]], session_id: str) -> list[dict[str, Any]]:
    """The notifications and requests of ``session_id`` among ``messages``."""
    return [
        m
        for m in messages
        if "method" in m
        and isinstance(m.get("params"), dict)
        and m["params"].get("sessionId") == session_id
    ]


def resync_of(segment: list[dict[str, Any]], session_id: str) -> dict[str, Any]:
    """The resync among the messages before a load's or resume's response: its last
    ``session_info_update``, the complete known state. On v1 in merged mode (these clients)
    that is one frame carrying the whole object; where a ``_meta: null`` comes first (v2's
    form), a snapshot must follow it. Fails if there is none."""
    infos = info_updates(session_messages(segment, session_id))
    assert infos, "no resync before the response"
    resets = [i for i, u in enumerate(infos) if "_meta" in u and u["_meta"] is None]
    assert not resets or resets[-1] < len(infos) - 1, f"no snapshot after _meta: null: {infos}"
    return infos[-1]


# --- replicas -------------------------------------------------------------------------------


def threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (group stop of SIGSTOP complete)."""
    tasks = Path(f"/proc/{pid}/task")
    states = []
    for task in tasks.iterdir():
        with contextlib.suppress(OSError):
            stat = (task / "stat").read_text()
            states.append(stat[stat.rindex(")") + 2])
    return bool(states) and all(state in "Tt" for state in states)


class Replica:
    """One agent process on the store; its stderr lines are kept."""

    def __init__(self, name: str, kind: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.kind = kind
        self.process = process
        self.stderr: list[str] = []
        self._heard = asyncio.Event()
        self._drains: list[asyncio.Task[None]] = []

    def drain(self, stream: asyncio.StreamReader | None, keep: bool) -> None:
        if stream is not None:
            self._drains.append(asyncio.create_task(self._read(stream, keep)))

    async def _read(self, stream: asyncio.StreamReader, keep: bool) -> None:
        while line := await stream.readline():
            if keep:
                self.stderr.append(line.decode(errors="replace"))
                self._heard.set()

    async def said(self, text: str) -> None:
        """Wait until a line of the process's stderr contains ``text``."""

        async def heard() -> None:
            while not any(text in line for line in self.stderr):
                self._heard.clear()
                await self._heard.wait()

        try:
            await asyncio.wait_for(heard(), HANG)
        except TimeoutError:
            raise AssertionError(f"{self.name} never said {text!r}: {self.stderr}") from None

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def kill(self) -> None:
        """``kill -9``, and wait for the process to be gone."""
        if self.alive:
            self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), HANG)

    async def freeze(self) -> None:
        """SIGSTOP, then wait until every thread of the process is stopped."""
        self.process.send_signal(signal.SIGSTOP)
        for _ in range(int(HANG * 1000)):
            if threads_stopped(self.process.pid):
                return
            await asyncio.sleep(0.001)  # polls the state that ends the wait; bounded
        raise AssertionError(f"{self.name} did not stop")

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    async def end(self) -> None:
        if self.alive:
            self.process.kill()  # SIGKILL ends a stopped process too
        await self.process.wait()
        for drain in self._drains:
            drain.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)


class WsReplica(Replica):
    """``agent-meta agent --runtime sdk --listen 127.0.0.1:0``: any number of connections."""

    url = ""

    async def connect(self, name: str) -> Client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        transport = await asyncio.wait_for(
            acp.ws.create_websocket_stream(self.url, headers=headers), HANG
        )
        wire = Transcript(protocol_version=1)
        conn = acp.connect_to_agent(
            cast("acp.Client", QuietClient()),
            transport,
            observers=[wire.observe],
            use_unstable_protocol=True,
        )
        client = Client(name, conn, wire)
        await client.initialize()
        return client


class StdioReplica(Replica):
    """``agent-meta agent [--runtime sdk]`` on a pipe: its one connection is :attr:`client`."""

    client: Client


class Fleet:
    """The replicas and clients of one scenario, all on ``store``; ended on exit."""

    def __init__(self, store: StoreUnderTest) -> None:
        self.store = store
        self.replicas: list[Replica] = []
        self.clients: list[Client] = []

    async def pair(
        self, kind: str, clients: tuple[str, str] = ("client@A", "client@B")
    ) -> tuple[Replica, Replica, Client, Client]:
        """Replicas A and B of ``kind``, started at once, and a client connected to each."""
        a, b = await asyncio.gather(self.start(kind, "A"), self.start(kind, "B"))
        return a, b, await self.connect(a, clients[0]), await self.connect(b, clients[1])

    async def start(self, kind: str, name: str) -> Replica:
        """Start a replica of ``kind`` (one of :data:`TRANSPORTS`)."""
        if kind == "ws":
            replica: Replica = await self._start_ws(name)
        elif kind in ("stdio-trio", "stdio-sdk"):
            replica = await self._start_stdio(name, kind.removeprefix("stdio-"))
        else:
            raise ValueError(f"unknown replica kind {kind!r}")
        return replica

    async def connect(self, replica: Replica, name: str) -> Client:
        """A client connection to ``replica``: a new one (``ws``), or the process's own."""
        if isinstance(replica, WsReplica):
            client = await replica.connect(name)
            self.clients.append(client)
            return client
        assert isinstance(replica, StdioReplica)
        return replica.client

    async def _spawn(self, name: str, kind: str, command: list[str], **env: str) -> Any:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=REPO,
            env={**os.environ, **agent_env(), **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            limit=LINE_LIMIT,
        )
        replica = (WsReplica if kind == "ws" else StdioReplica)(name, kind, process)
        self.replicas.append(replica)
        replica.drain(process.stderr, keep=True)
        return replica

    async def _start_ws(self, name: str) -> WsReplica:
        listen = ("--listen", "127.0.0.1:0", "--store", self.store.argument)
        command = agent_command(*listen, runtime="sdk")
        replica = cast("WsReplica", await self._spawn(name, "ws", command, AGENT_META_TOKEN=TOKEN))
        stdout = replica.process.stdout
        assert stdout is not None
        line = (await asyncio.wait_for(stdout.readline(), HANG)).decode()
        found = re.fullmatch(r"listening (ws://127\.0\.0\.1:\d+/acp)\n", line)
        assert found, f"{name}: unexpected first line {line!r}; stderr: {replica.stderr}"
        replica.url = found.group(1)
        replica.drain(stdout, keep=False)
        return replica

    async def _start_stdio(self, name: str, runtime: str) -> StdioReplica:
        command = agent_command("--store", self.store.argument, runtime=runtime)
        replica = cast("StdioReplica", await self._spawn(name, f"stdio-{runtime}", command))
        wire = Transcript(protocol_version=1)
        conn = acp.connect_to_agent(
            cast("acp.Client", QuietClient()),
            replica.process.stdin,
            replica.process.stdout,
            observers=[wire.observe],
        )
        replica.client = Client(name, conn, wire)
        self.clients.append(replica.client)
        try:
            await replica.client.initialize()
        except ConnectionError as exc:  # the process ended: say what it said
            raise AssertionError(f"{name} ended before initialize: {replica.stderr}") from exc
        return replica

    async def end(self) -> None:
        for client in self.clients:
            await client.close()
        for replica in self.replicas:
            await replica.end()

    def stderr(self) -> str:
        """Every replica's stderr, for a failure's report."""
        return "\n".join(f"--- {r.name} ---\n{''.join(r.stderr)}" for r in self.replicas)


@contextlib.asynccontextmanager
async def fleet(store: StoreUnderTest) -> AsyncIterator[Fleet]:
    """A :class:`Fleet` on ``store``: every process it started is killed at the end; a failure
    inside carries every replica's stderr."""
    running = Fleet(store)
    try:
        yield running
    except AssertionError as exc:
        exc.add_note(running.stderr())
        raise
    finally:
        await running.end()
