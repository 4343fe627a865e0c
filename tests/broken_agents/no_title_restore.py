"""Breaks ``title``: its resync restores ``_meta`` but never the title.

Like claude-agent-acp 0.101.0, whose ``session/load`` and ``session/resume`` restore no title:
a client that reconnects shows none, and one that stayed is left with the title its replay
carried (the session's first, ``New session``), not the one the agent lists.
"""

from typing import Any

from tests.broken_agents._base import Agent, Session, main


class NoTitleRestore(Agent):
    name = "broken-no-title-restore"

    def snapshot(self, session: Session) -> dict[str, Any]:
        return {"sessionUpdate": "session_info_update", "_meta": dict(session.meta)}


if __name__ == "__main__":
    main(NoTitleRestore())
