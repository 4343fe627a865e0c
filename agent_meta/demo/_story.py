"""The v1 story of ``agent-meta demo``: its steps, what each does through the official Python
SDK client, and what each must show (each check returns why it failed, or ``None``)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from ._print import is_info, kind_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..testing import ClientMirror

__all__ = [
    "BURST",
    "STORY",
    "STORY_TIMEOUT",
    "DemoError",
    "Quiet",
    "Stage",
    "Step",
    "Wire",
    "expect",
]

Message = dict[str, Any]

#: The whole story runs in well under this; a stuck agent becomes an error, not a hang.
STORY_TIMEOUT = 20.0
#: How long a step may wait for frames that the agent sends in the background (the burst).
SETTLE_TIMEOUT = 5.0
BURST = 25

FAILURE_KEY = "agent-meta"


class DemoError(Exception):
    """The story went wrong: a check failed or the agent misbehaved."""


@dataclasses.dataclass
class Wire:
    """What the client received, in wire order, folded as it arrives."""

    mirror: ClientMirror
    incoming: list[Message] = dataclasses.field(default_factory=list)
    traffic: list[tuple[bool, Message]] = dataclasses.field(default_factory=list)
    """Both directions in wire order: (sent by the client, message)."""
    requests: dict[Any, str] = dataclasses.field(default_factory=dict)
    waiters: list[tuple[Callable[[], bool], asyncio.Event]] = dataclasses.field(
        default_factory=list
    )

    def observe(self, event: Any) -> None:
        """The SDK's raw ``observers=`` hook; it runs synchronously in the receive loop."""
        message: Message = event.message
        sent = event.direction.value != "incoming"
        self.traffic.append((sent, message))
        if sent:
            if "method" in message and "id" in message:
                self.requests[message["id"]] = message["method"]
            return
        self.incoming.append(message)
        self.mirror.feed(message)
        for condition, ready in self.waiters:
            if condition():
                ready.set()

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait until the frames received so far make ``condition`` true."""
        if condition():
            return
        ready = asyncio.Event()
        self.waiters.append((condition, ready))
        try:
            await asyncio.wait_for(ready.wait(), SETTLE_TIMEOUT)
        except TimeoutError:
            raise DemoError(f"timed out waiting for {what}") from None
        finally:
            self.waiters.remove((condition, ready))


class Quiet:
    """A duck-typed ``acp.Client``: the observer is the record, so handlers do nothing."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the reference agent never asks for permission")


@dataclasses.dataclass
class Stage:
    """Everything a step needs: the SDK connection, the wire record, the session."""

    conn: Any
    wire: Wire
    cwd: str
    session_id: str = ""

    async def prompt(self, *lines: str) -> None:
        # The schema model, not acp.text_block: that helper is gone from the SDK 1.0.
        from acp.schema import TextContentBlock

        block = TextContentBlock(type="text", text="\n".join(lines))
        await self.conn.prompt(session_id=self.session_id, prompt=[block])

    def meta(self) -> dict[str, Any] | None:
        return self.wire.mirror.meta(self.session_id)

    def failure(self) -> Any:
        meta = self.meta() or {}
        domain = meta.get(FAILURE_KEY)
        return domain.get("failure") if isinstance(domain, dict) else None

    def position_of_response(self, method: str, since: int) -> int:
        """Index in ``wire.incoming`` of the last response to ``method`` after ``since``."""
        found = [
            i
            for i, m in enumerate(self.wire.incoming)
            if i >= since and "method" not in m and self.wire.requests.get(m.get("id")) == method
        ]
        if not found:
            raise DemoError(f"no response to {method} was received")
        return found[-1]


@dataclasses.dataclass(frozen=True)
class Step:
    title: str
    why: str
    run: Callable[[Stage], Awaitable[None]]
    check: Callable[[Stage, int], str | None]


def expect(condition: bool, message: str) -> str | None:
    return None if condition else message


# --- the story --------------------------------------------------------------------------------


async def _connect(stage: Stage) -> None:
    import acp
    from acp.schema import ClientCapabilities, Implementation

    await stage.conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="agent-meta-demo", version="0"),
    )
    session = await stage.conn.new_session(cwd=stage.cwd, mcp_servers=[])
    stage.session_id = session.session_id


async def _set(stage: Stage) -> None:
    await stage.prompt(
        "/title Fix the flaky build",
        '/meta set ui {"pinned": true, "color": "teal"}',
        '/meta set scratch "draft notes"',
    )


async def _remove(stage: Stage) -> None:
    await stage.prompt("/meta rm scratch")


async def _failure_and_domain(stage: Stage) -> None:
    await stage.prompt(
        "/fail build-7 1 Build failed",
        f'/domain set {FAILURE_KEY} notes.owner "alice"',
    )


async def _stale_resolve(stage: Stage) -> None:
    await stage.prompt("/fail build-7 2 Build failed again", "/resolve build-7 1")


async def _matching_resolve(stage: Stage) -> None:
    await stage.prompt("/resolve build-7 2")


async def _burst_resume(stage: Stage) -> None:
    await stage.prompt(f"/burst {BURST} counter")
    await stage.conn.resume_session(session_id=stage.session_id, cwd=stage.cwd)
    await stage.wire.until(
        lambda: (stage.meta() or {}).get("counter") == BURST, f"counter == {BURST}"
    )


