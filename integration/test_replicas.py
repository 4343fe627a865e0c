"""Replicas on one lifetime store: failover, a frozen holder, racing resumes, a soak.

Real ``agent-meta agent`` processes (``integration/replicas.py``) on one store, driven by the
official Python SDK client (v1, merged ``_meta``) over WebSocket (``--runtime sdk --listen``)
and over stdio (both runtimes). Each scenario runs for every transport and every store kind
(the ``store`` fixture). The checks are those of ``docs/durability.md``:

- **never lost**: every publication whose prompt was answered is in the state the next holder
  restores, and that holder's client is resynced before its response (on v1 in merged mode,
  one frame with the whole stored object), so what it folds equals the store;
- **fenced**: once another connection has claimed a session, nothing its former holder
  publishes reaches the store or any client, its own included; the store's epoch moved on and
  its holder is the claimer's, never two at once.

Nothing here sleeps to settle a race: each step waits for the frame, the answer or the process
state that ends it, under a generous bound (``HANG``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import os
import random
from typing import TYPE_CHECKING, Any

import acp
import pytest
import websockets

from integration.harness import REPO, info_updates, session_updates
from integration.replicas import (
    HANG,
    TRANSPORTS,
    Answer,
    Client,
    Fleet,
    Replica,
    SQLiteFile,
    StoreUnderTest,
    answered_prompts,
    fleet,
    resync_of,
    session_messages,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's unstable routes

WRITERS = 3
"""Prompt loops publishing at once in a failover phase."""
ANSWERED = 12
"""Prompts answered before the holder is killed."""
BURST = 100_000
"""A ``/burst`` long enough to outlast any scenario: it is still publishing when it matters."""
TAKEN_OVER = "was taken over by another holder"
"""What an owner logs when a store write finds its session claimed elsewhere."""


def run(scenario: Coroutine[Any, Any, Any], bound: float = 120.0) -> Any:
    """Run an asyncio scenario from a plain test, bounded so that nothing hangs the suite."""

    async def bounded() -> Any:
        return await asyncio.wait_for(scenario, bound)

    return asyncio.run(bounded())


def counter(client: Client, session_id: str, key: str) -> int:
    value = client.value(session_id, key)
    return value if isinstance(value, int) else 0


async def grown(client: Client, session_id: str, key: str, *, by: int) -> None:
    """Wait until the counter ``key`` that ``client`` holds has gone up by ``by``."""
    target = counter(client, session_id, key) + by
    await client.wire.until(lambda: counter(client, session_id, key) >= target, HANG)


# --- 1. failover after kill -9 --------------------------------------------------------------


async def publish_then_kill(client: Client, replica: Replica, sid: str, tag: str) -> list[str]:
    """A title, then racing publications on ``sid`` until ``replica`` is killed (``kill -9``):
    ``WRITERS`` prompt loops, each raising its own key ``{tag}w{N}`` one prompt at a time, and
    a burst of ``{tag}n``. The kill comes once ``ANSWERED`` prompts are answered and the burst
    is publishing, so prompts are in flight. Returns the lines answered (with a result)."""
    await client.prompt(sid, f"/title Failover {tag}")

    async def writer(key: str) -> None:
        with contextlib.suppress(ConnectionError):  # the agent died under the prompt
            for value in itertools.count(1):
                await client.prompt(sid, f"/meta set {key} {value}")

    writers = [asyncio.create_task(writer(f"{tag}w{n}")) for n in range(WRITERS)]
    await client.prompt(sid, f"/burst {BURST} {tag}n")

    def underway() -> bool:
        answered = len(answered_prompts(client.wire, sid))
        return answered >= ANSWERED and counter(client, sid, f"{tag}n") >= 5

    await client.wire.until(underway, HANG)
    await replica.kill()
    await asyncio.wait_for(asyncio.gather(*writers), HANG)
    return answered_prompts(client.wire, sid)


async def check_takeover(
    fleet: Fleet, client: Client, sid: str, *, answered: list[str], seen: Client, replay: bool
) -> None:
    """``client`` (the one ``seen`` was, reconnected) resumes ``sid`` after its holder died: the
    stored state holds every answered publication and all ``seen`` saw, the resync carries it
    before the response, and the client ends up holding exactly the stored state."""
    before = fleet.store.row(sid)
    assert before is not None
    client.adopt(seen, sid)  # the same user's client, reconnected: it holds what it saw
    segment = await client.resume(sid, replay=replay)
    row = fleet.store.row(sid)
    assert row is not None
    assert (row.epoch, row.holder != before.holder) == (before.epoch + 1, True)
    stored = row.meta or {}
    for line in answered:  # each writer's key only goes up: the store holds its last or more
        match line.split(" "):
            case ["/meta", "set", key, value]:
                held = stored.get(key, 0)
                assert held >= int(value), f"answered {line!r} was lost: {key}={held}"
    titles = [line.removeprefix("/title ") for line in answered if line.startswith("/title ")]
    if titles:
        assert row.title == titles[-1]
    for key, value in (seen.state(sid)["meta"] or {}).items():
        # Counters may be ahead in the store (stored, their frame never written).
        held = stored.get(key, 0)
        assert held >= value, f"{key}={value} was seen, not stored: {stored}"
    snapshot = resync_of(segment, sid)
    assert snapshot["_meta"] == stored  # v1, merged: the whole stored object
    assert snapshot.get("title") == row.title
    assert client.state(sid) == row.state
    if replay:
        replayed = [
            u["content"]["text"]
            for u in session_updates(session_messages(segment, sid), "user_message_chunk")
        ]
        missing = [line for line in answered if line not in replayed]
        assert not missing, f"answered prompts not replayed: {missing}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_failover_after_kill_9_loses_no_answered_publication(
    store: StoreUnderTest, transport: str
) -> None:
    """A session publishes on A (racing prompts and a burst); ``kill -9`` A; B takes it over
    with ``session/load`` (replay). Then the same on B, and a restarted A takes it over with
    ``session/resume``."""

    async def scenario() -> None:
        async with fleet(store) as running:
            a, b = await asyncio.gather(
                running.start(transport, "A"), running.start(transport, "B")
            )
            on_a = await running.connect(a, "client@A")
            sid = await on_a.new_session()
            answered = await publish_then_kill(on_a, a, sid, "a")
            on_b = await running.connect(b, "client@B")
            await check_takeover(running, on_b, sid, answered=answered, seen=on_a, replay=True)
            answered = await publish_then_kill(on_b, b, sid, "b")
            again = await running.start(transport, "A again")
            on_again = await running.connect(again, "client@A-again")
            await check_takeover(running, on_again, sid, answered=answered, seen=on_b, replay=False)

    run(scenario())


# --- 2. a frozen (partitioned) holder -------------------------------------------------------


async def freeze_holder(
    replica: Replica, client: Client, sid: str, store: StoreUnderTest, *, in_a_write: bool
) -> None:
    """SIGSTOP ``replica`` while its burst on ``sid`` runs, at a moment when it is (``in_a_write``)
    or is not inside a store write that a claim would wait for; thawed and stopped again, a
    few frames later each time, until it is."""
    for _ in range(200):
        await grown(client, sid, "n", by=2)
        await replica.freeze()
        if store.claim_would_wait(sid) == in_a_write:
            return
        replica.thaw()
    raise AssertionError(f"never froze {replica.name} {'in' if in_a_write else 'out of'} a write")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_frozen_holder_is_fenced_when_it_wakes(store: StoreUnderTest, transport: str) -> None:
    """A holds a session and bursts publications; SIGSTOP A (outside a store write); B takes
    the session over; SIGCONT A, whose burst goes on and whose client publishes again. Nothing
    A publishes after the claim reaches the store, B's client or A's own client."""

    async def scenario() -> None:
        async with fleet(store) as running:
            a, _b, on_a, on_b = await running.pair(transport)
            sid = await on_a.new_session()
            await on_a.prompt(sid, "/meta set base 1")
            await on_a.prompt(sid, f"/burst {BURST} n")
            await freeze_holder(a, on_a, sid, store, in_a_write=False)
            before = store.row(sid)
            segment = await on_b.resume(sid, replay=False)
            took_over = on_a.wire.mark()
            claimed = store.row(sid)
            assert before is not None
            assert claimed is not None
            assert claimed.epoch == before.epoch + 1
            assert claimed.holder != before.holder
            snapshot = resync_of(segment, sid)["_meta"]
            assert snapshot == claimed.meta  # B restored exactly what was stored at the claim
            assert counter(on_a, sid, "n") <= snapshot["n"]  # A's client saw only stored state

            a.thaw()  # A wakes: its burst publishes on, and its client publishes too
            late = await on_a.prompt(sid, "/meta set late 1")
            await a.said(TAKEN_OVER)  # A found out at its next store write
            assert late.error is not None or not late.says("ok:"), late
            learned = on_a.wire.mark()
            after = await on_a.prompt(sid, "/meta set later 2")
            assert after.error is not None or not after.says("ok:"), after

            # Whatever reached A's client after the claim was stored before it (a frame A had
            # begun to write when it froze); once A knew, nothing of the session at all.
            for update in info_updates(session_messages(on_a.wire.incoming(took_over), sid)):
                assert update["_meta"]["n"] <= snapshot["n"]
                assert "late" not in update["_meta"]
            assert session_messages(on_a.wire.incoming(learned), sid) == []

            ok = await on_b.prompt(sid, "/meta set b 2")
            assert ok.says("ok: _meta.b set"), ok
            final = store.row(sid)
            assert final is not None
            assert final.meta == {**snapshot, "b": 2}  # none of A's later publications
            assert (final.epoch, final.holder) == (claimed.epoch, claimed.holder)
            assert on_b.state(sid) == final.state

    run(scenario())


def test_a_holder_frozen_inside_a_sqlite_write_holds_every_takeover_back(
    store: StoreUnderTest,
) -> None:
    """SQLite's limit (``docs/durability.md``): a holder frozen *inside* a store write keeps
    the file's write lock, so a claim waits ``lock_timeout`` (2 s) and fails, cleanly: the
    resume is answered ``-32603`` (B logs the lock), nothing is taken over (epoch and holder
    unchanged), and once the holder wakes the takeover succeeds and fences it."""
    if not isinstance(store, SQLiteFile):
        pytest.skip("about SQLite's one write lock per file")

    async def scenario() -> None:
        async with fleet(store) as running:
            a, b = await asyncio.gather(running.start("ws", "A"), running.start("ws", "B"))
            on_a, on_b = await running.connect(a, "client@A"), await running.connect(b, "client@B")
            sid = await on_a.new_session()
            await on_a.prompt(sid, f"/burst {BURST} n")
            await freeze_holder(a, on_a, sid, store, in_a_write=True)
            before = store.row(sid)
            with pytest.raises(acp.RequestError) as refused:
                await on_b.resume(sid, replay=False)
            assert refused.value.code == -32603
            assert "see the agent's log" in str(refused.value)
            await b.said("write lock")  # the detail is for the agent's log, not the client
            assert store.row(sid) == before  # no claim: A still holds it, alone
            a.thaw()  # A's write completes, and its burst goes on
            await grown(on_a, sid, "n", by=5)
            segment = await on_b.resume(sid, replay=False)
            await a.said(TAKEN_OVER)
            claimed = store.row(sid)
            assert claimed is not None
            assert before is not None
            assert claimed.epoch == before.epoch + 1
            assert resync_of(segment, sid)["_meta"] == claimed.meta
            await on_b.prompt(sid, "/meta set b 1")  # B's write: A's last publication is out
            final = store.row(sid)
            assert final is not None
            assert final.meta == {**(claimed.meta or {}), "b": 1}

    run(scenario())


def test_a_listen_connection_whose_owner_stopped_ends(sqlite_store: SQLiteFile) -> None:
    """A store write that fails stops the connection's owner (``docs/durability.md``); over
    stdio the agent then exits 1. Over ``--listen`` that connection should end too, so its
    client learns it must reconnect; here another process holds the SQLite write lock past
    ``lock_timeout`` while a burst writes."""

    async def scenario() -> None:
        async with fleet(sqlite_store) as running:
            b = await running.start("ws", "B")
            on_b = await running.connect(b, "client@B")
            sid = await on_b.new_session()
            await on_b.prompt(sid, f"/burst {BURST} n")
            await on_b.wire.until(lambda: counter(on_b, sid, "n") >= 5, HANG)
            with sqlite_store.write_lock():
                await b.said("saving lifetimes failed")
            # The server closed the socket (1011): the request fails, as the SDK's WebSocket
            # transport sees it (ConnectionClosed if it had read the close frame, else
            # ConnectionError once its receive loop ended); it is never answered.
            request = on_b.conn.new_session(cwd=str(REPO), mcp_servers=[])
            with pytest.raises((ConnectionError, websockets.exceptions.ConnectionClosed)):
                await on_b.bounded(request, "session/new after the owner stopped")

    run(scenario())


# --- 3. two clients racing to resume --------------------------------------------------------

RACES = 3
"""Sessions raced per test (each race may go either way)."""


async def gated_resume(client: Client, sid: str, gate: asyncio.Event) -> int:
    """Resume once ``gate`` opens; the mark after the response (or the error)."""
    await gate.wait()
    with contextlib.suppress(acp.RequestError):  # a loser may be refused; never required
        await client.resume(sid, replay=False)
    return client.wire.mark()


async def race(store: StoreUnderTest, creator: Client, a: Client, b: Client) -> str:
    """One race on a fresh session; returns the winner's name."""
    sid = await creator.new_session()
    await creator.prompt(sid, "/meta set base 1")
    before = store.row(sid)
    gate = asyncio.Event()
    resumes = [asyncio.create_task(gated_resume(c, sid, gate)) for c in (a, b)]
    gate.set()  # both requests go out in the same turn of the loop
    answered = dict(zip((a, b), await asyncio.gather(*resumes), strict=True))
    claimed = store.row(sid)
    assert before is not None
    assert claimed is not None
    # Both claims took the session (each a new holder): the later one holds it.
    assert claimed.epoch == before.epoch + 2
    assert claimed.holder != before.holder

    tries = await asyncio.gather(
        a.prompt(sid, "/meta set by_a 1"), b.prompt(sid, "/meta set by_b 1")
    )
    stored = store.row(sid)
    assert stored is not None
    assert stored.meta is not None
    won = [c for c, key in ((a, "by_a"), (b, "by_b")) if key in stored.meta]
    assert len(won) == 1, f"not exactly one holder: {stored.meta}"
    winner, loser = won[0], b if won[0] is a else a
    assert (stored.epoch, stored.holder) == (claimed.epoch, claimed.holder)
    assert tries[(a, b).index(winner)].says("ok:")
    assert not tries[(a, b).index(loser)].says("ok:")

    # The loser's client heard nothing of the state after its resume was answered, and
    # nothing of the session at all once its first publication was refused.
    assert info_updates(session_messages(loser.wire.incoming(answered[loser]), sid)) == []
    learned = loser.wire.mark()
    again = await asyncio.gather(
        winner.prompt(sid, "/meta set again 2"), loser.prompt(sid, "/meta set lost 3")
    )
    assert again[0].says("ok:")
    assert not again[1].says("ok:")
    assert session_messages(loser.wire.incoming(learned), sid) == []
    final = store.row(sid)
    assert final is not None
    assert (final.epoch, final.holder) == (claimed.epoch, claimed.holder)
    assert final.meta == {"base": 1, f"by_{'a' if winner is a else 'b'}": 1, "again": 2}
    assert winner.state(sid) == final.state
    return winner.name


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_clients_racing_to_resume_leave_one_holder(
    store: StoreUnderTest, transport: str
) -> None:
    """Two clients on two replicas resume one session at the same moment: exactly one holds
    it; the other's publications change nothing and its client hears nothing more of it."""

    async def scenario() -> list[str]:
        async with fleet(store) as running:
            kinds = [transport, transport] + ([] if transport == "ws" else [transport])
            started = await asyncio.gather(
                *(running.start(kind, name) for kind, name in zip(kinds, "ABC", strict=False))
            )
            a = await running.connect(started[0], "client@A")
            b = await running.connect(started[1], "client@B")
            creator = await running.connect(
                started[-1] if len(started) > 2 else started[0], "creator"
            )
            return [await race(store, creator, a, b) for _ in range(RACES)]

    winners = run(scenario())
    print(f"winners: {winners}")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_former_holder_resuming_again_takes_the_session_back(
    store: StoreUnderTest, transport: str
) -> None:
    """X held a session; Y took it over and published; X's connection has written nothing of
    it since, so it does not know. When X's client resumes it again, that resume takes it
    over like any other: the stored state comes back (not what X last knew), the epoch moves
    on, X's publications are accepted again and Y is fenced."""

    async def scenario() -> None:
        async with fleet(store) as running:
            _a, _b, x, y = await running.pair(transport, ("X", "Y"))
            sid = await x.new_session()
            await x.prompt(sid, "/meta set c 1")
            await y.resume(sid, replay=False)
            await y.prompt(sid, "/meta set c 2")
            taken = store.row(sid)
            segment = await x.resume(sid, replay=False)
            back = store.row(sid)
            assert taken is not None
            assert back is not None
            assert resync_of(segment, sid)["_meta"] == {"c": 2}, "X resynced what it knew"
            assert (back.epoch, back.holder != taken.holder) == (taken.epoch + 1, True)
            assert x.state(sid) == back.state
            mine = await x.prompt(sid, "/meta set c 3")
            assert mine.says("ok: _meta.c set"), mine
            theirs = await y.prompt(sid, "/meta set c 4")
            assert not theirs.says("ok:"), theirs
            final = store.row(sid)
            assert final is not None
            assert final.meta == {"c": 3}

    run(scenario())


