"""Hypothesis strategies shared by the test suite (JSON values, ``_meta`` states and updates).

Import them as ``from tests.strategies import ...``.

Keys are drawn mostly from a small pool so that updates collide with each other and with stored
state often; :data:`stored_only_keys` are never used by updates, so laws quantified over stored
states also cover keys the updates never mention.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from agent_meta import OMITTED, JsonObject, JsonValue, Omitted, SessionInfo, SessionInfoPatch

if TYPE_CHECKING:
    from agent_meta import MetaPatch

__all__ = [
    "json_scalars",
    "json_values",
    "meta_keys",
    "meta_updates",
    "non_null_json_values",
    "patch_objects",
    "rfc3339_timestamps",
    "session_info_patches",
    "session_infos",
    "stored_meta",
    "stored_only_keys",
    "texts",
    "timestamps",
]

json_scalars: st.SearchStrategy[JsonValue] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: large ints must survive
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
"""Any JSON scalar, ``None`` included."""


def _containers(children: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[JsonValue]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=4), children, max_size=4),
    )


json_values: st.SearchStrategy[JsonValue] = st.recursive(json_scalars, _containers, max_leaves=12)
"""Any JSON value (``None`` included, also nested inside containers)."""

non_null_json_values: st.SearchStrategy[JsonValue] = json_values.filter(lambda v: v is not None)
"""A JSON value that may be stored under a top-level ``_meta`` key (anything but ``null``)."""

meta_keys: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(["a", "b", "c", "zed.dev/debugMode", "agent-meta", ""]),
    st.text(max_size=3),
)
"""Top-level ``_meta`` keys used by updates: mostly a small colliding pool."""

stored_only_keys: st.SearchStrategy[str] = st.sampled_from(
    ["stored-only/1", "stored-only/2", "unknown.example/key"]
)
"""Keys only stored states use (no update mentions them)."""

stored_meta: st.SearchStrategy[JsonObject | None] = st.one_of(
    st.none(),
    st.dictionaries(st.one_of(meta_keys, stored_only_keys), non_null_json_values, max_size=6),
)
"""Stored metadata as a receiver may hold it: ``None`` or an object without ``null`` keys.

``{}`` is included on purpose (the same as no metadata).
"""

patch_objects: st.SearchStrategy[JsonObject] = st.dictionaries(
    meta_keys, st.one_of(st.none(), json_values), max_size=5
)
"""A ``_meta`` patch object: values may be ``None`` (removal) or any JSON value."""

meta_updates: st.SearchStrategy[MetaPatch] = st.one_of(st.just(OMITTED), st.none(), patch_objects)
"""A ``_meta`` update: ``OMITTED``, ``None`` (clear) or a patch object."""


def _as_rfc3339(moment: datetime.datetime, offset_minutes: int, zulu: bool) -> str:
    if zulu:
        return moment.isoformat() + "Z"
    zone = datetime.timezone(datetime.timedelta(minutes=offset_minutes))
    return moment.replace(tzinfo=zone).isoformat()


rfc3339_timestamps: st.SearchStrategy[str] = st.builds(
    _as_rfc3339,
    st.datetimes(),
    st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
    st.booleans(),
)
"""RFC 3339 date-times with an offset (``Z`` or ``+HH:MM``), with and without fractions."""

texts: st.SearchStrategy[str | Omitted | None] = st.one_of(
    st.just(OMITTED), st.none(), st.text(max_size=6)
)
"""A three-state ``title``: ``OMITTED``, ``None`` or a string."""

timestamps: st.SearchStrategy[str | Omitted | None] = st.one_of(
    st.just(OMITTED), st.none(), rfc3339_timestamps
)
"""A three-state ``updatedAt``: ``OMITTED``, ``None`` or an RFC 3339 string."""


@st.composite
def session_info_patches(draw: st.DrawFn) -> SessionInfoPatch:
    """A valid :class:`SessionInfoPatch` with every field independently three-state."""
    return SessionInfoPatch(
        title=draw(texts),
        updated_at=draw(timestamps),
        meta=draw(meta_updates),
    )


@st.composite
def session_infos(draw: st.DrawFn) -> SessionInfo:
    """A valid :class:`SessionInfo` (title/updatedAt may still be unknown, i.e. ``OMITTED``)."""
    return SessionInfo(
        title=draw(texts),
        updated_at=draw(timestamps),
        meta=draw(stored_meta),
    )
