"""Replay is replay, as the watcher applies it (sans-IO): in a load or resume window, the
agent's current info is state, the rest is history. The rule itself is the owner's,
:class:`~agent_meta.core._replay.ReplayWindow`; this is what one watched window keeps of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, final

from ..core._replay import ReplayWindow
from ..core._sentinel import OMITTED
from ..core._timestamps import rfc3339_instant
from ..testing._mirror import fold_meta

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._findings import Meta

__all__ = ["CurrentInfo", "Window", "is_state"]


@final
class CurrentInfo:
    """One replaying window's judgement of its ``session_info_update`` frames, and the newest
    frame it took for the agent's current info."""

    __slots__ = ("_judge", "newest")

    def __init__(self) -> None:
        self._judge = ReplayWindow()
        self.newest: tuple[int, str] | None = None
        """``(seq, updatedAt)`` of the newest current info the window carried."""

    def sees(self, seq: int, updated_at: object, known: Callable[[], object]) -> bool:
        """Whether frame ``seq``, with ``updated_at``, is the agent's current info (``known()``:
        the ``updatedAt`` the agent held before it)."""
        if not self._judge.is_current(updated_at, known):
            return False
        self.newest = (seq, str(updated_at))
        return True

    def stale(self, held: object) -> str | None:
        """Why a client that ends the window holding ``updatedAt`` ``held`` ended older than
        the window's current info (``None``: it did not)."""
        if self.newest is None:
            return None
        seq, current = self.newest
        held_at, current_at = rfc3339_instant(held), rfc3339_instant(current)
        if held_at is not None and current_at is not None and held_at >= current_at:
            return None
        return (
            f"the client holds updatedAt {held!r}, not the agent's current info of #{seq} "
            f"({current!r}, newer than anything known or replayed): the window's current "
            "info is state, not replay"
        )


class Window(Protocol):
    """A load or resume window as the watcher keeps it."""

    replay: bool
    meta_before: Meta  # what the client should hold at the window's end, absent a resync
    current: CurrentInfo


def is_state(
    seq: int,
    update: dict[str, Any],
    windows: Sequence[Window],
    known: Callable[[], object],
    version: int,
) -> bool:
    """Whether ``session_info_update`` frame ``seq`` (its ``update``) is the agent's state:
    outside a replaying window, or its current info in every one open (``known()``: the
    ``updatedAt`` the agent held before it); each window then expects to end with it."""
    updated_at, meta = update.get("updatedAt", OMITTED), update.get("_meta", OMITTED)
    replaying = [window for window in windows if window.replay]
    judged = [window.current.sees(seq, updated_at, known) for window in replaying]
    if not all(judged):  # every window notes the frame: no short cut
        return False
    for window in replaying if meta is not OMITTED else ():
        window.meta_before = fold_meta(window.meta_before, meta, min(version, 2))
    return True
