"""The one connection shell (``owner/_shell.py``) that agent_meta's trio connection, the
official-SDK adapter and ``agent-meta own`` answer their messages through, on both drivers:
what it takes, what it admits, what a failing store and the title rule make of a request."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_meta import StoreError
from agent_meta.core._envelope import EnvelopeFault
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.owner._shell import ConnectionShell
from agent_meta.testing import RecordingTransport
from tests.failing_store import WrappedStore

if TYPE_CHECKING:
    from agent_meta import StoredLifetime
    from tests.drivers import Driver


def request(request_id: object, method: str, **params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


class UnreadableStore(WrappedStore):
    """A store whose claims fail: a load's takeover cannot be read."""

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        raise StoreError(self.location, "cannot be read")


async def test_what_is_taken_refused_ignored_or_passed_on(driver: Driver) -> None:
    async with driver.open_owner(RecordingTransport()) as owner:
        shell = ConnectionShell(owner, versions=(1, 2))
        early = shell.take(request(1, "session/new", cwd="/"))
        assert early.messages == ()
        assert early.answer is not None
        assert json.loads(early.answer)["error"]["code"] == ErrorCode.INVALID_REQUEST
        assert early.refused == "refused 'session/new'"
        init = shell.take(request(2, "initialize", protocolVersion=2))
        assert [m["method"] for m in init.messages] == ["initialize"]
        ignored = shell.take({"jsonrpc": "2.0", "method": "_x", "params": [1]})
        assert (ignored.messages, ignored.answer) == ((), None)
        assert ignored.ignored is not None
        line = shell.take(EnvelopeFault("not a message"))
        assert line.answer is not None
        assert json.loads(line.answer)["error"]["code"] == ErrorCode.INVALID_REQUEST


async def test_a_forwarded_batch_answers_its_refusals_in_one_array(driver: Driver) -> None:
    async with driver.open_owner(RecordingTransport()) as owner:
        shell = ConnectionShell(owner)
        entries: list[Any] = [
            request(1, "session/list"),  # before initialize: refused
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}},
            EnvelopeFault("a JSON-RPC message is an object, not int"),
        ]
        intake = shell.take_forwarded_batch(entries)
        assert [m.get("method") for m in intake.messages] == ["session/cancel"]
        assert intake.answer is not None
        answers = json.loads(intake.answer)
        assert [(a["id"], a["error"]["code"]) for a in answers] == [
            (1, ErrorCode.INVALID_REQUEST),
            (None, ErrorCode.INVALID_REQUEST),
        ]
        assert intake.refused is not None


async def test_a_store_that_fails_answers_the_request_it_failed_for(driver: Driver) -> None:
    store = UnreadableStore()
    async with driver.open_owner(RecordingTransport(), store=store) as owner:
        shell = ConnectionShell(owner)
        (init,) = shell.take(request(0, "initialize", protocolVersion=1)).messages
        await shell.admit(init)
        shell.sent(await shell.respond({"jsonrpc": "2.0", "id": 0, "result": {}}))
        (load,) = shell.take(request(1, "session/load", sessionId="s", cwd="/")).messages
        admitted = await shell.admit(load)
        assert admitted.answer is not None
        assert admitted.answer.frame is not None
        error = json.loads(admitted.answer.frame)["error"]
        assert error["code"] == ErrorCode.INTERNAL_ERROR
        assert not owner.has_lifetime("s")
        shell.sent(admitted.answer)
        assert shell.gate.unanswered() == []


async def test_the_title_rule_is_served_unless_the_agent_behind_serves_it(
    driver: Driver,
) -> None:
    async with driver.open_owner(RecordingTransport()) as owner:
        shell = ConnectionShell(owner)
        (init,) = shell.take(request(0, "initialize", protocolVersion=2)).messages
        await shell.admit(init)
        answer = await shell.respond({"jsonrpc": "2.0", "id": 0, "result": {}})
        shell.sent(answer)
        result = answer.response["result"]
        assert result["agentCapabilities"]["sessionCapabilities"] == {"setTitle": {}, "title": {}}
        owner.open_lifetime("s")
        message = request(1, "session/set_title", sessionId="s", title="Mine")
        (taken,) = shell.take(message).messages
        await shell.admit(taken)
        assert shell.answers_here(taken)
        title = await shell.answer_here(taken)
        assert title.response == {"jsonrpc": "2.0", "id": 1, "result": {"title": "Mine"}}
        assert owner.lifetime("s").title_set_by_client
        shell.policy.forwards_titles = True  # a proxy whose agent advertised it
        assert not shell.answers_here(message)
