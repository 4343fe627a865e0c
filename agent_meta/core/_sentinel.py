"""The ``OMITTED`` sentinel: "this field is not present", as opposed to ``None`` ("null").

ACP patch fields are three-state (omitted / ``null`` / value), so Python's ``None`` cannot stand
for "absent". An enum singleton is used because it pickles by name (so there is exactly one
instance, even across processes), has a readable repr, and narrows in type checkers with
``is OMITTED``.
"""

from __future__ import annotations

import enum
from typing import Final, Literal, TypeAlias

__all__ = ["OMITTED", "Omitted"]


class _OmittedType(enum.Enum):
    OMITTED = "OMITTED"

    def __repr__(self) -> str:
        return "OMITTED"

    __str__ = __repr__

    def __bool__(self) -> Literal[False]:
        # Falsy, like None and {}: ``if update:`` skips all three no-op-ish forms. Code that must
        # tell them apart uses ``is OMITTED`` / ``is None``, never truthiness.
        return False


OMITTED: Final = _OmittedType.OMITTED
"""The field is absent from the message (unchanged / unknown), distinct from ``None`` (null)."""

Omitted: TypeAlias = Literal[_OmittedType.OMITTED]
"""The type of :data:`OMITTED`, for annotations such as ``str | None | Omitted``."""
