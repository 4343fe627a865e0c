"""R10 in one table: how session info goes on the wire for each protocol version and mode.

ACP v2 gives ``session_info_update._meta`` the shallow-patch rule, so v2 sends patches as
published and resyncs with ``_meta: null`` followed by a snapshot. ACP v1 has no patch rule:
``_meta: null`` reads as "omitted" there, so a v1 client cannot be told to clear or to remove a
key. By default every v1 frame therefore carries the complete merged object (``{}`` when
empty) and a resync is one such frame; the ``"passthrough"`` mode keeps the legacy behaviour of
sending patches as published and never resyncing.

Every rendering decision that depends on the version reads a :class:`WireMode` from
:data:`WIRE_MODES`; nothing else in the package compares protocol versions for this purpose.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["V1_META_MODES", "WIRE_MODES", "V1MetaMode", "WireMode", "wire_mode"]

V1MetaMode: TypeAlias = Literal["merged", "passthrough"]
"""How v1 frames carry ``_meta``: the complete merged object, or patches as published."""

V1_META_MODES: Final[tuple[V1MetaMode, ...]] = ("merged", "passthrough")


@dataclasses.dataclass(frozen=True, slots=True)
class WireMode:
    """One row of the R10 table."""

    name: str
    full_object: bool
    """Every frame carries the whole known ``_meta`` instead of the patch."""
    resync: Literal["clear_then_snapshot", "full_object", "none"]
    """What a resync (R4) or a repair (R11) writes."""
    merges: bool
    """Queued publications of a session may be coalesced (when the owner coalesces at all).
    Not in pass-through: a v1 client replaces ``_meta`` with each frame, so merging two patches
    would change what it ends with."""
    requires_offset_timestamps: bool
    """``updatedAt`` must be RFC 3339 with an offset (v2 clients drop anything else)."""

    @property
    def resync_frames(self) -> int:
        """How many frames one resync writes."""
        return {"clear_then_snapshot": 2, "full_object": 1, "none": 0}[self.resync]

    @property
    def repairs(self) -> bool:
        """Whether a lost frame can be repaired by a resync (R11)."""
        return self.resync != "none"

    def publication_frames(self, cleared: bool, has_members: bool) -> int:
        """Frames for one (possibly merged) publication: a clear followed by members is two
        frames, ``_meta: null`` then the object, unless every frame is the whole object."""
        if cleared and has_members and not self.full_object:
            return 2
        return 1


V2: Final = WireMode(
    "v2",
    full_object=False,
    resync="clear_then_snapshot",
    merges=True,
    requires_offset_timestamps=True,
)
V1_MERGED: Final = WireMode(
    "v1 merged",
    full_object=True,
    resync="full_object",
    merges=True,
    requires_offset_timestamps=False,
)
V1_PASSTHROUGH: Final = WireMode(
    "v1 passthrough",
    full_object=False,
    resync="none",
    merges=False,
    requires_offset_timestamps=False,
)

WIRE_MODES: Final[Mapping[tuple[int, V1MetaMode], WireMode]] = {
    (2, "merged"): V2,
    (2, "passthrough"): V2,
    (1, "merged"): V1_MERGED,
    (1, "passthrough"): V1_PASSTHROUGH,
}
"""(protocol version, v1 meta mode) -> how session info is rendered."""


def wire_mode(protocol_version: int, v1_meta_mode: V1MetaMode) -> WireMode:
    """The row of :data:`WIRE_MODES` for a connection."""
    return WIRE_MODES[(protocol_version, v1_meta_mode)]