# --- 5. a randomized soak -------------------------------------------------------------------

SOAK_SECONDS = float(os.environ.get("AGENT_META_REPLICA_SOAK_SECONDS") or 12)
"""How long the soak publishes (keep it well under 60 s in CI; longer locally)."""
SOAK_REPLICAS = tuple(
    (os.environ.get("AGENT_META_REPLICA_SOAK_REPLICAS") or "ws,stdio-trio,stdio-sdk").split(",")
)
"""The replicas' kinds (a ``ws`` replica serves ``WS_CONNECTIONS`` clients)."""
SOAK_SESSIONS = int(os.environ.get("AGENT_META_REPLICA_SOAK_SESSIONS") or 4)
SOAK_SEED = int(os.environ.get("AGENT_META_REPLICA_SOAK_SEED") or random.randrange(2**32))
WS_CONNECTIONS = 2
PACE = 6
"""Publications between two moves of the chaos (takeover, race, kill)."""


@dataclasses.dataclass(eq=False)
class Tracked:
    """One soak session as the test knows it: who holds it, and every value of its counter
    ``c`` by outcome. Values only go up; each is published once."""

    sid: str
    holder: Client | None
    epoch: int
    values: Iterator[int] = dataclasses.field(default_factory=lambda: itertools.count(1))
    accepted: list[int] = dataclasses.field(default_factory=list)
    """Answered ``ok``: stored, so never lost."""
    unknown: set[int] = dataclasses.field(default_factory=set)
    """Raced a takeover or a kill: stored or not."""
    probes: set[int] = dataclasses.field(default_factory=set)
    """Sent to a connection known to have lost the session: never stored, never seen."""
    publishing: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    claiming: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    """Claims of one session go one at a time (but for the deliberate races), so the test
    knows its holder; publications race them."""
    history: collections.deque[str] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=30)
    )
    """The session's last moves, for a failure's report."""

    @property
    def floor(self) -> int:
        return max(self.accepted, default=0)

    def log(self, *what: object) -> None:
        self.history.append(" ".join(map(str, what)))


