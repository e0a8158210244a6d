"""How an evaluation is shown: its summary table, a terminal progress bar while it runs, and a plot after.

- `summarise` / `format_table`: one line per (task, size, method) with mean score, mean cost per query and
  mean tokens per answer (all, and split into root input, root output and sub-calls where the method can tell),
  and tokens per point (all tokens over the scores' sum: what one right answer cost; "-" when nothing scored);
  when any run read the provider's prompt cache, also the cached input tokens per answer and the money they
  saved per query.
  Like the paper's table, cost is per query (the mean over instances); a mean over runs where some calls
  had no known price is shown with a "+" (a lower bound), never as a plain zero.
- `ProgressBar`: one terminal line redrawn with a carriage return (no dependency).
- `plot_summary`: score, cost and tokens per answer against input size, one line per method (the shape of
  the paper's Figure 1). matplotlib is optional: it is imported only there, and its absence is one clear error with
  the install command. The figure is drawn without pyplot (no GUI backend, safe in threads and headless).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from rlmnb._eval.results import ResultRow
from rlmnb._eval.tasks import format_size
from rlmnb._ground.errors import ConfigError

__all__ = ["PLOT_INSTALL", "ProgressBar", "SummaryRow", "format_table", "plot_summary", "summarise"]


# ---- the summary table ------------------------------------------------------------------------------


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
    cached_input: float = 0.0   # input tokens per answer read from the provider's prompt cache
    saved_usd: float = 0.0      # what the prompt cache saved, per query
    tokens_per_point: float | None = None  # all the cell's tokens over its scores' sum (None: nothing scored)

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
            sub_tokens=_mean(r.sub_tokens for r in group),
            cached_input=sum(r.cached_input_tokens for r in group) / n, saved_usd=sum(r.saved_usd for r in group) / n,
            tokens_per_point=_per_point(group)))
    return sorted(out, key=lambda s: (s.task, s.size, s.method, s.model, s.sub_model))


def _per_point(group: list[ResultRow]) -> float | None:
    points = sum(r.score for r in group)
    return sum(r.total_tokens for r in group) / points if points > 0 else None


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
    show_cache = any(r.cached_input for r in rows)  # prompt caching: shown only where some run used it
    cache_head = ["cached in", "saved/query"] if show_cache else []
    head = ["task", "size", "method", *(["models"] if show_models else []), "n", "score", "cost/query",
            "calls", "tokens", "tokens/point", "root in", "root out", "sub tokens", *cache_head, "time", "failed"]
    body = []
    for r in rows:
        cost = f"${r.cost_usd:.4f}" + ("" if r.cost_complete else "+")
        cache = [_count(r.cached_input), f"${r.saved_usd:.4f}"] if show_cache else []
        body.append([r.task, format_size(r.size), r.method, *([f"{r.model} / {r.sub_model}"] if show_models else []),
                     str(r.n), f"{100 * r.score:.1f}%", cost, f"{r.calls:.1f}", f"{r.tokens:,.0f}",
                     _count(r.tokens_per_point),
                     _count(r.root_input), _count(r.root_output), _count(r.sub_tokens), *cache, f"{r.wall_s:.1f} s",
                     str(r.errors)])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    numeric = {"n", "score", "cost/query", "calls", "tokens", "tokens/point", "root in", "root out", "sub tokens",
               "cached in", "saved/query", "time", "failed"}

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if h in numeric else c.ljust(w)
                                 for c, w, h in zip(cells, widths, head, strict=True)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if h in numeric else ("-" * (w + 2))
                          for w, h in zip(widths, head, strict=True)) + "|"
    return "\n".join([line(head), rule, *(line(b) for b in body)])


# ---- while it runs: the progress bar -----------------------------------------------------------------


class ProgressBar:
    """`done/total`, the run in flight, the mean score so far, the money spent and an ETA."""

    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 24, enabled: bool = True) -> None:
        self.total = max(0, total)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled and total > 0
        self.done = 0
        self.scores: list[float] = []
        self.spent = 0.0
        self.started = time.monotonic()
        self._last = 0

    def start(self, label: str) -> None:
        self._draw(label)

    def advance(self, label: str, score: float, cost: float) -> None:
        self.done += 1
        self.scores.append(score)
        self.spent += cost
        self._draw(label)

    def close(self, message: str = "") -> None:
        if self.enabled:
            self.stream.write("\r" + " " * self._last + "\r")
            if message:
                self.stream.write(message + "\n")
            self.stream.flush()

    def _draw(self, label: str) -> None:
        if not self.enabled:
            return
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        mean = f" mean {100 * sum(self.scores) / len(self.scores):.0f}%" if self.scores else ""
        elapsed = time.monotonic() - self.started
        eta = ""
        if self.done and self.done < self.total:
            eta = f" ETA {_clock(elapsed / self.done * (self.total - self.done))}"
        text = f"[{bar}] {self.done}/{self.total} {label}{mean} ${self.spent:.4f}{eta}"
        pad = max(0, self._last - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last = len(text)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


# ---- after: the plot ---------------------------------------------------------------------------------

PLOT_INSTALL = "pip install matplotlib  (or: pip install 'rlmnb[dev]')"


def plot_summary(summary: Iterable[SummaryRow], path: str | Path, *, title: str = "") -> Path:
    """Write a PNG: a row per task, score (left), mean cost per query (middle) and tokens per answer (right:
    all tokens, solid; the root's input, dashed) against input size."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(f"The evaluation plot needs matplotlib: {PLOT_INSTALL}") from None
    rows = list(summary)
    if not rows:
        raise ConfigError("There are no results to plot yet: run the evaluation first.")
    tasks = sorted({r.task for r in rows})
    fig = Figure(figsize=(15, 3.2 * len(tasks)), dpi=100, layout="constrained")
    axes = fig.subplots(len(tasks), 3, squeeze=False)
    for row_axes, task in zip(axes, tasks, strict=True):
        score_ax, cost_ax, token_ax = row_axes
        cells = [r for r in rows if r.task == task]
        for label in sorted({_label(r, rows) for r in cells}):
            line = sorted((r for r in cells if _label(r, rows) == label), key=lambda r: r.size)
            sizes = [r.size for r in line]
            score_ax.plot(sizes, [100 * r.score for r in line], marker="o", label=label)
            cost_ax.plot(sizes, [r.cost_usd for r in line], marker="o", label=label)
            drawn = token_ax.plot(sizes, [r.tokens for r in line], marker="o", label=label)
            known = [r for r in line if r.root_input is not None]
            if known:
                token_ax.plot([r.size for r in known], [r.root_input for r in known], linestyle="--",
                              color=drawn[0].get_color())
        sizes = sorted({r.size for r in cells})
        for ax in (score_ax, cost_ax, token_ax):
            ax.set_xscale("log")
            ax.set_xticks(sizes, [format_size(s) for s in sizes])
            ax.minorticks_off()
            ax.set_xlabel("input size (tokens)")
            ax.grid(True, alpha=0.3)
        score_ax.set_ylim(-5, 105)
        score_ax.set_ylabel("score (%)")
        score_ax.set_title(f"{task}: score")
        cost_ax.set_ylabel("cost per query (USD)")
        cost_ax.set_title(f"{task}: cost")
        token_ax.set_yscale("log")
        token_ax.set_ylabel("tokens per answer")
        token_ax.set_title(f"{task}: tokens (dashed: root input)")
        score_ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, format="png")
    return target


def _label(row: SummaryRow, rows: list[SummaryRow]) -> str:
    several = len({(r.model, r.sub_model) for r in rows}) > 1
    return f"{row.method} ({row.model})" if several else row.method
