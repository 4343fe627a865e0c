"""What a v1 ``session_info_update``'s ``_meta`` object means: the whole ``_meta``, or a patch.

ACP v1 cannot say it. agent_meta's owner sends whole objects on v1 (R10, ``v1_meta_mode=
"merged"``), codex-acp sends partial ones, and an owner in front of a child (``agent-meta own``)
must read them the way they were meant: a whole object read as a patch keeps every key the
child removed. So every agent on agent_meta says it in its ``initialize`` result, under a
documented ``_meta`` key any agent may send (:data:`V1_META_KEY`), and ``own`` honours it; for
a child that does not say, :class:`WholeObjectHint` notices objects that look whole while they
are read as patches, so ``own`` can say once that ``--child-meta replace`` is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["V1_META_FIELD", "V1_META_KEY", "WholeObjectHint", "advertise_v1_meta", "v1_meta_of"]

V1_META_KEY: Final = "agent-meta"
"""The top-level ``_meta`` key of an ``initialize`` result that holds :data:`V1_META_FIELD`."""
V1_META_FIELD: Final = "v1MetaObjects"
"""``"whole"``: each v1 ``session_info_update`` ``_meta`` object is the agent's whole ``_meta``;
``"patch"``: each is a shallow patch by top-level key, as on v2."""

V1Meaning = Literal["whole", "patch"]


def advertise_v1_meta(result: Mapping[str, object], meaning: V1Meaning) -> dict[str, object]:
    """``result`` (an ``initialize`` result) saying what its v1 ``_meta`` objects mean; other
    members of its ``_meta``, and of :data:`V1_META_KEY`, are kept."""
    meta = result.get("_meta")
    members = dict(meta) if isinstance(meta, dict) else {}
    own = members.get(V1_META_KEY)
    fields = dict(own) if isinstance(own, dict) else {}
    fields[V1_META_FIELD] = meaning
    members[V1_META_KEY] = fields
    return {**result, "_meta": members}


def v1_meta_of(result: Mapping[str, object]) -> V1Meaning | None:
    """What an ``initialize`` result says its v1 ``_meta`` objects mean, if it says."""
    meta = result.get("_meta")
    own = meta.get(V1_META_KEY) if isinstance(meta, dict) else None
    meaning = own.get(V1_META_FIELD) if isinstance(own, dict) else None
    if meaning == "whole":
        return "whole"
    if meaning == "patch":
        return "patch"
    return None


@final
class WholeObjectHint:
    """Notices v1 objects of a child that look whole while they are read as patches.

    An object looks whole when it repeats a key the child sent before with the same value (a
    patch sender sends what changed) and lacks one the child sent before and never removed (a
    whole-object sender removes a key by leaving it out). Partial objects (codex-acp's) carry
    what changed, so they never look whole. :meth:`seen` answers the first such key once.
    """

    __slots__ = ("_noticed", "_sent")

    def __init__(self) -> None:
        self._sent: dict[str, dict[str, object]] = {}
        self._noticed = False

    def seen(self, session_id: str, meta: Mapping[str, object]) -> str | None:
        """Take one object of ``session_id``'s; the key it lacks, the first time one looks
        whole, else ``None``."""
        if self._noticed:
            return None
        sent = self._sent.setdefault(session_id, {})
        if any(key in sent and sent[key] == value for key, value in meta.items()):
            missing = next((key for key in sent if key not in meta), None)
            if missing is not None:
                self._noticed = True
                self._sent.clear()  # said once: nothing more to keep
                return missing
        for key, value in meta.items():
            if value is None:
                sent.pop(key, None)
            else:
                sent[key] = value
        return None

    def forget(self, session_id: str) -> None:
        """``session_id``'s lifetime ended."""
        self._sent.pop(session_id, None)