@dataclasses.dataclass(eq=False)
class Slot:
    """A replica's place in the soak: killed and restarted, it keeps its kind and name."""

    kind: str
    name: str
    replica: Replica | None = None
    clients: list[Client] = dataclasses.field(default_factory=list)
    incarnation: int = 0


@dataclasses.dataclass
class Figures:
    publications: int = 0
    accepted: int = 0
    fenced: int = 0
    takeovers: int = 0
    races: int = 0
    kills: int = 0
    frames: int = 0

    def summary(self, seed: int, seconds: float, replicas: int, sessions: int) -> str:
        return (
            f"replica soak (seed {seed}, {seconds:.0f} s, {replicas} replicas, {sessions} "
            f"sessions): {self.publications} publications ({self.accepted} accepted), "
            f"{self.takeovers} takeovers, {self.races} racing resumes, {self.kills} kills with "
            f"restarts, {self.fenced} publications by former holders fenced, {self.frames} "
            "client frames checked"
        )


class Soak:
    def __init__(self, running: Fleet, rng: random.Random) -> None:
        self.fleet = running
        self.store = running.store
        self.rng = rng
        self.slots = [Slot(kind, f"R{n}") for n, kind in enumerate(SOAK_REPLICAS)]
        self.sessions: list[Tracked] = []
        self.figures = Figures()
        self.stopping = False
        self.ticked = asyncio.Event()
        self.restarts: list[asyncio.Task[None]] = []

    def live(self, but: Client | None = None) -> list[Client]:
        return [
            client
            for slot in self.slots
            if slot.replica is not None and slot.replica.alive
            for client in slot.clients
            if client is not but
        ]

    def alive(self, client: Client) -> bool:
        return client in self.live()

    async def start(self, slot: Slot) -> None:
        slot.incarnation += 1
        name = f"{slot.name}.{slot.incarnation}"
        replica = await self.fleet.start(slot.kind, name)
        count = WS_CONNECTIONS if slot.kind == "ws" else 1
        slot.clients = [await self.fleet.connect(replica, f"{name}/{n}") for n in range(count)]
        slot.replica = replica

    async def run(self) -> Figures:
        await asyncio.gather(*(self.start(slot) for slot in self.slots))
        for _ in range(SOAK_SESSIONS):
            creator = self.rng.choice(self.live())
            sid = await creator.new_session()
            row = self.store.row(sid)
            assert row is not None
            self.sessions.append(Tracked(sid, creator, row.epoch))
        deadline = asyncio.get_running_loop().time() + SOAK_SECONDS
        workers = [asyncio.create_task(self.publisher(s)) for s in self.sessions]
        chaos = asyncio.create_task(self.chaos())
        await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))  # the run
        self.stopping = True
        self.ticked.set()
        await asyncio.gather(*workers, chaos)
        await asyncio.gather(*self.restarts)
        for s in self.sessions:
            await self.final_check(s)
        self.check_frames()
        return self.figures

    # -- the moves ---------------------------------------------------------------------------

    async def publisher(self, s: Tracked) -> None:
        """Publish the session's counter on its holder, one value at a time; take it over
        somewhere when its holder is gone."""
        while not self.stopping:
            holder = s.holder
            if holder is None or not self.alive(holder):
                async with s.claiming:  # the chaos keeps a connection other than it alive
                    if s.holder is holder:
                        await self.take_over(s, self.rng.choice(self.live(but=holder)))
                continue
            async with s.publishing:
                value = next(s.values)
                try:
                    answer: Answer | None = await holder.prompt(s.sid, f"/meta set c {value}")
                except ConnectionError:  # killed under it
                    answer = None
            self.figures.publications += 1
            s.log("publish", value, "on", holder, "->", answer)
            if answer is not None and answer.says("ok: _meta.c set"):
                s.accepted.append(value)
                self.figures.accepted += 1
            else:
                s.unknown.add(value)
                if s.claiming.locked():  # lost to a takeover under way: wait for its end
                    async with s.claiming:
                        pass
                elif s.holder is holder:
                    s.holder = None  # it lost the session in a way the test did not follow
            self.ticked.set()

    async def chaos(self) -> None:
        while True:
            await self.pace()
            if self.stopping:
                return
            roll = self.rng.random()
            alive = [slot for slot in self.slots if slot.replica and slot.replica.alive]
            restarting = any(not restart.done() for restart in self.restarts)
            if roll < 0.1 and len(alive) > 1 and not restarting:  # one replica down at most
                await self.kill(self.rng.choice(alive))
            elif roll < 0.25:
                await self.race(self.rng.choice(self.sessions))
            else:
                await self.move(self.rng.choice(self.sessions))

    async def pace(self) -> None:
        """Wait until ``PACE`` more publications were made (or the soak stops)."""
        target = self.figures.publications + PACE
        while self.figures.publications < target and not self.stopping:
            self.ticked.clear()
            await asyncio.wait_for(self.ticked.wait(), HANG)

    async def take_over(self, s: Tracked, client: Client, *, replay: bool = False) -> bool:
        """Resume ``s`` on ``client`` (``s.claiming`` held): it resyncs to exactly what is
        stored, which holds every accepted value, and it holds the session from then on."""
        floor, before, known = s.floor, s.epoch, s.holder is not None
        s.log("resume on", client, "replay" if replay else "", "floor", floor)
        try:
            segment = await client.resume(s.sid, replay=replay)
        except (ConnectionError, acp.RequestError) as exc:  # killed meanwhile: holder unknown
            s.log("resume on", client, "failed:", repr(exc))
            s.holder = None
            return False
        row = self.store.row(s.sid)
        assert row is not None
        resynced = resync_of(segment, s.sid)["_meta"].get("c", 0)
        s.log("resumed on", client, "c", resynced, "stored", row)
        assert resynced >= floor, f"{client} resumed {s.sid} at c={resynced}; {floor} accepted"
        assert (row.meta or {}).get("c", 0) == resynced, (row, resynced)
        # A claim moves the epoch on, unless this connection held it already (which only
        # happens when the holder is unknown: after a race, or a claim cut by a kill).
        assert row.epoch > before or (not known and row.epoch == before), (row, before)
        assert client.state(s.sid)["meta"] == row.meta
        s.holder, s.epoch = client, row.epoch
        self.figures.takeovers += 1
        return True

    async def move(self, s: Tracked) -> None:
        """Take ``s`` over on another connection while its publisher publishes; then, now and
        then, have the former holder publish: that must change nothing anywhere."""
        async with s.claiming:
            former, candidates = s.holder, self.live(but=s.holder)
            if not candidates:
                return
            target = self.rng.choice(candidates)
            if not await self.take_over(s, target, replay=self.rng.random() < 0.25):
                return
            if former is None or not self.alive(former) or self.rng.random() < 0.5:
                return
            async with s.publishing:  # the publisher's last value on the former holder is done
                value = next(s.values)
                s.probes.add(value)
                try:
                    answer = await former.prompt(s.sid, f"/meta set c {value}")
                except ConnectionError:
                    return
            s.log("probe", value, "on", former, "->", answer)
            assert not answer.says("ok:"), f"{former} accepted {value} after losing {s.sid}"
            self.figures.fenced += 1

    async def race(self, s: Tracked) -> None:
        """Two connections resume ``s`` at the same moment; the publisher then finds the
        winner by taking it over once more."""
        async with s.claiming:
            candidates = self.live(but=s.holder)
            if len(candidates) < 2:
                return
            floor, gate, known = s.floor, asyncio.Event(), s.holder is not None
            pair = self.rng.sample(candidates, 2)
            tasks = [asyncio.create_task(gated_resume(c, s.sid, gate)) for c in pair]
            gate.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            row = self.store.row(s.sid)
            s.log("race of", *pair, "floor", floor, "stored", row)
            assert row is not None
            assert row.epoch > s.epoch or (not known and row.epoch == s.epoch), (row, s.epoch)
            for client in pair:
                assert (client.value(s.sid, "c") or 0) >= floor or not self.alive(client)
            s.holder, s.epoch = None, row.epoch
            self.figures.races += 1

    async def kill(self, slot: Slot) -> None:
        assert slot.replica is not None
        await slot.replica.kill()
        for s in self.sessions:
            s.log("killed", slot.replica.name)
        self.figures.kills += 1
        self.restarts.append(asyncio.create_task(self.start(slot)))

    # -- the end -----------------------------------------------------------------------------

    async def final_check(self, s: Tracked) -> None:
        """One last takeover, with replay: the store holds every accepted value, no probe, and
        the client folds exactly the stored state."""
        async with s.claiming:
            assert await self.take_over(s, self.rng.choice(self.live(but=s.holder)), replay=True)
        row = self.store.row(s.sid)
        assert row is not None
        assert row.meta is not None
        assert row.meta["c"] not in s.probes
        assert row.meta["c"] in s.unknown or row.meta["c"] in s.accepted

    def check_frames(self) -> None:
        """Every frame any client got: a value some holder published (never a probe), and,
        within one holding of a connection (from its resume on), never a lower one."""
        tracked = {s.sid: s for s in self.sessions}
        for client in self.fleet.clients:
            last: dict[str, int] = {}
            for event in client.wire.events:
                message = event.message
                sid = (message.get("params") or {}).get("sessionId")
                if sid not in tracked:
                    continue
                s = tracked[sid]
                if not event.incoming:
                    if message.get("method") in ("session/load", "session/resume"):
                        last.pop(sid, None)  # a new holding on this connection
                    continue
                update = message["params"].get("update", {})
                if update.get("sessionUpdate") != "session_info_update":
                    continue
                value = (update.get("_meta") or {}).get("c")
                if value is None:
                    continue
                self.figures.frames += 1
                assert value not in s.probes, f"{client} got fenced value {value} of {sid}"
                assert value in s.accepted or value in s.unknown, (client, sid, value)
                assert value >= last.get(sid, 0), f"{client}: {sid} went back to c={value}"
                last[sid] = value


