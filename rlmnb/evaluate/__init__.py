"""Evaluating methods on the `rlmnb.tasks` suite: `rlm`, `rlm_no_sub`, `direct` and peer packages.

    >>> from rlmnb.evaluate import EvalSpec, Setup, run_eval, summarise, format_table
    >>> spec = EvalSpec(tasks=["oolong"], sizes=["32k", "256k"], methods=["rlm", "direct"],
    ...                 setup=Setup("openai/gpt-5-mini", "openai/gpt-5-nano"), n=5, out="results/")
    >>> report = run_eval(spec, progress=True)
    >>> print(format_table(summarise(report.rows)))

The same as `rlmnb eval` on the command line. Results are JSON lines in `out/results.jsonl`
(`ResultRow`), so runs resume; `plot_summary` draws score and cost against input size (matplotlib).
"""

from __future__ import annotations

from .choose import METHOD_NAMES, get_method
from .methods import Outcome, Setup
from .plot import plot_summary
from .report import SummaryRow, format_table, summarise
from .results import ResultRow, ResultsFile, read_rows
from .runner import EvalReport, EvalSpec, estimate, plan, run_eval

__all__ = ["METHOD_NAMES", "EvalReport", "EvalSpec", "Outcome", "ResultRow", "ResultsFile", "Setup", "SummaryRow",
           "estimate", "format_table", "get_method", "plan", "plot_summary", "read_rows", "run_eval", "summarise"]
