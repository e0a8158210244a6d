"""The one clip: every way rlmnb shortens text, pinned to what each caller showed before it was shared."""

from __future__ import annotations

from rlmnb._ground.text import clip


def test_a_text_that_fits_comes_back_unchanged() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("", 0, keep="both") == ""


def test_head_and_tail_count_a_string_marker() -> None:
    assert clip("abcdefghij", 5) == "abcd…"
    assert clip("abcdefghij", 5, keep="tail") == "…ghij"
    assert clip("abcdefghij", 6, marker="...") == "abc..."
    assert len(clip("x" * 1000, 80, marker="...")) == 80
    assert clip("abcdefghij", 0) == "…"


def test_both_ends_split_what_fits() -> None:
    assert clip("abcdefghij", 6, keep="both") == "ab…hij"
    assert clip("abcdefghij", 7, keep="both") == "abc…hij"


def test_a_marker_function_is_told_how_much_was_left_out_and_is_not_counted() -> None:
    seen: list[tuple[int, int]] = []

    def marker(omitted: int, total: int) -> str:
        seen.append((omitted, total))
        return f"[{omitted} of {total}]"

    assert clip("0123456789", 6, keep="both", marker=marker, head=4) == "0123[4 of 10]89"
    assert clip("0123456789", 5, keep="both", marker=marker, head=2, tail=2) == "01[6 of 10]89"
    assert seen == [(4, 10), (6, 10)]