@pytest.mark.slow
def test_a_randomized_soak_of_takeovers_and_kills(store: StoreUnderTest) -> None:
    """Replicas of every kind, sessions publishing counters, random takeovers (some racing,
    some followed by the former holder publishing) and random ``kill -9`` with restarts: no
    accepted publication is lost, no fenced one is seen, no client goes back."""

    async def scenario() -> Figures:
        async with fleet(store) as running:
            soak = Soak(running, random.Random(SOAK_SEED))
            try:
                return await soak.run()
            except AssertionError as exc:
                for s in soak.sessions:
                    exc.add_note(f"--- {s.sid}: last moves\n" + "\n".join(s.history))
                exc.add_note(f"AGENT_META_REPLICA_SOAK_SEED={SOAK_SEED} reruns this soak")
                raise

    figures = run(scenario(), bound=SOAK_SECONDS + 120)
    print(figures.summary(SOAK_SEED, SOAK_SECONDS, len(SOAK_REPLICAS), SOAK_SESSIONS))
    assert figures.takeovers
    assert figures.accepted


# --- 6. the conversation history follows the holder ------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_former_holder_adds_nothing_to_the_history(store: StoreUnderTest, transport: str) -> None:
    """The reference agents keep each session's conversation in the same store. After a
    takeover, the former holder's prompts are refused before anything is stored (a prompt
    writes no lifetime, so only the history can tell it), and its close does not mark the
    session closed: a later load replays exactly the holders' turns, with distinct message ids,
    and keeps the title."""

    async def scenario() -> None:
        async with fleet(store) as running:
            _a, b, x, y = await running.pair(transport, ("X", "Y"))
            sid = await x.new_session()
            assert (await x.prompt(sid, "from X")).says("from X")
            await y.resume(sid, replay=False)
            assert (await y.prompt(sid, "/title Live")).says("title")
            assert (await y.prompt(sid, "from Y")).says("from Y")

            stale = await x.prompt(sid, "stale from X")
            assert stale.error == -32002, stale  # RESOURCE_NOT_FOUND: taken over, resume it
            assert stale.replies == []
            await x.bounded(x.conn.close_session(session_id=sid), "session/close")

            z = await running.connect(b, "Z")
            segment = await z.resume(sid, replay=True)
            users = session_updates(session_messages(segment, sid), "user_message_chunk")
            assert [u["content"]["text"] for u in users] == ["from X", "/title Live", "from Y"]
            assert resync_of(segment, sid).get("title") == "Live"
            row = store.row(sid)
            assert row is not None
            assert row.title == "Live"

    run(scenario())
