"""``session/set_title`` behind the official-SDK adapter (R13) on the SDK's ACP v2 side
(``acp.experimental.v2``, SDK 1.0), with the reference agent's v2 flavour. Skipped where the
installed SDK has no v2 side (before 1.0); ``tests/test_sdk_titles.py`` covers its v1 side.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip(
    "acp.experimental.v2", reason="the installed official SDK has no ACP v2 side (before 1.0)"
)

from agent_meta import MemoryStore
from agent_meta.agents.sdk_agent._agent_v2 import SdkReferenceAgentV2
from agent_meta.core._jsonrpc import ErrorCode
from agent_meta.testing import ClientMirror
from tests.sdk_pair_v2 import V2_OPTIONS, run_v2
from tests.test_sdk_agent_v2 import start, whole_turn

if TYPE_CHECKING:
    from agent_meta.sdk import SdkAdapter
    from tests.sdk_pair import RawClient

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

Message = dict[str, Any]


def info_updates(messages: list[Message]) -> list[Message]:
    return [
        {k: v for k, v in m["params"]["update"].items() if k != "sessionUpdate"}
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]


async def call(client: RawClient, method: str, params: Message) -> tuple[list[Message], Message]:
    seen = len(client.messages)
    answer = await client.call(method, params)
    return client.messages[seen:-1], answer


def test_r13_v2_the_adapter_answers_set_title_and_the_agent_title_stays_off() -> None:
    store = MemoryStore()
    sessions: list[str] = []

    async def scenario(client: RawClient, adapter: SdkAdapter) -> None:
        sid = await start(client)
        sessions.append(sid)
        advertised = client.messages[0]["result"]["capabilities"]["session"]  # initialize's
        assert advertised["setTitle"] == advertised["title"] == {}
        await whole_turn(client, sid, "/title Generated\n/meta set a 1")
        before, answer = await call(
            client, "session/set_title", {"sessionId": sid, "title": "Mine"}
        )
        assert answer["result"] == {"title": "Mine"}
        assert info_updates(before) == [{"title": "Mine"}]
        assert store.records[sid].client_title
        begun = await whole_turn(client, sid, "/title Generated again\n/meta set b 2", 2)
        assert info_updates(client.messages[begun:]) == [{"_meta": {"b": 2}}]
        listing = await client.call("session/list", {})
        assert [e.get("title") for e in listing["result"]["sessions"]] == ["Mine"]
        before, _ = await call(client, "session/resume", {"sessionId": sid, "cwd": "/"})
        assert info_updates(before)[-2:] == [
            {"_meta": None},
            {"title": "Mine", "_meta": {"a": 1, "b": 2}},
        ]
        cases: list[tuple[Message, int]] = [
            ({"sessionId": "nobody", "title": "T"}, ErrorCode.RESOURCE_NOT_FOUND),
            ({"sessionId": sid, "title": None}, ErrorCode.INVALID_PARAMS),
        ]
        for params, code in cases:
            before, answer = await call(client, "session/set_title", params)
            assert (before, answer["error"]["code"]) == ([], code)
        assert adapter.statistics().owner.suppressed_titles == 1

    client, _ = asyncio.run(run_v2(SdkReferenceAgentV2, scenario, V2_OPTIONS, store=store))
    mirror = ClientMirror(protocol_version=2)
    for message in client.messages:
        mirror.feed(message)
    assert mirror.info(sessions[0]).title == "Mine"
