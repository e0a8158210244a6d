"""What the root model reads: an observation's output is clipped in the middle, saying how much was left out."""

from __future__ import annotations

import pytest

from rlmnb._engine.conversation import clip_middle
from rlmnb._ground.prompts import render


def former_clip_middle(text: str, limit: int) -> str:
    """The observation's own clip before it used rlmnb._ground.text.clip, kept as the reference."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    omitted = len(text) - 2 * half
    return text[:half] + render("truncated", omitted=f"{omitted:,}", total=f"{len(text):,}") + text[-half:]


@pytest.mark.parametrize("limit", [0, 1, 2, 7, 100, 999, 1_000, 1_001, 5_000])
def test_clip_middle_keeps_both_ends_as_before(limit: int) -> None:
    text = "".join(chr(97 + i % 26) for i in range(3_001))
    assert clip_middle(text, limit) == former_clip_middle(text, limit)
    assert clip_middle(text[:limit], limit) == text[:limit]


def test_clip_middle_says_how_much_was_left_out() -> None:
    clipped = clip_middle("x" * 10_000, 100)
    assert clipped.startswith("x" * 50) and clipped.endswith("x" * 50)
    assert "9,900" in clipped and "10,000" in clipped
