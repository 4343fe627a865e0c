"""Breaks nothing: it publishes a prompt's session info 50 ms after the prompt's response.

Like hermes-agent, which publishes a session's title from a worker thread about 35 ms after
it answers the prompt. Its own state changes while the prompt runs, so its session/list entry
is ahead of the wire until the late frames arrive: ``agent-meta check`` must wait for the
agent to fall quiet before it judges a step, and pass it. A session closed meanwhile gets
nothing more (the check and the write share one lock with every other write).
"""

from __future__ import annotations

import threading
from typing import Any

from tests.broken_agents._base import Agent, Session, main

DELAY = 0.05
"""Seconds between the prompt's response and its session-info frames."""

Held = list[tuple[Session, dict[str, Any]]]


class LatePublication(Agent):
    name = "late-publication"

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.RLock()  # the main loop and the publishing threads share stdout
        self.held: Held | None = None

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            super().send(message)

    def on_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        self.held = []
        return super().on_session_prompt(params)

    def update(self, session: Session, update: dict[str, Any]) -> None:
        if self.held is not None and update.get("sessionUpdate") == "session_info_update":
            self.held.append((session, update))
            return
        super().update(session, update)

    def after_response(self, method: str, params: dict[str, Any]) -> None:
        held, self.held = self.held, None
        if held:
            threading.Timer(DELAY, self.publish_late, (held,)).start()
        super().after_response(method, params)

    def publish_late(self, held: Held) -> None:
        for session, update in held:
            with self.lock:
                if not session.closed:
                    Agent.update(self, session, update)  # past the holding above


if __name__ == "__main__":
    main(LatePublication())
