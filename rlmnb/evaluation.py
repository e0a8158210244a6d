"""Evaluating methods on long-context tasks from Python: the public face of `rlmnb eval`.

    >>> from rlmnb.evaluation import EvalSpec, Setup, run_eval, summarise, format_table
    >>> spec = EvalSpec(tasks=["oolong"], sizes=["32k", "256k"], methods=["rlm", "direct"],
    ...                 setup=Setup("openai/gpt-5-mini", "openai/gpt-5-nano"), n=5, out="results/")
    >>> report = run_eval(spec, progress=True)
    >>> print(format_table(summarise(report.rows)))

Tasks are generated with `generate(task, size, seed=, index=)`; `OracleModel` is a scripted model that
knows a task's truth (a correct harness scores 100 % with it). Results are JSON lines (`ResultRow`), so
runs resume; `plot_summary` draws score and cost against input size (needs matplotlib).
"""

from __future__ import annotations

from rlmnb._eval import (
    METHOD_NAMES,
    EvalReport,
    EvalSpec,
    ResultRow,
    Setup,
    SummaryRow,
    estimate,
    format_table,
    plot_summary,
    read_rows,
    run_eval,
    summarise,
)
from rlmnb._eval.oracles import OracleModel
from rlmnb._eval.tasks import TASK_NAMES, Instance, generate

__all__ = ["METHOD_NAMES", "TASK_NAMES", "EvalReport", "EvalSpec", "Instance", "OracleModel", "ResultRow", "Setup",
           "SummaryRow", "estimate", "format_table", "generate", "plot_summary", "read_rows", "run_eval", "summarise"]
