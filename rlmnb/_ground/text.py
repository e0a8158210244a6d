"""Clipping text to a length: the one way rlmnb shortens a string for a prompt, a summary or a view.

Entry point: `clip(text, limit, keep=...)`. Invariants: a text within `limit` comes back unchanged;
otherwise the result keeps the head, the tail or both ends and puts `marker` where text was left
out. A string marker counts against `limit` (the result is at most `limit` characters); a marker
given as a function of (omitted, total) says how much was left out and is not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

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


__all__ = ["Marker", "clip"]
