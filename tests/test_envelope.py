"""The JSON-RPC envelope rule without pydantic (core/_envelope.py) agrees with the wire models.

``agent-meta own`` decides what is a message with :func:`envelope_fault` alone; the wire decoder
decides with it too and then builds its pydantic model. These tests hold the rule to the
models: a value the models accept is never refused, and one they refuse is never passed.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_meta.core._envelope import INT64_MAX, envelope_fault
from agent_meta.wire._models import (
    JsonRpcErrorResponse,
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcSuccessResponse,
)

_VALUES = st.sampled_from(
    [None, 0, 1, -1, INT64_MAX, INT64_MAX + 1, 1.5, True, "", "x", [], [1], {}, {"a": 1}]
)
_ERRORS = st.one_of(
    _VALUES,
    st.fixed_dictionaries(
        {"code": _VALUES, "message": _VALUES},
        optional={"data": _VALUES, "extra": _VALUES},
    ),
)
_MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", None, 2]),
        "id": _VALUES,
        "method": _VALUES,
        "params": _VALUES,
        "result": _VALUES,
        "error": _ERRORS,
        "other": _VALUES,
    },
)


def _models_accept(data: dict[str, Any]) -> bool:
    if "method" in data:
        model: Any = JsonRpcRequest if "id" in data else JsonRpcNotification
    elif "error" in data:
        model = JsonRpcErrorResponse
    elif "result" in data:
        model = JsonRpcSuccessResponse
    else:
        return False
    if data.get("jsonrpc") != "2.0":
        return False  # the decoder requires it before any model (a model would default it)
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


@given(_MESSAGES)
def test_the_rule_agrees_with_the_wire_models(data: dict[str, Any]) -> None:
    assert (envelope_fault(data) is None) is _models_accept(data), data


@given(_MESSAGES)
def test_a_fault_reads_the_id_and_says_whether_it_is_a_response(data: dict[str, Any]) -> None:
    fault = envelope_fault(data)
    if fault is None:
        return
    assert fault.is_response is (
        "method" not in data and not {"id", "result", "error"}.isdisjoint(data)
    )
    request_id = data.get("id")
    readable = (type(request_id) is int and abs(request_id) <= INT64_MAX) or type(request_id) is str
    assert fault.request_id == (request_id if readable else None)


@pytest.mark.parametrize("value", [[], "x", 1, None, [{"jsonrpc": "2.0", "method": "m"}]])
def test_what_is_not_an_object_is_no_message(value: object) -> None:
    fault = envelope_fault(value)
    assert fault is not None
    assert "is an object" in fault.message
