"""Issue 13, point 5: the owner's raw-frame API validates as much as its session-info API (R12).

``MetaOwner.send_notification`` and ``MetaOwner.send_response`` are public calls: bad input
raises :class:`agent_meta.MetaValueError` (or a documented subclass of it) at the call site,
and nothing is written. Each test also checks that the owner is still usable afterwards: a good
frame sent after the refused call is the only frame on the wire. Every test runs on both drivers
(trio and asyncio).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest

import agent_meta
from agent_meta.testing import RecordingTransport

if TYPE_CHECKING:
    from tests.drivers import Driver

GOOD_PARAMS = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}


async def _refused_then_usable(driver: Driver, call: Any, *args: Any, **kwargs: Any) -> None:
    transport = RecordingTransport()
    async with driver.open_owner(transport) as owner:
        with pytest.raises(agent_meta.MetaValueError):
            await getattr(owner, call)(*args, **kwargs)
        with pytest.raises(agent_meta.MetaValueError):
            getattr(owner, f"{call}_nowait")(*args, **kwargs)
        await owner.wait_flushed()
        assert transport.frames == [], f"a refused call wrote {transport.frames}"
        await owner.send_response(1, result={})
        await owner.wait_flushed()
    assert transport.data == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


@pytest.mark.parametrize(
    "method",
    [123, None, ["m"], {"m": 1}, math.nan, b"m", True, 1.5],
    ids=["int", "none", "list", "dict", "nan", "bytes", "bool", "float"],
)
async def test_send_notification_refuses_a_method_that_is_not_a_string(
    driver: Driver, method: object
) -> None:
    """A JSON-RPC method is a string: anything else is refused. An int, ``None``, a list, a
    dict, a bool or a float used to be written as ``"method":123`` and so on; NaN raised a bare
    ``ValueError`` and bytes a bare ``TypeError``."""
    await _refused_then_usable(driver, "send_notification", method, GOOD_PARAMS)


@pytest.mark.parametrize(
    "error",
    [
        {"code": True, "message": "m"},
        {"code": False, "message": "m"},
    ],
    ids=["code-true", "code-false"],
)
async def test_send_response_refuses_an_error_code_that_is_not_an_integer(
    driver: Driver,
    error: dict[str, Any],
) -> None:
    """A JSON-RPC error code is an integer; a bool is not one, and is refused. ``"code":true``
    used to be written."""
    await _refused_then_usable(driver, "send_response", 1, error=error)


@pytest.mark.parametrize(
    "error",
    [{"code": 2**31, "message": "m"}, {"code": -(2**31) - 1, "message": "m"}],
    ids=["above-int32", "below-int32"],
)
async def test_send_response_refuses_an_error_code_outside_int32(
    driver: Driver, error: dict[str, Any]
) -> None:
    """Found while writing these tests: ACP's ``ErrorCode`` is ``format: int32`` (v1 and v2
    schemas), so a client in a typed language cannot read a larger code: it is refused. It
    used to be written."""
    await _refused_then_usable(driver, "send_response", 1, error=error)


@pytest.mark.parametrize("request_id", [2**63, -(2**63) - 1], ids=["above-int64", "below-int64"])
async def test_send_response_refuses_a_request_id_outside_int64(
    driver: Driver, request_id: int
) -> None:
    """Found while writing these tests: ACP's numeric ``RequestId`` is ``format: int64`` (v1
    and v2 schemas): an id outside it is refused. Such an id used to be written."""
    await _refused_then_usable(driver, "send_response", request_id, result={})


@pytest.mark.parametrize(
    ("request_id", "kwargs"),
    [
        (True, {"result": {}}),
        (1.5, {"result": {}}),
        (math.nan, {"result": {}}),
        (b"1", {"result": {}}),
        (1, {"error": {"code": 1.0, "message": "m"}}),
        (1, {"error": {"code": math.nan, "message": "m"}}),
        (1, {"error": {"code": 1, "message": b"m"}}),
        (1, {"error": {"code": 1}}),
        (1, {"error": {"code": 1, "message": "m", "data": math.inf}}),
        (1, {"result": {"x": math.nan}}),
    ],
    ids=[
        "id-bool",
        "id-float",
        "id-nan",
        "id-bytes",
        "code-float",
        "code-nan",
        "message-bytes",
        "message-missing",
        "data-inf",
        "result-nan",
    ],
)
async def test_send_response_keeps_refusing_what_it_already_refused(
    driver: Driver, request_id: object, kwargs: dict[str, Any]
) -> None:
    """Refused before the cases above were fixed, and still refused (kept so that their fix
    cannot loosen these)."""
    await _refused_then_usable(driver, "send_response", request_id, **kwargs)


@pytest.mark.parametrize(
    "params",
    [[1], "x", 5, {1: 2}, {"x": math.nan}],
    ids=["list", "str", "int", "int-key", "nan-value"],
)
async def test_send_notification_keeps_refusing_bad_params(driver: Driver, params: object) -> None:
    """Params must be a JSON object (refused before the cases above were fixed, too)."""
    await _refused_then_usable(driver, "send_notification", "session/update", params)
