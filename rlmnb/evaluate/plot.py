"""Score and cost against input size, one line per method (the shape of the paper's Figure 1).

matplotlib is optional: it is imported only here, and its absence is one clear error with the install
command. The figure is drawn without pyplot (no GUI backend, safe in threads and headless runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError
from ..tasks import format_size
from .report import SummaryRow

INSTALL = "pip install matplotlib  (or: pip install 'rlmnb[dev]')"


def plot_summary(summary: Iterable[SummaryRow], path: str | Path, *, title: str = "") -> Path:
    """Write a PNG: a row per task, score (left), mean cost per query (middle) and tokens per answer (right:
    all tokens, solid; the root's input, dashed) against input size."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(f"The evaluation plot needs matplotlib: {INSTALL}") from None
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
