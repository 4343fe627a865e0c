"""The reference agent on the official ACP Python SDK, protocol v2 (``acp.experimental.v2``).

:class:`SdkReferenceAgentV2` is the v1 SDK agent's twin for ACP v2 on the SDK 1.0: the same
sessions, history, commands and ``--store`` tables (:mod:`._base`), the v2 models, and every v2
behaviour of the trio agent. The SDK's v2 side does none of those itself (it routes requests and
validates models), so the agent does what the trio agent does:

- **Prompt**: answered ``{"messageId"}`` as soon as the user message is inserted. The handler
  starts the turn as a task of the agent and returns once the turn has inserted the message; the
  turn then echoes it (``user_message``), reports ``state_update`` ``running``, its replies, and
  ends with ``idle`` and the ``stopReason``. The turn waits until the SDK has handed the
  prompt's response to the adapter before its first update, so the client reads the answer
  first, as from the trio agent: the SDK sends a response from another task than the handler's,
  and tells when through the connection's ``observers`` (:meth:`SdkReferenceAgentV2.observe`).
- **Cancelling**: ``session/cancel``, ``session/close`` and a ``$/cancel_request`` of the
  prompt before it was answered stop the turn; before the insertion the prompt is answered
  ``-32800``, after it the turn ends ``cancelled`` and the prompt still gets its ``messageId``.
- **Foreground state** (:class:`~agent_meta.agents._common._foreground.SessionForeground`): the
  session's, from all its turns, ``requires_action`` while ``/ask`` waits.
- **Resume**: ``replayFrom: {"type": "start"}`` replays the conversation with its
  ``messageId``\\ s, no ``replayFrom`` replays nothing, another cursor is ``-32602``; then the
  current ``state_update``; the adapter resyncs, then the SDK answers.
- **Close** stops the session's work (its final updates and idle ``cancelled`` first); closing
  an unknown session succeeds.

Session info goes through the SDK, which on v2 can say all of it (``SessionInfoUpdate`` keeps
``_meta: None`` and ``title: None``), except domain edits and failure incidents (the lifetime
handle). The command list goes through the adapter's owner: the SDK's v2 schema (2.0.0-alpha.5)
has no ``type`` on a command, which the TypeScript SDK 2.4 requires (it skips a command
without it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import acp
from acp.experimental.v2 import schema

from agent_meta import ErrorCode, JsonObject, JsonRpcError, __version__

from .._common._commands import available_commands_update
from .._common._replay import Message, replay_requested, reply_id, user_update
from .._common._replies import ASK_OPTIONS
from ..reference_agent._agent import AGENT_NAME
from ._agent import AGENT_TITLE
from ._base import SdkAgentBase, SdkSession, closed_meanwhile, request_error, stop_once
from ._prompts import permission_answer, run_line

if TYPE_CHECKING:
    from agent_meta import SessionLifetime

__all__ = ["SdkReferenceAgentV2"]

logger = logging.getLogger("agent_meta.sdk_agent")

_STATE_MODELS: dict[str, Any] = {
    "running": schema.RunningSessionStateUpdate,
    "idle": schema.IdleSessionStateUpdate,
    "requires_action": schema.RequiresActionSessionStateUpdate,
}

_REPLAY_MODELS: dict[str, Any] = {
    "user_message": schema.UserMessageUpdate,
    "agent_message": schema.AgentMessageUpdate,
    "agent_message_chunk": schema.AgentMessageChunk,
}


@dataclasses.dataclass(eq=False, slots=True)
class _Turn:
    """One prompt's turn: how far it got. ``accepted`` resolves to the inserted message's id,
    or to ``None`` when the turn ended before inserting it (or to the insertion's error)."""

    blocks: list[JsonObject]
    text: str
    accepted: asyncio.Future[str | None]
    echoed: bool = False
    replies: list[str] = dataclasses.field(default_factory=list)  # sent to the client


class SdkReferenceAgentV2(SdkAgentBase[Any]):
    """The ``agent-meta agent --runtime sdk`` agent for ACP v2 (SDK 1.0): one instance serves
    one connection::

        agent = SdkReferenceAgentV2(adapter)
        await acp.experimental.v2.run_agent(
            agent, **adapter.connection_kwargs(), observers=[agent.observe]
        )

    (``acp.experimental.v2`` takes the agent object, not a factory, and no
    ``use_unstable_protocol``.) ``observers=[agent.observe]`` lets a turn wait for its prompt's
    answer to be sent before its first update; without it the turn does not wait, and its
    updates may reach the client before the answer. Call :meth:`aclose` once ``run_agent``
    returns.
    """

    PROTOCOL_VERSION = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._observing = False
        # Prompts not answered yet: request id -> session id (seen by observe()).
        self._prompts: dict[int | str | None, str] = {}
        # (session id, message id) -> set once the SDK has sent that prompt's answer.
        self._answered: dict[tuple[str, str], asyncio.Event] = {}
        # Answers a stopped turn no longer waits for.
        self._unwaited: set[tuple[str, str]] = set()

    def observe(self, event: Any) -> None:
        """The SDK connection's stream observer (``observers=[agent.observe]``): notes each
        ``session/prompt`` request as it is read, and each answer once the SDK has sent it."""
        self._observing = True
        message = event.message
        request_id = message.get("id")
        if "id" not in message or not (request_id is None or isinstance(request_id, str | int)):
            return
        if event.direction.value == "incoming":
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            if message.get("method") == "session/prompt" and isinstance(session_id, str):
                self._prompts[request_id] = session_id
        elif "method" not in message:
            self._sent_answer(request_id, message.get("result"))

    def _sent_answer(self, request_id: int | str | None, result: object) -> None:
        """The SDK has sent the answer to request ``request_id``: wake the turn of a prompt
        answered with its message id."""
        session_id = self._prompts.pop(request_id, None)
        message_id = result.get("messageId") if isinstance(result, dict) else None
        if session_id is None or not isinstance(message_id, str):
            return
        key = (session_id, message_id)
        if key in self._unwaited:
            self._unwaited.discard(key)
        else:  # the turn waits for it, or will
            self._answered.setdefault(key, asyncio.Event()).set()

    async def _acknowledged(self, session_id: str, message_id: str) -> None:
        """Wait until the SDK has sent the answer naming ``message_id`` (when observing)."""
        if not self._observing:
            return
        key = (session_id, message_id)
        answered = self._answered.setdefault(key, asyncio.Event())
        try:
            await answered.wait()
        finally:
            del self._answered[key]
            if not answered.is_set():  # stopped first: the answer may still come
                self._unwaited.add(key)

    # ----------------------------------------------------------------------- the v2 models

    def _info_update(self, **fields: Any) -> Any:
        return schema.SessionInfoUpdate(**fields)

    def _replayed(self, update: JsonObject) -> Any:
        return _REPLAY_MODELS[str(update["sessionUpdate"])].model_validate(update)

    async def _advertise(self, session_id: str) -> None:
        # Through the owner, not the SDK: see the module docstring (a command's "type").
        await self._adapter.wait_opened(session_id)
        params: JsonObject = {"sessionId": session_id, "update": available_commands_update(True)}
        await self._adapter.owner.send_notification("session/update", params)

    async def _restored(self, session: SdkSession) -> None:
        """The foreground state after any replay, even without one (v2 schema,
        ``ResumeSessionResponse``); the adapter resyncs after it."""
        await self._state_update(session, session.foreground.snapshot())

    async def _state_update(self, session: SdkSession, update: JsonObject) -> None:
        model = _STATE_MODELS[str(update["state"])].model_validate(update)
        await self._send(session.session_id, model)

    async def _report(
        self, session: SdkSession, turn: _Turn, state: str, stop_reason: str | None = None
    ) -> None:
        update = session.foreground.change(turn, state, stop_reason)
        if update is not None:
            await self._state_update(session, update)

    # ----------------------------------------------------------------------- setup

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        await self._find_adapter()
        info = schema.Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=__version__)
        capabilities = schema.AgentCapabilities(session=schema.SessionCapabilities())
        return schema.InitializeResponse(
            protocol_version=2, info=info, capabilities=capabilities, auth_methods=[]
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        """A session; the adapter opens its lifetime as the response goes out."""
        return schema.NewSessionResponse(session_id=await self._create_session(cwd))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> Any:
        return schema.ListSessionsResponse.model_validate(await self._list_page(cwd, cursor))

    # ----------------------------------------------------------------------- resume

    async def resume_session(
        self, session_id: str, cwd: str, replay_from: Any = None, **kwargs: Any
    ) -> Any:
        """Replay if asked (``replayFrom: {"type": "start"}``), report the foreground state;
        the adapter resyncs before the response."""
        session = await self._taken_session(session_id)
        cursor = (
            None
            if replay_from is None
            else replay_from.model_dump(mode="json", by_alias=True, exclude_unset=True)
        )
        try:
            replay = replay_requested("session/resume", {"replayFrom": cursor}, 2)
        except JsonRpcError as exc:
            raise request_error(exc) from None
        if not await self._stoppable(session.restores, self._restore(session, replay=replay)):
            raise closed_meanwhile()
        return schema.ResumeSessionResponse()

    # ----------------------------------------------------------------------- cancel

    async def cancel_session(self, session_id: str, **kwargs: Any) -> None:
        self._cancel_turns(session_id)

    # ----------------------------------------------------------------------- prompt

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        """Start the turn; answer ``{"messageId"}`` once it has inserted the user message
        (``-32800`` if it was stopped before). A ``$/cancel_request`` of this prompt before
        then stops the turn, not the request (as on the trio agent)."""
        session = self._session(session_id)
        lifetime = self._open_lifetime(session_id)
        blocks, text = self._prompt_text(session_id, prompt)
        handler = asyncio.current_task()
        assert handler is not None
        turn = _Turn(blocks, text, asyncio.get_running_loop().create_future())
        task = self._spawn(self._turn(session, lifetime, turn), name=f"turn of {session_id}")
        session.turns[task] = handler
        task.add_done_callback(lambda done: session.turns.pop(done, None))
        try:
            message_id = await asyncio.shield(turn.accepted)
        except asyncio.CancelledError:
            stop_once(task)
            message_id = await asyncio.shield(turn.accepted)
            if message_id is None:
                raise
            handler.uncancel()  # inserted: ACP says the prompt must not be answered an error
        if message_id is None:
            raise acp.RequestError(
                ErrorCode.REQUEST_CANCELLED, "the prompt was cancelled before it started"
            )
        return schema.PromptResponse(message_id=message_id)

    async def _turn(self, session: SdkSession, lifetime: SessionLifetime, turn: _Turn) -> None:
        """Insert the user message, then (once the prompt is answered) echo it, report
        ``running``, run its lines, and end with ``idle`` and the stop reason."""
        try:
            message_id = await self._insert_user_message(session, turn.text)
        except asyncio.CancelledError:
            turn.accepted.set_result(None)
            raise
        except Exception as exc:  # the handler answers it: nothing was inserted
            turn.accepted.set_exception(exc)
            return
        turn.accepted.set_result(message_id)
        sid = session.session_id
        stop_reason = "end_turn"
        try:
            await self._acknowledged(sid, message_id)
            await self._echo(session, turn, message_id)
            await self._report(session, turn, "running")
            context = self._line_context(
                session, lifetime, lambda question: self._ask(session, turn, question)
            )
            user = Message("user", message_id, turn.text)
            for line in turn.text.splitlines():
                if not line.strip():
                    continue
                reply = await run_line(context, line)
                chunk = {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": reply_id(user),
                    "content": {"type": "text", "text": reply + "\n"},
                }
                await self._send(sid, schema.AgentMessageChunk.model_validate(chunk))
                turn.replies.append(reply)
        except asyncio.CancelledError:
            stop_reason = "cancelled"  # the turn stops; what the client saw is kept
        except ConnectionError:
            raise  # the connection has closed: nothing more can be sent (background() says so)
        except Exception:  # a bug, or the SDK refusing a model: the turn still ends (idle)
            logger.exception("turn of %s failed", sid)
        # If a cancellation cut it short, the echo goes out without waiting for the answer
        # (the schema lets it come before or after; the answer may never be sent, if the
        # connection is ending).
        await self._echo(session, turn, message_id)
        await self._store_reply(session, message_id, turn.replies)
        await self._report(session, turn, "idle", stop_reason)

    async def _echo(self, session: SdkSession, turn: _Turn, message_id: str) -> None:
        """Echo the user message (once)."""
        if turn.echoed:
            return
        echo = user_update(Message("user", message_id, turn.text), True, turn.blocks)
        await self._send(session.session_id, schema.UserMessageUpdate.model_validate(echo))
        turn.echoed = True

    async def _ask(self, session: SdkSession, turn: _Turn, text: str) -> str:
        """``session/request_permission`` (v2: a ``title``) through the SDK; the session
        ``requires_action`` while the turn waits, and runs again once answered."""
        await self._report(session, turn, "requires_action")
        options = [schema.PermissionOption.model_validate(option) for option in ASK_OPTIONS]
        request = self.client.request_permission(
            session_id=session.session_id, title=text, options=options
        )
        try:
            reply = await permission_answer(request)
        except ConnectionError:
            return "not answered: the connection closed"
        await self._report(session, turn, "running")
        return reply
