"""The lifetime policy's client-set titles (R13) as a proxy in front of another agent uses them
(``agent-meta own``), on both drivers: messages in, the owner's frames out.

(a) The agent behind does not serve ``session/set_title``: the proxy answers it
(:meth:`LifetimePolicy.answer_set_title`), advertises it in the agent's ``initialize`` result
and puts the client's titles into the agent's ``session/list`` entries
(:meth:`LifetimePolicy.rewrite`). (b) The agent serves it: the proxy forwards it
(:attr:`LifetimePolicy.forwards_titles`) and, on the agent's success, keeps the title as the
client's, so the agent's later titles stay off the wire.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_meta import MemoryStore
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.owner._policy import LifetimePolicy
from agent_meta.owner._titles import client_titles
from agent_meta.sansio.inbound._titles import advertises_titles
from agent_meta.testing import ClientMirror, RecordingTransport

if TYPE_CHECKING:
    from tests.drivers import Driver, Owner


def request(request_id: object, method: str, **params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def result(request_id: object, value: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def title_update(session_id: str, title: str) -> dict[str, Any]:
    update = {"sessionUpdate": "session_info_update", "title": title}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }


async def relay(policy: LifetimePolicy, owner: Owner, message: dict[str, Any]) -> Any:
    """What a proxy does with one message of the agent: rewrite, plan, then publish or write."""
    message = dict(await policy.rewrite(message))
    plan = policy.response(message)
    if plan.update is not None and plan.session_id is not None:
        await owner.lifetime(plan.session_id).publish(title=plan.update.title)  # type: ignore[arg-type]
    elif "method" not in message:
        await owner.send_response(message["id"], result=message.get("result"))
    return message


async def open_session(policy: LifetimePolicy, owner: Owner, session_id: str) -> None:
    await policy.request(request(1, "session/new", cwd="/"))
    await relay(policy, owner, result(1, {"sessionId": session_id}))


async def test_a_the_proxy_answers_advertises_and_lists_for_an_agent_without_it(
    driver: Driver,
) -> None:
    store = MemoryStore()
    mirror = ClientMirror()
    async with driver.open_owner(RecordingTransport(mirror=mirror), store=store) as owner:
        policy = LifetimePolicy(owner)
        await policy.request(request(0, "initialize", protocolVersion=2))
        child = {"protocolVersion": 2, "capabilities": {"session": {}}}
        assert not advertises_titles(child)  # so the proxy answers set_title itself
        sent = await relay(policy, owner, result(0, child))
        assert advertises_titles(sent["result"])
        await open_session(policy, owner, "s")
        answer = await policy.answer_set_title(
            request(2, "session/set_title", sessionId="s", title="Mine")
        )
        assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"title": "Mine"}}
        assert store.records["s"].client_title  # stored before the answer exists
        refused = await policy.answer_set_title(
            request(3, "session/set_title", sessionId="x", title="T")
        )
        assert refused["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND
        refused = await policy.answer_set_title(request(4, "session/set_title", sessionId="s"))
        assert refused["error"]["code"] == ErrorCode.INVALID_PARAMS
        await relay(policy, owner, title_update("s", "the child's own"))
        await policy.request(request(5, "session/list"))
        listing = {"sessions": [{"sessionId": "s", "cwd": "/", "title": "the child's own"}]}
        unchanged = result(5, {"sessions": []})
        assert await policy.rewrite(unchanged) is unchanged  # nothing to rewrite: same object
        sent = await relay(policy, owner, result(5, listing))
        assert sent["result"]["sessions"][0]["title"] == "Mine"
        await owner.wait_flushed()
        assert mirror.info("s").title == "Mine"
        assert owner.statistics().suppressed_titles == 1


class StoreWitness(RecordingTransport):
    """Notes, as each response is written, whether the store held a client-set title then."""

    def __init__(self, store: MemoryStore, mirror: ClientMirror) -> None:
        super().__init__(mirror=mirror)
        self.store = store
        self.stored_when_answered: dict[object, bool] = {}

    async def send_frame(self, frame: bytes) -> None:
        message = json.loads(frame)
        if "method" not in message:
            record = self.store.records.get("s")
            self.stored_when_answered[message["id"]] = record is not None and record.client_title
        await super().send_frame(frame)


async def test_b_a_forwarded_set_title_the_agent_confirmed_is_kept_as_the_clients(
    driver: Driver,
) -> None:
    store = MemoryStore()
    mirror = ClientMirror()
    witness = StoreWitness(store, mirror)
    async with driver.open_owner(witness, store=store) as owner:
        policy = LifetimePolicy(owner)
        policy.forwards_titles = True  # the agent advertised it: forward, then adopt
        await policy.request(request(0, "initialize", protocolVersion=2))
        child = {"protocolVersion": 2, "capabilities": {"session": {"title": {}}}}
        assert advertises_titles(child)
        await relay(policy, owner, result(0, child))
        await open_session(policy, owner, "s")
        await policy.request(request(2, "session/set_title", sessionId="s", title="  Mine  "))
        await relay(policy, owner, title_update("s", "Mine"))  # the agent's confirmation
        await relay(policy, owner, result(2, {"title": "Mine"}))  # it normalized the title
        lifetime = owner.lifetime("s")
        assert lifetime.title_set_by_client
        await relay(policy, owner, title_update("s", "generated later"))
        await owner.wait_flushed()
        assert mirror.info("s").title == "Mine"
        assert owner.statistics().suppressed_titles == 1
        assert await client_titles(owner, ["s"]) == {"s": "Mine"}
    assert witness.stored_when_answered == {0: False, 1: False, 2: True}  # stored, then answered
