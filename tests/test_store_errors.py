"""What a client learns when the lifetime store fails on its request, on both runtimes
(agent_meta's trio connection and the official-SDK adapter): a generic ``-32603``, never the
store's location or the database's message; those go to the agent's log
(``docs/durability.md``)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from agent_meta import BaseAgent, RequestContext, StoredLifetime, StoreError
from agent_meta.agents.reference_agent._agent import ReferenceAgent
from agent_meta.core._jsonrpc import ErrorCode
from tests.failing_store import WrappedStore
from tests.peer import serve
from tests.sdk_pair import RawClient, run
from tests.support.sdk_mini_agent import MiniAgent

if TYPE_CHECKING:
    from agent_meta.core._json import JsonObject
    from agent_meta.sdk import SdkAdapter

LOCATION = "postgresql://agent@db.internal:5432/agents"
INIT_V2 = {"protocolVersion": 2, "info": {"name": "t", "version": "0"}}
DETAIL = 'connection to server at "db.internal" failed'


class UnreachableStore(WrappedStore):
    """A store whose claims fail as a database that went away does."""

    @property
    def location(self) -> str:
        return LOCATION

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        raise StoreError(LOCATION, f"claim failed: {DETAIL}")


def assert_generic(error: dict[str, object], caplog: pytest.LogCaptureFixture) -> None:
    assert error == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "the lifetime store failed; see the agent's log",
    }
    assert LOCATION in caplog.text  # the agent's log has the detail
    assert DETAIL in caplog.text


async def test_the_trio_connection_tells_the_client_no_store_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    async with serve(ReferenceAgent(), store=UnreachableStore()) as peer:
        await peer.request("initialize", INIT_V2)
        response = await peer.request("session/resume", {"sessionId": "s", "cwd": "/"})
    assert_generic(response["error"], caplog)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes
def test_the_sdk_adapter_tells_the_client_no_store_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    answers: list[dict[str, object]] = []

    async def scenario(client: RawClient, _adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        params = {"sessionId": "s", "cwd": "/", "mcpServers": []}
        answers.append(await client.call("session/load", params))

    asyncio.run(run(MiniAgent, scenario, store=UnreachableStore()))
    assert_generic(answers[0]["error"], caplog)  # type: ignore[arg-type]


class StoreFailingAgent(BaseAgent):
    """Its prompts fail on a store of its own (a history store, say)."""

    async def initialize(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        return {}

    async def prompt(self, ctx: RequestContext, params: JsonObject) -> JsonObject:
        raise StoreError(LOCATION, f"write failed: {DETAIL}")


async def test_a_store_error_out_of_a_handler_tells_the_client_no_store_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    async with serve(StoreFailingAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        response = await peer.request("session/prompt", {"sessionId": "s", "prompt": []})
    assert_generic(response["error"], caplog)


class RefusingStore(UnreachableStore):
    """A store that fails every claim, as PostgreSQL does one of an id holding a NUL."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[str] = []

    async def claim(self, session_id: str, holder: str) -> StoredLifetime | None:
        self.claims.append(session_id)
        return await super().claim(session_id, holder)


UNSTORABLE = [("x\x00y", "a NUL character (U+0000)"), ("x\ud800", "a lone surrogate (U+D800)")]


def assert_refused(error: dict[str, object], flaw: str) -> None:
    assert error["code"] == ErrorCode.INVALID_PARAMS
    assert isinstance(error["message"], str)
    assert error["message"].endswith(f"holds {flaw}")


@pytest.mark.parametrize(("session_id", "flaw"), UNSTORABLE)
async def test_the_trio_connection_refuses_a_session_id_no_store_can_hold(
    session_id: str, flaw: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RefusingStore()
    async with serve(ReferenceAgent(), store=store) as peer:
        await peer.request("initialize", INIT_V2)
        for method in ("session/resume", "session/load", "session/prompt"):
            params = {"sessionId": session_id, "cwd": "/", "prompt": []}
            assert_refused((await peer.request(method, params))["error"], flaw)
    assert store.claims == []
    assert not caplog.records  # the client's mistake: nothing for the agent's log


@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns on unstable routes
@pytest.mark.parametrize(("session_id", "flaw"), UNSTORABLE)
def test_the_sdk_adapter_refuses_a_session_id_no_store_can_hold(
    session_id: str, flaw: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RefusingStore()
    answers: list[dict[str, object]] = []

    async def scenario(client: RawClient, _adapter: SdkAdapter) -> None:
        await client.call("initialize", {"protocolVersion": 1})
        for method in ("session/load", "session/prompt"):
            params = {"sessionId": session_id, "cwd": "/", "mcpServers": [], "prompt": []}
            answers.append((await client.call(method, params))["error"])

    asyncio.run(run(MiniAgent, scenario, store=store))
    for error in answers:
        assert_refused(error, flaw)
    assert store.claims == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_unknown_session_id_is_quoted_cut_short() -> None:
    session_id = "s" * 100_000
    async with serve(ReferenceAgent()) as peer:
        await peer.request("initialize", INIT_V2)
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        error = (await peer.request("session/prompt", params))["error"]
    assert error["code"] == ErrorCode.RESOURCE_NOT_FOUND
    assert error["message"] == f"unknown session {'s' * 64!r}… (100000 characters)"
