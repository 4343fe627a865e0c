"""Breaks ``state`` (R2, one FIFO boundary): the updates of a prompt go out in reverse order.

Like an agent that publishes ``_meta`` from worker threads with no ordering: each update is
right, the agent's own state is right (session/list shows it), but a client that applies the
frames in the order received ends elsewhere.
"""

from typing import Any

from tests.broken_agents._base import Agent, Session, main


class OutOfOrder(Agent):
    name = "broken-out-of-order"

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[Session, dict[str, Any]]] | None = None

    def on_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        self.held = []
        try:
            result = super().on_session_prompt(params)
        finally:
            held, self.held = self.held, None
        for session, update in reversed(held):
            self.update(session, update)
        return result

    def update(self, session: Session, update: dict[str, Any]) -> None:
        if self.held is not None and update.get("sessionUpdate") == "session_info_update":
            self.held.append((session, update))
            return
        super().update(session, update)


if __name__ == "__main__":
    main(OutOfOrder())
