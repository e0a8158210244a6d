"""Evaluating methods on the `rlmnb._eval.tasks` suite: `rlm`, `rlm_no_sub`, `direct` and peer packages.

    >>> from rlmnb._eval import EvalSpec, Setup, run_eval, summarise, format_table
    >>> spec = EvalSpec(tasks=["oolong"], sizes=["32k", "256k"], methods=["rlm", "direct"],
    ...                 setup=Setup("openai/gpt-5-mini", "openai/gpt-5-nano"), n=5, out="results/")
    >>> report = run_eval(spec, progress=True)
    >>> print(format_table(summarise(report.rows)))

The same as `rlmnb eval` on the command line. Results are JSON lines in `out/results.jsonl`
(`ResultRow`), so runs resume; `plot_summary` draws score and cost against input size (matplotlib).
"""

from __future__ import annotations

from rlmnb._eval.methods import METHOD_NAMES, Outcome, Setup, get_method
from rlmnb._eval.report import SummaryRow, format_table, plot_summary, summarise
from rlmnb._eval.results import ResultRow, ResultsFile, read_rows
from rlmnb._eval.runner import EvalReport, EvalSpec, estimate, plan, run_eval

__all__ = ["METHOD_NAMES", "EvalReport", "EvalSpec", "Outcome", "ResultRow", "ResultsFile", "Setup", "SummaryRow",
           "estimate", "format_table", "get_method", "plan", "plot_summary", "read_rows", "run_eval", "summarise"]
