"""The sub-call view of a trace tool, as plain functions: sort, filter and search a run's sub-calls.

The live widget's trace panel reads these; the JupyterLab extension has the same sorts, filters and
words (extension/src/trace.ts). Calls are the dicts of `RunTree.call_views`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlmnb.views._format import slow_cutoff

__all__ = ["FILTERS", "SORTS", "call_tags", "search_scope", "select_calls", "slow_threshold"]

Call = dict[str, Any]

SORTS: dict[str, tuple[str, Callable[[Call], float]]] = {
    "order": ("in order sent", lambda c: float(c["started"])),
    # latency is the provider's time: a call still out sorts first, a cached one (no provider time) last
    "latency": ("slowest first", lambda c: -(c["latency"] if c["latency"] is not None
                                             else 0.0 if c["done"] else float("inf"))),
    "queued": ("longest queued first", lambda c: -float(c.get("queued") or 0.0)),
    "tokens": ("most tokens first", lambda c: -float((c["input_tokens"] or 0) + (c["output_tokens"] or 0))),
    "cost": ("costliest first", lambda c: -float(c["cost"] or 0.0)),
}


def _slow(c: Call, slow: float | None) -> bool:
    return slow is not None and c["latency"] is not None and c["latency"] > slow and not c["cached"]


FILTERS: dict[str, tuple[str, Callable[[Call, float | None], bool]]] = {
    "all": ("all calls", lambda c, slow: True),
    "error": ("errors", lambda c, slow: bool(c["error"]) or not c["done"]),
    "retried": ("retried", lambda c, slow: c["retries"] > 0),
    "rate": ("rate-limited", lambda c, slow: c["rate_limited"] > 0),
    "cached": ("cached", lambda c, slow: bool(c["cached"])),
    "slow": ("slow outliers", _slow),  # above p95 and 1.5x the median (slow_cutoff)
}


def slow_threshold(calls: list[Call]) -> float | None:
    """The latency above which a call counts as slow (`slow_cutoff`: above p95 and 1.5x the median; None below
    20 replies: too few to say)."""
    return slow_cutoff(sorted(c["latency"] for c in calls if c["latency"] is not None))


def call_tags(c: Call, slow: float | None) -> list[str]:
    """What a call is marked with in the list and on the timeline."""
    tags = []
    if not c["done"]:
        tags.append("no reply")
    if c["error"]:
        tags.append("error")
    if c["rate_limited"]:
        tags.append(f"rate-limited ×{c['rate_limited']}")
    if c["retries"]:
        tags.append(f"retried ×{c['retries']}")
    if c.get("journal"):
        tags.append("from the journal")
    elif c["cached"]:
        tags.append("cached, no provider time" if c["done"] and c["latency"] is None else "cached")
    if _slow(c, slow):
        tags.append("slow")
    return tags


def select_calls(calls: list[Call], *, query: str = "", sort: str = "order", keep: str = "all") -> list[Call]:
    """The calls that pass the filter `keep` and contain `query` (prompt, reply or error, any case),
    sorted by `sort` (ties keep the order sent)."""
    slow = slow_threshold(calls)
    test = FILTERS[keep][1]
    found = [c for c in calls if test(c, slow)]
    needle = query.strip().lower()
    if needle:
        found = [c for c in found if needle in (c["prompt"] or "").lower() or needle in (c["reply"] or "").lower()
                 or needle in (c["error"] or "").lower()]
    key = SORTS[sort][1]
    return sorted(found, key=key)  # sorted() is stable: ties stay in the order sent


def search_scope(calls: list[Call]) -> str:
    """What the search reads, said plainly: a long prompt is recorded as its start and end only."""
    clipped = [c for c in calls if (c["prompt_chars"] or 0) > len(c["prompt"] or "")]
    n = len(calls)
    if not clipped:
        return f"searches the whole prompt, reply and error of each of the {n:,} sub-call{'' if n == 1 else 's'}"
    kept = max(len(c["prompt"] or "") for c in clipped)
    return (f"searches replies and errors whole, and prompts as recorded: {len(clipped):,} of the {n:,} prompts "
            f"are longer than the record keeps (about {kept:,} characters, their start and end), so a match in "
            f"their middle is not found")
