"""Breaks ``v1-meaning``: it sends v2 ``_meta`` patches to a v1 client too.

It keeps its own state by the v2 patch rule and lists it in session/list, but on v1 a
``_meta`` object replaces the client's whole metadata and ``_meta: null`` means "omitted":
partial objects drop keys, ``{"key": null}`` is stored as data, and a clear does nothing. On v2
it is correct.
"""

from typing import Any

from tests.broken_agents._base import Agent, Session, main


class V1Patches(Agent):
    name = "broken-v1-patches"

    def info_frame(self, session: Session, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(patch)

    def resync(self, session: Session) -> None:
        self.resync_with_clear(session)


if __name__ == "__main__":
    main(V1Patches())
