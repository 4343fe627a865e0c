"""RFC 3339 timestamps, as ACP v2 requires for ``updatedAt``.

The v2 TypeScript client silently drops an ``updatedAt`` without a UTC offset, so the owner
rejects one at the call site instead of letting it vanish on the client. RFC 3339 allows a
lowercase ``t`` and ``z``, which that client also drops, so the owner writes the uppercase form
(:func:`normalize_rfc3339`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datetime

__all__ = ["is_rfc3339", "normalize_rfc3339", "rfc3339_instant"]

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def is_rfc3339(text: str) -> bool:
    """True for an RFC 3339 date-time with an offset, e.g. ``2026-11-30T12:00:00Z``."""
    if not _RFC3339.fullmatch(text):
        return False
    import datetime  # here: not on the path of every start (docs/performance.md, section 10)

    normalized = text.upper().replace("Z", "+00:00")
    try:
        datetime.datetime.fromisoformat(normalized)
    except ValueError:
        return False
    return True


def normalize_rfc3339(text: str) -> str:
    """The wire form of an RFC 3339 date-time: ``T`` and ``Z`` in uppercase (``t``/``z`` are
    valid RFC 3339, but the ACP v2 TypeScript client drops them). Other text is returned as is.
    """
    if not is_rfc3339(text):
        return text
    return text.upper()  # the only letters an RFC 3339 date-time can hold are T and Z


def rfc3339_instant(value: object) -> datetime.datetime | None:
    """The instant an RFC 3339 date-time with an offset names (an aware datetime), else
    ``None``: for anything else, a local time without an offset included (not comparable)."""
    if not isinstance(value, str) or not is_rfc3339(value):
        return None
    import datetime

    return datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
