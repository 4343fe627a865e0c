"""Breaks ``resync``: its resync clears the client's metadata and never sends the snapshot.

On v2 it sends ``_meta: null`` alone; on v1, where the resync is one frame with the complete
object, it sends ``_meta: {}`` (v1's clear). Either way the client is left with no metadata
while the agent still holds some. It offers no session/list, so no ``state`` comparison can
see it: only what the agent had published, read from the frames, shows the snapshot missing.
"""

from tests.broken_agents._base import Agent, Session, main


class NullWithoutSnapshot(Agent):
    name = "broken-null-without-snapshot"
    offers_list = False

    def resync(self, session: Session) -> None:
        cleared: dict[str, object] | None = None if self.version >= 2 else {}
        self.update(session, {"sessionUpdate": "session_info_update", "_meta": cleared})


if __name__ == "__main__":
    main(NullWithoutSnapshot())
