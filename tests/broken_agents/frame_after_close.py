"""Breaks ``fence``: right after the session/close response it publishes once more.

Like an agent whose background worker reports "closed" in ``_meta`` without checking that the
session is still open.
"""

from typing import Any

from tests.broken_agents._base import Agent, main


class FrameAfterClose(Agent):
    name = "broken-frame-after-close"

    def after_response(self, method: str, params: dict[str, Any]) -> None:
        super().after_response(method, params)
        if method == "session/close":
            session = self.sessions[params["sessionId"]]
            self.publish(
                session, {"sessionUpdate": "session_info_update", "_meta": {"closed": True}}
            )


if __name__ == "__main__":
    main(FrameAfterClose())
