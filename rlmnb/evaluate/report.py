"""The summary of an evaluation: one line per (task, size, method) with mean score and mean cost per query.

Like the paper's table, cost is per query (the mean over instances); a mean over runs where some calls
had no known price is shown with a "+" (a lower bound), never as a plain zero.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..tasks import format_size
from .results import ResultRow


@dataclass(frozen=True)
class SummaryRow:
    """Means over the instances of one (task, size, method, models) cell."""

    task: str
    size: int
    method: str
    model: str
    sub_model: str
    n: int
    score: float
    cost_usd: float
    cost_complete: bool
    calls: float
    tokens: float
    wall_s: float
    errors: int
    root_input: float | None = None   # tokens per answer, split (means over the rows that know it)
    root_output: float | None = None
    sub_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SummaryRow:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def summarise(rows: Iterable[ResultRow]) -> list[SummaryRow]:
    """One SummaryRow per (task, size, method, model, sub_model), sorted by task, size, method."""
    cells: dict[tuple[str, int, str, str, str], list[ResultRow]] = defaultdict(list)
    for row in rows:
        cells[(row.task, row.size, row.method, row.model, row.sub_model)].append(row)
    out = []
    for (task, size, method, model, sub), group in cells.items():
        n = len(group)
        out.append(SummaryRow(
            task=task, size=size, method=method, model=model, sub_model=sub, n=n,
            score=sum(r.score for r in group) / n,
            cost_usd=sum(r.cost_usd or 0.0 for r in group) / n,
            cost_complete=all(r.cost_usd is not None and not r.unpriced_calls for r in group),
            calls=sum(r.calls for r in group) / n, tokens=sum(r.total_tokens for r in group) / n,
            wall_s=sum(r.wall_s for r in group) / n,
            errors=sum(1 for r in group if r.status not in ("submitted", "fallback")),
            root_input=_mean(r.root_input_tokens for r in group), root_output=_mean(r.root_output_tokens for r in group),
            sub_tokens=_mean(r.sub_tokens for r in group)))
    return sorted(out, key=lambda s: (s.task, s.size, s.method, s.model, s.sub_model))


def _mean(values: Iterable[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_table(summary: Iterable[SummaryRow]) -> str:
    """A Markdown table (readable as plain text too)."""
    rows = list(summary)
    if not rows:
        return "(no results yet)"
    show_models = len({(r.model, r.sub_model) for r in rows}) > 1
    head = ["task", "size", "method", *(["models"] if show_models else []), "n", "score", "cost/query",
            "calls", "tokens", "root in", "root out", "sub tokens", "time", "failed"]
    body = []
    for r in rows:
        cost = f"${r.cost_usd:.4f}" + ("" if r.cost_complete else "+")
        body.append([r.task, format_size(r.size), r.method, *([f"{r.model} / {r.sub_model}"] if show_models else []),
                     str(r.n), f"{100 * r.score:.1f}%", cost, f"{r.calls:.1f}", f"{r.tokens:,.0f}",
                     _count(r.root_input), _count(r.root_output), _count(r.sub_tokens), f"{r.wall_s:.1f} s",
                     str(r.errors)])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    numeric = {"n", "score", "cost/query", "calls", "tokens", "root in", "root out", "sub tokens", "time", "failed"}

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if h in numeric else c.ljust(w)
                                 for c, w, h in zip(cells, widths, head, strict=True)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if h in numeric else ("-" * (w + 2))
                          for w, h in zip(widths, head, strict=True)) + "|"
    return "\n".join([line(head), rule, *(line(b) for b in body)])
