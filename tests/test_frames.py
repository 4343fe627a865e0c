"""The owner's fast frame renderer agrees with the pydantic reference encoder.

The owner joins pre-encoded fragments instead of dumping a model per frame (see
``agent_meta/sansio/queue/_info_frames.py``). These properties pin that shortcut to the wire
models: for any publication, the frame the send queue renders -- and the frame each driver's
owner (trio, asyncio) writes, express path included -- parses to exactly what
:func:`agent_meta.wire._convert.encode_session_update` produces, and every frame is one ASCII line.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agent_meta
import agent_meta.wire
from agent_meta.sansio._frames import build_notification, build_response
from agent_meta.sansio.queue._edits import Outcome
from agent_meta.sansio.queue._queue import SendQueue
from agent_meta.testing import RecordingTransport
from agent_meta.wire._convert import encode_session_update
from tests import drivers
from tests.strategies import json_values, session_info_patches

session_ids = st.text(min_size=1, max_size=8)
notification_metas = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=4), json_values, max_size=3)
)


def rendered(
    protocol_version: Literal[1, 2],
    session_id: str,
    patch: agent_meta.SessionInfoPatch,
    notification_meta: dict[str, Any] | None,
) -> bytes:
    """The single frame the send queue writes for one publication into a fresh lifetime."""
    options = agent_meta.OwnerOptions(protocol_version=protocol_version, v1_meta_mode="passthrough")
    queue = SendQueue(options)
    state = queue.open_lifetime(session_id)
    update = queue.encode(
        title=patch.title,
        updated_at=patch.updated_at,
        meta=patch.meta,
        notification_meta=notification_meta,
    )
    assert queue.submit(state, update) is Outcome.ACCEPTED
    frame = queue.next_action()
    assert isinstance(frame, bytes)
    queue.written()
    assert queue.next_action() is None
    return frame


def written(
    runtime: str,
    protocol_version: Literal[1, 2],
    session_id: str,
    patch: agent_meta.SessionInfoPatch,
    notification_meta: dict[str, Any] | None,
) -> bytes:
    """The single frame a driver's owner writes for one publication into a fresh lifetime."""
    driver = drivers.get(runtime)
    options = agent_meta.OwnerOptions(protocol_version=protocol_version, v1_meta_mode="passthrough")

    async def main() -> list[bytes]:
        transport = RecordingTransport()
        async with driver.open_owner(transport, options) as owner:
            lifetime = owner.open_lifetime(session_id)
            assert await lifetime.publish(
                title=patch.title,
                updated_at=patch.updated_at,
                meta=patch.meta,
                notification_meta=notification_meta,
            )
        return transport.frames

    frames = driver.run(main)
    assert len(frames) == 1
    return frames[0]


def frame_of(
    via: str,
    protocol_version: Literal[1, 2],
    session_id: str,
    patch: agent_meta.SessionInfoPatch,
    notification_meta: dict[str, Any] | None,
) -> bytes:
    if via == "queue":
        return rendered(protocol_version, session_id, patch, notification_meta)
    return written(via, protocol_version, session_id, patch, notification_meta)


VIA = pytest.mark.parametrize("via", ["queue", *drivers.NAMES])


def assert_one_ascii_line(frame: bytes) -> None:
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    frame.decode("ascii")  # raises if any byte is not ASCII


@VIA
@given(session_ids, session_info_patches(), notification_metas)
def test_v2_frames_match_the_reference_encoder(
    via: str,
    session_id: str,
    patch: agent_meta.SessionInfoPatch,
    notification_meta: dict[str, Any] | None,
) -> None:
    frame = frame_of(via, 2, session_id, patch, notification_meta)
    reference = encode_session_update(session_id, patch, 2, notification_meta)
    assert json.loads(frame) == json.loads(reference)
    assert_one_ascii_line(frame)


@VIA
@given(session_ids, session_info_patches(), notification_metas)
def test_v1_passthrough_frames_match_the_reference_encoder(
    via: str,
    session_id: str,
    patch: agent_meta.SessionInfoPatch,
    notification_meta: dict[str, Any] | None,
) -> None:
    frame = frame_of(via, 1, session_id, patch, notification_meta)
    reference = encode_session_update(session_id, patch, 1, notification_meta)
    assert json.loads(frame) == json.loads(reference)
    assert_one_ascii_line(frame)


@given(
    st.text(max_size=12), st.one_of(st.none(), st.dictionaries(st.text(max_size=4), json_values))
)
def test_notification_frames_match_the_wire_model(
    method: str, params: dict[str, Any] | None
) -> None:
    frame = build_notification(method, params)
    if params is None:
        model = agent_meta.wire.JsonRpcNotification(method=method)
    else:
        model = agent_meta.wire.JsonRpcNotification(method=method, params=params)
    assert json.loads(frame) == json.loads(agent_meta.wire.encode_frame(model))


@given(
    st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=6)),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=4), json_values, max_size=3)),
)
def test_response_frames_match_the_wire_model(
    request_id: int | str, result: dict[str, Any] | None
) -> None:
    frame = build_response(request_id, result=result)
    model = agent_meta.wire.JsonRpcSuccessResponse(id=request_id, result=result)
    assert json.loads(frame) == json.loads(agent_meta.wire.encode_frame(model))


@VIA
def test_non_ascii_text_is_escaped_and_survives(via: str) -> None:
    patch = agent_meta.SessionInfoPatch(title="Zürich ✓ \U0001f600", meta={"k": "\u2028"})
    frame = frame_of(via, 2, "s", patch, None)
    assert_one_ascii_line(frame)
    assert json.loads(frame)["params"]["update"]["title"] == "Zürich ✓ \U0001f600"
    assert json.loads(frame)["params"]["update"]["_meta"] == {"k": "\u2028"}
