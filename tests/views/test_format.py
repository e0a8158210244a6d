"""The views' clip is the one clip (`rlmnb._ground.text.clip`) with the views' marker, and shows what it showed."""

from __future__ import annotations

from rlmnb.views import clip


def former_clip(text: str, limit: int, left_out: str = "not shown") -> str:
    """The views' own clip before it was the shared one, kept here to pin its output."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n… [{len(text) - limit:,} characters {left_out}] …\n{text[-tail:]}"


def test_the_views_clip_shows_what_it_showed() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(5_000))
    for limit in (1, 2, 3, 7, 80, 120, 400, 4_999, 5_000, 6_000):
        for size in (0, 1, 50, 121, 5_000):
            assert clip(text[:size], limit) == former_clip(text[:size], limit)
            assert clip(text[:size], limit, left_out="not recorded") == former_clip(text[:size], limit, "not recorded")
    assert clip("0123456789", 6) == "0123\n… [4 characters not shown] …\n89"
