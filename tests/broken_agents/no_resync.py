"""Breaks ``resync``: after a replay it answers without ``_meta: null`` and the snapshot.

The replay re-sends the session info of the session's creation (``stage: new``), so the client
is left with a state the agent no longer holds. Like many agents, its session/list entries
carry no ``_meta``, so only the resync rule can see this.
"""

from tests.broken_agents._base import Agent, Session, main


class NoResync(Agent):
    name = "broken-no-resync"
    list_meta = False

    def resync(self, session: Session) -> None:
        return None


if __name__ == "__main__":
    main(NoResync())
