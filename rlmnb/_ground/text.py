"""Shortening and cutting text: the one way rlmnb clips a string, and the one way it cuts a text into parts.

Entry points: `clip(text, limit, keep=...)` and `parts_of(text, part_tokens)` / `cut_evenly(text, count)`.
Invariants of `clip`: a text within `limit` comes back unchanged; otherwise the result keeps the head, the tail
or both ends and puts `marker` where text was left out. A string marker counts against `limit` (the result is
at most `limit` characters); a marker given as a function of (omitted, total) says how much was left out and
is not counted. Invariants of the cuts: the spans are in order, touch, and cover the text exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from rlmnb._ground.tokens import count_tokens

Marker = str | Callable[[int, int], str]


def clip(text: str, limit: int, *, keep: Literal["head", "tail", "both"] = "head", marker: Marker = "…",
         head: int | None = None, tail: int | None = None) -> str:
    """`text` within `limit` characters, `marker` where the rest was.

    Args:
        text: the text to shorten.
        limit: the most characters kept (with a string marker, the most characters returned).
        keep: "head" keeps the start, "tail" the end, "both" the start and the end.
        marker: what stands for the left-out text: a string, or a function (omitted, total) -> str.
        head: with keep="both", characters kept from the start (default: half of what fits).
        tail: with keep="both", characters kept from the end (default: what fits after `head`).

    Returns:
        The text itself when it fits, else the clipped text.
    """
    if len(text) <= limit:
        return text
    fit = max(0, limit - len(marker)) if isinstance(marker, str) else max(0, limit)
    if keep == "head":
        left, right = fit, 0
    elif keep == "tail":
        left, right = 0, fit
    else:
        left = fit // 2 if head is None else head
        right = fit - left if tail is None else tail
    omitted = len(text) - left - right
    said = marker if isinstance(marker, str) else marker(omitted, len(text))
    return text[:left] + said + (text[len(text) - right:] if right else "")


def parts_of(text: str, part_tokens: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `text`, even, each at most about `part_tokens` tokens, cut at a line break
    (else a space) within a tenth of a part of the even cut, and covering the text exactly.

    Args:
        text: the text to cut.
        part_tokens: about the most tokens a part may hold (at least 1).

    Returns:
        The spans, at least one; `[(0, len(text))]` when the text fits one part (or is empty).
    """
    total = max(1, count_tokens(text))
    size = max(1, int(part_tokens * len(text) / total * 0.9))  # the 0.9 leaves room for cuts moved later
    return cut_evenly(text, max(1, math.ceil(len(text) / size)))


def cut_evenly(text: str, count: int) -> list[tuple[int, int]]:
    """`count` (start, end) character spans of `text` of about equal length, each cut at a line break (else a
    space) within a tenth of a part of the even cut, covering the text exactly.

    Args:
        text: the text to cut.
        count: how many parts (at least 1, at most `len(text)`, so that no part is empty).

    Returns:
        The spans in order; each starts where the one before ends.

    Raises:
        ValueError: `count` is below 1 or above the text's length.
    """
    if count < 1 or (count > len(text) and count > 1):
        raise ValueError(f"cut_evenly() cuts a text of {len(text):,} characters into 1 to {max(1, len(text)):,} "
                         f"parts; pass a count in that range, not {count}.")
    slack = len(text) // count // 10
    cuts = [0]
    for i in range(1, count):
        target = round(i * len(text) / count)
        lo, hi = max(cuts[-1] + 1, target - slack), min(len(text) - 1, target + slack)
        cut = target
        for sep in ("\n", " "):
            before, after = text.rfind(sep, lo, target), text.find(sep, target, hi)
            near = [p for p in (before, after) if p >= 0]
            if near:
                cut = min(near, key=lambda p: abs(p - target)) + 1
                break
        cuts.append(cut)
    cuts.append(len(text))
    return list(zip(cuts, cuts[1:], strict=False))


__all__ = ["Marker", "clip", "cut_evenly", "parts_of"]
