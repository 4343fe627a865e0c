"""The frames that carry a stored message, live and on replay, and whether they fit.

Whatever the agent stores must stay sendable in every frame that will carry it later (issue
13): a user message is replayed whole, so a prompt whose message could not be sent in one frame
is refused before anything is stored; an agent message may be long (the replies to many prompt
lines), so its replay is cut into chunks that each fit.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Literal

from agent_meta import ErrorCode, JsonRpcError
from agent_meta.wire import Replay, replay_of

if TYPE_CHECKING:
    from agent_meta import JsonObject, JsonValue

__all__ = [
    "FRAME_OVERHEAD",
    "Message",
    "check_replayable",
    "frame_size",
    "replay_requested",
    "replay_updates",
    "reply_id",
    "reply_text",
    "split_text",
]

FRAME_OVERHEAD = 256
"""Bytes of a ``session/update`` frame around its ``update`` (envelope, session id, newline)."""


@dataclasses.dataclass(slots=True)
class Message:
    """One message of a session's conversation, as stored for replay."""

    role: Literal["user", "agent"]
    message_id: str
    text: str


def reply_id(message: Message) -> str:
    """The ``messageId`` of the agent's reply to a user message, live and on replay."""
    return f"agent-of-{message.message_id}"


def reply_text(replies: list[str]) -> str:
    """The agent's reply to a turn as the client saw it live: one chunk per line."""
    return "".join(reply + "\n" for reply in replies)


def check_replayable(
    session_id: str, text: str, blocks: list[JsonObject], v2: bool, max_frame_bytes: int
) -> None:
    """Refuse (``-32602``) a prompt whose user message could not be sent back in one frame,
    as its echo (``v2``, with the client's ``blocks``) or on replay in either version: it
    would be stored, and every later replay of the session would fail (issue 13)."""
    message = Message("user", "user-0", text)
    largest = max(
        frame_size(user_update(message, v2, blocks), session_id),
        frame_size(user_update(message, not v2), session_id),
    )
    if largest > max_frame_bytes:
        raise JsonRpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: the prompt would take {largest} bytes to send back (echo and "
            f"replay), over the frame limit of {max_frame_bytes} bytes",
        )


def replay_requested(method: str, params: JsonValue, protocol_version: int) -> bool:
    """Whether the reference agents replay the conversation for this load or resume: where ACP
    asks for replay (:func:`~agent_meta.wire.replay_of`: a load, a v2 resume with a cursor),
    from the start. A v1 resume replays nothing (ACP v1: it never does), and a cursor other
    than ``{"type": "start"}`` is refused (``-32602``): the agent knows no other, and the Rust
    schema's ``ReplayFrom::Other`` says to reject a cursor rather than guess where to replay
    from. (A cursor that is no cursor never gets here: the connection refuses it.)"""
    if replay_of(method, params, protocol_version=protocol_version) is not Replay.ASKED:
        return False
    cursor = params.get("replayFrom") if isinstance(params, dict) else None
    if method == "session/load" or (isinstance(cursor, dict) and cursor.get("type") == "start"):
        return True
    raise JsonRpcError(
        ErrorCode.INVALID_PARAMS,
        f"unsupported replayFrom {cursor!r}: only {{'type': 'start'}} is known",
    )


def frame_size(update: JsonObject, session_id: str) -> int:
    """The bytes of the ``session/update`` frame carrying ``update`` (an upper bound)."""
    text = json.dumps(update, separators=(",", ":"), ensure_ascii=True)
    return len(text) + len(json.dumps(session_id)) + FRAME_OVERHEAD


def user_update(message: Message, v2: bool, blocks: list[JsonObject] | None = None) -> JsonObject:
    """The update that carries a user message (its prompt ``blocks`` when known)."""
    content: list[JsonValue] = list(blocks or [{"type": "text", "text": message.text}])
    update: JsonObject = {"sessionUpdate": "user_message" if v2 else "user_message_chunk"}
    if v2:
        update["messageId"] = message.message_id
        update["content"] = content
    else:
        update["content"] = content[0]
    return update


def replay_updates(
    message: Message, v2: bool, session_id: str, max_frame_bytes: int
) -> list[JsonObject]:
    """The updates that replay ``message``: one, or agent message chunks that each fit."""
    if message.role == "user":
        return [user_update(message, v2)]
    whole: JsonObject
    if v2:
        content: JsonObject = {"type": "text", "text": message.text}
        whole = {"sessionUpdate": "agent_message", "messageId": message.message_id}
        whole["content"] = [content]
    else:
        whole = {"sessionUpdate": "agent_message_chunk"}
        whole["content"] = {"type": "text", "text": message.text}
    if frame_size(whole, session_id) <= max_frame_bytes:
        return [whole]
    budget = max_frame_bytes - frame_size(_chunk(message, v2, ""), session_id)
    return [_chunk(message, v2, piece) for piece in split_text(message.text, budget)]


def _chunk(message: Message, v2: bool, text: str) -> JsonObject:
    chunk: JsonObject = {"sessionUpdate": "agent_message_chunk"}
    if v2:
        chunk["messageId"] = message.message_id
    chunk["content"] = {"type": "text", "text": text}
    return chunk


def split_text(text: str, budget: int) -> list[str]:
    """Cut ``text`` into the longest pieces whose JSON string text (escapes included) fits
    ``budget``, in order.

    Each piece is measured whole (a binary search over where it ends), not character by
    character: a 1.6 MB reply is cut in a few hundred ``json.dumps`` calls, not 1.6 million.
    """
    if budget < 16:
        raise ValueError(f"a budget of {budget} bytes cannot hold a chunk")
    pieces: list[str] = []
    start = 0
    while True:
        # ``budget`` characters never escape to fewer than ``budget`` bytes: the piece ends
        # there at the latest.
        end = min(len(text), start + budget)
        if _escaped_size(text[start:end]) > budget:
            fits, too_long = start + 1, end  # one character escapes to 12 bytes at most
            while too_long - fits > 1:
                middle = (fits + too_long) // 2
                if _escaped_size(text[start:middle]) <= budget:
                    fits = middle
                else:
                    too_long = middle
            end = fits
        pieces.append(text[start:end])
        if end == len(text):
            return pieces
        start = end


def _escaped_size(text: str) -> int:
    """The bytes of ``text`` as a JSON string, without its quotes."""
    return len(json.dumps(text, ensure_ascii=True)) - 2
