"""The reference agents cut a long stored reply into chunks that each fit a frame
(``agents/_common/_replay.split_text``): the longest pieces whose escaped JSON fits the budget."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_meta.agents._common._replay import split_text


def reference_split(text: str, budget: int) -> list[str]:
    """The same cut, character by character: what split_text must agree with."""
    pieces: list[str] = []
    start = used = 0
    for index, char in enumerate(text):
        size = len(json.dumps(char, ensure_ascii=True)) - 2
        if used + size > budget:
            pieces.append(text[start:index])
            start, used = index, 0
        used += size
    pieces.append(text[start:])
    return pieces


@given(
    st.text(alphabet=st.sampled_from(["a", '"', "\\", "\n", "\x01", "é", "\u2028", "😀"])),
    st.integers(min_value=16, max_value=64),
)
def test_the_cut_is_the_character_by_character_one(text: str, budget: int) -> None:
    pieces = split_text(text, budget)
    assert pieces == reference_split(text, budget)
    assert "".join(pieces) == text
    assert all(len(json.dumps(piece, ensure_ascii=True)) - 2 <= budget for piece in pieces)


def test_a_reply_of_megabytes_is_cut_into_full_pieces() -> None:
    text = "usage: /meta set KEY JSON\n" * 60_000  # 1.6 MB of reply, escapes included
    pieces = split_text(text, 100_000)
    assert "".join(pieces) == text
    assert len(pieces) == 17
    start = 0
    for piece in pieces[:-1]:  # each as long as it can be: one character more would not fit
        start += len(piece)
        assert len(json.dumps(piece)) - 2 <= 100_000 < len(json.dumps(piece + text[start])) - 2


def test_a_budget_too_small_for_one_character_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold a chunk"):
        split_text("abc", 15)
