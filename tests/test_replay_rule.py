"""Replay is replay (``core/_replay.py``, :class:`ReplayWindow`): in a load or resume window,
the agent's current info is told from its history by ``updatedAt`` alone (docs/sdk.md)."""

from __future__ import annotations

import pytest

from agent_meta import OMITTED
from agent_meta.core._replay import ReplayWindow

KNOWN = "2026-05-02T12:00:00Z"


def judged(stamps: list[object], known: object = KNOWN) -> list[bool]:
    window = ReplayWindow()
    return [window.is_current(stamp, lambda: known) for stamp in stamps]


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        (["2026-05-03T12:00:00Z"], [True]),
        (["2026-05-03T12:00:00.5+00:00", "2026-05-03T12:00:00.6z"], [True, True]),
        ([KNOWN], [False]),
        (["2026-05-01T12:00:00Z", "2026-05-03T12:00:00Z"], [False, True]),
        (["2026-05-04T00:00:00Z", "2026-05-03T00:00:00Z"], [True, False]),
        (["2026-05-02T13:00:00+02:00"], [False]),  # later on its face, an earlier instant
        (["2026-05-03T12:00:00"], [False]),  # no offset: not comparable
        ([None, OMITTED, 42, "yesterday"], [False, False, False, False]),
    ],
)
def test_only_an_updated_at_newer_than_everything_known_or_replayed_is_current(
    stamps: list[object], expected: list[bool]
) -> None:
    assert judged(stamps) == expected


@pytest.mark.parametrize("known", [OMITTED, None, "2026-05-02T12:00:00"])
def test_with_nothing_comparable_known_everything_is_history(known: object) -> None:
    assert judged(["2026-05-03T12:00:00Z"], known) == [False]


def test_a_stamp_judged_history_still_raises_the_bar() -> None:
    """What the window replayed counts, whatever was known: an older current info after a
    newer replayed stamp is history."""
    window = ReplayWindow()
    assert not window.is_current("2026-06-01T00:00:00Z", lambda: OMITTED)
    assert not window.is_current("2026-05-03T12:00:00Z", lambda: KNOWN)


def test_the_known_state_is_asked_only_when_the_answer_depends_on_it() -> None:
    asked: list[bool] = []

    def known() -> object:
        asked.append(True)
        return KNOWN

    window = ReplayWindow()
    window.is_current(None, known)
    window.is_current("2026-05-03T12:00:00Z", known)
    window.is_current("2026-05-03T11:00:00Z", known)
    assert asked == [True]