async def _load(stage: Stage) -> None:
    await stage.conn.load_session(cwd=stage.cwd, session_id=stage.session_id, mcp_servers=[])


async def _close_reopen(stage: Stage) -> None:
    await stage.conn.close_session(session_id=stage.session_id)
    await stage.conn.load_session(cwd=stage.cwd, session_id=stage.session_id, mcp_servers=[])
    await stage.prompt("/meta set fresh true")


EXPECTED_AFTER_SET = {"ui": {"pinned": True, "color": "teal"}, "scratch": "draft notes"}
EXPECTED_AFTER_REMOVE = {"ui": {"pinned": True, "color": "teal"}}
NOTES = {"owner": "alice"}


def _check_connect(stage: Stage, since: int) -> str | None:
    return expect(bool(stage.session_id), "no session id") or expect(
        stage.meta() is None, "a brand-new session already has metadata"
    )


def _check_set(stage: Stage, since: int) -> str | None:
    return expect(stage.meta() == EXPECTED_AFTER_SET, "metadata is not what was set") or expect(
        stage.wire.mirror.info(stage.session_id).title == "Fix the flaky build", "title not set"
    )


def _check_remove(stage: Stage, since: int) -> str | None:
    return expect(stage.meta() == EXPECTED_AFTER_REMOVE, "scratch was not removed")


def _check_failure_and_domain(stage: Stage, since: int) -> str | None:
    domain = (stage.meta() or {}).get(FAILURE_KEY)
    return expect(
        isinstance(domain, dict) and domain.get("notes") == NOTES and "failure" in domain,
        "the domain edit and the failure record are not side by side",
    )


def _revision(failure: Any) -> Any:
    return failure.get("revision") if isinstance(failure, dict) else None


def _check_stale(stage: Stage, since: int) -> str | None:
    return expect(
        _revision(stage.failure()) == 2, "the stale resolution changed the current incident"
    )


def _check_matching(stage: Stage, since: int) -> str | None:
    domain = (stage.meta() or {}).get(FAILURE_KEY)
    return expect(stage.failure() is None, "the matching resolution did not clear it") or expect(
        isinstance(domain, dict) and domain.get("notes") == NOTES,
        "clearing the failure lost its sibling notes",
    )


def _check_burst(stage: Stage, since: int) -> str | None:
    response = stage.position_of_response("session/resume", since)
    before = stage.wire.incoming[since:response]
    return expect(
        any(is_info(m) for m in before), "no resync frame before the resume response"
    ) or expect((stage.meta() or {}).get("counter") == BURST, "the burst's last value was lost")


def _check_load(stage: Stage, since: int) -> str | None:
    received = stage.wire.incoming[since:]
    response = stage.position_of_response("session/load", since) - since
    replayed = [i for i, m in enumerate(received) if (kind_of(m) or "").endswith("_message_chunk")]
    resync = [i for i, m in enumerate(received) if is_info(m)]
    return (
        expect(bool(replayed), "session/load replayed no history")
        or expect(bool(resync), "session/load sent no resync")
        or expect(
            bool(resync) and bool(replayed) and max(replayed) < min(resync) < response,
            "the resync is not after the replay and before the response",
        )
    )


def _check_reopen(stage: Stage, since: int) -> str | None:
    return expect(stage.meta() == {"fresh": True}, "the new lifetime did not start fresh")


STORY: tuple[Step, ...] = (
    Step(
        "connect",
        "initialize (v1) and session/new. The new session's first lifetime begins: the span, "
        "until session/close, that the session's info belongs to (R5)",
        _connect,
        _check_connect,
    ),
    Step(
        "set metadata",
        "a title and two top-level keys. A v1 client replaces its whole _meta with each "
        "update's, so every v1 session_info_update carries the whole merged object and the "
        "title (R10; a v2 agent sends only what changed)",
        _set,
        _check_set,
    ),
    Step(
        "remove a key",
        "/meta rm scratch: on v1 the removal is the whole object without scratch (a v2 agent "
        "sends the patch {scratch: null})",
        _remove,
        _check_remove,
    ),
    Step(
        "failure next to a domain edit",
        "the failure record and an extension's notes share the agent-meta key (R7, R8)",
        _failure_and_domain,
        _check_failure_and_domain,
    ),
    Step(
        "stale resolution",
        "revision 2 replaces revision 1; resolving revision 1 must change nothing (R7)",
        _stale_resolve,
        _check_stale,
    ),
    Step(
        "matching resolution",
        "resolving revision 2 clears the record and keeps its sibling (R7)",
        _matching_resolve,
        _check_matching,
    ),
    Step(
        "burst racing a resume",
        f"{BURST} background publications race session/resume. Before the resume response the "
        "agent sends a resync: the session info the client must hold, whole, so that a client "
        "that missed or kept stale frames is right again (R4)",
        _burst_resume,
        _check_burst,
    ),
    Step(
        "load with replay",
        "session/load: the history replayed, then the resync, then the response (R4)",
        _load,
        _check_load,
    ),
    Step(
        "close and reopen",
        "session/close ends the lifetime, which is then fenced: nothing more is written for it "
        "(R6). Loading the session again starts a fresh, empty lifetime (the agent knows the "
        "old title went with it, and every v1 frame carries the title)",
        _close_reopen,
        _check_reopen,
    ),
)
