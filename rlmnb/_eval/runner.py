"""Running an evaluation: every method on the same instances, resumable, within a dollar limit.

Runs go instance by instance (each instance is generated once and every method runs on it), appending
one JSON line per (task, size, method, instance) to `<out>/results.jsonl`. A key already in the file is
skipped, so a rerun after an interruption picks up where it stopped. An rlm method's trajectory is saved as
`<out>/trajectories/<task>-<size>-<method>-<index>.json` (its path in the row's `extra["trajectory"]`), so
the runs behind a score can be read. With `max_cost`, the evaluation
stops before a run whose lean estimate would take the money spent (this evaluation's rows in the file,
resumed ones included) past the limit, and each RLM run is capped at what is left.

Entry points: `run_eval(spec)`; `plan` and `estimate` (each run's cost bracket, `estimate_job`: RLM methods
use the same bracketing estimate as `%%rlm --dry-run`, a lean run and a whole-budget run; `direct` is one
call whose prompt is the input cut to the window; peers are estimated like `rlm`) run no model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rlmnb._eval.cost import JobCost, priced
from rlmnb._eval.methods import (
    PEERS,
    REPLY_TOKENS,
    DirectMethod,
    Method,
    RLMMethod,
    Setup,
    get_method,
    run_apart,
)
from rlmnb._eval.report import ProgressBar
from rlmnb._eval.results import ResultRow, ResultsFile, latest, now, short_json
from rlmnb._eval.tasks import Instance, format_size, get_task, parse_size
from rlmnb._eval.tokens import TokenSplit
from rlmnb._ground.errors import ConfigError

__all__ = ["EvalReport", "EvalSpec", "Job", "estimate", "estimate_job", "plan", "run_eval",
           "run_one"]


@dataclass(frozen=True)
class EvalSpec:
    """What to evaluate. Sizes are token counts or strings like "32k"; `n` instances per (task, size)."""

    tasks: Sequence[str]
    sizes: Sequence[int | str]
    methods: Sequence[str]
    setup: Setup
    n: int = 5
    seed: int = 0
    out: str | Path | None = None
    max_cost: float | None = None

    def checked(self) -> EvalSpec:
        """Validated, sizes as ints; ConfigError with one sentence otherwise (before any model call)."""
        if not self.tasks or not self.sizes or not self.methods:
            raise ConfigError("an evaluation needs at least one task, one size and one method.")
        for task in self.tasks:
            get_task(task)
        for method in self.methods:
            get_method(method)
        if self.n < 1:
            raise ConfigError(f"n must be at least 1 instance per task and size, got {self.n}.")
        if self.max_cost is not None and self.max_cost <= 0:
            raise ConfigError(f"max_cost must be a positive number of dollars, got {self.max_cost}.")
        sizes = tuple(parse_size(s) for s in self.sizes)
        return EvalSpec(tuple(get_task(t).name for t in self.tasks), sizes,
                        tuple(get_method(m).name for m in self.methods), self.setup, self.n, self.seed, self.out,
                        self.max_cost)


@dataclass(frozen=True)
class Job:
    task: str
    size: int
    index: int
    method: str


@dataclass
class EvalReport:
    """What `run_eval` did: every row of this evaluation (resumed ones too), and why it stopped early."""

    rows: list[ResultRow]
    ran: int = 0
    skipped: int = 0
    stopped: str = ""
    spent_usd: float = 0.0
    estimates: dict[tuple[str, int, str], JobCost] = field(default_factory=dict)


def plan(spec: EvalSpec) -> list[Job]:
    """Every run of the evaluation, instance by instance, methods side by side.

    Tasks of given rows (`rlmnb._eval.tasks.rows`) run only as many instances as they have at a size, and
    those with `fixed_size` (JSON Lines) only at the first size.
    """
    return [Job(task, int(size), index, method) for size in _sizes(spec) for task in spec.tasks
            if size in _task_sizes(task, spec) for index in range(_count(task, int(size), spec.n))
            for method in spec.methods]


def _sizes(spec: EvalSpec) -> list[int]:
    return [int(s) for s in spec.sizes]


def _task_sizes(task: str, spec: EvalSpec) -> list[int]:
    return _sizes(spec)[:1] if getattr(get_task(task), "fixed_size", False) else _sizes(spec)


def _count(task: str, size: int, n: int) -> int:
    count = getattr(get_task(task), "count", None)
    return min(n, int(count(size))) if callable(count) else n


def _key(job: Job, spec: EvalSpec) -> tuple[str, int, str, int, int, str, str]:
    return (job.task, job.size, job.method, job.index, spec.seed, spec.setup.model_label, spec.setup.sub_label)


class _Instances:
    """Generates each instance once, keeping only the one in use (inputs reach tens of MB)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._key: tuple[str, int, int] | None = None
        self._value: Instance | None = None

    def get(self, task: str, size: int, index: int) -> Instance:
        if self._key != (task, size, index) or self._value is None:
            self._value = None
            self._value = get_task(task).generate(size, seed=self.seed, index=index)
            self._key = (task, size, index)
        return self._value


def estimate(spec: EvalSpec) -> dict[tuple[str, int, str], JobCost]:
    """The cost bracket of one run per (task, size, method), from instance 0 (no model is called)."""
    spec = spec.checked()
    instances = _Instances(spec.seed)
    out: dict[tuple[str, int, str], JobCost] = {}
    for size in spec.sizes:
        for task in spec.tasks:
            if int(size) not in _task_sizes(task, spec) or _count(task, int(size), spec.n) == 0:
                continue
            instance = instances.get(task, int(size), 0)
            for method in spec.methods:
                out[(task, int(size), method)] = estimate_job(get_method(method), instance, spec.setup)
    return out


def estimate_job(method: Any, instance: Instance, setup: Setup) -> JobCost:
    """The cost bracket of `method` on `instance` (no model is called)."""
    from rlmnb._engine.estimate import price_of

    if isinstance(method, DirectMethod):
        price = price_of(priced(setup.model))
        if price is None:
            return JobCost(None, None)
        prompt = min(instance.tokens, method.window(setup)) + 200
        cost = price.cost(prompt, REPLY_TOKENS // 10)
        return JobCost(cost, price.cost(prompt, REPLY_TOKENS))
    rlm_method = method if isinstance(method, RLMMethod) else RLMMethod("rlm")
    rlm = rlm_method.rlm(setup, None)
    from rlmnb._engine.estimate import estimate_run

    first = _first_prompt_tokens(rlm, instance)
    estimate = estimate_run(first_prompt_tokens=first, data_tokens=instance.tokens if rlm_method.sub_calls else 0,
                            config=rlm.config, model=priced(rlm.model), sub_model=priced(rlm.sub_model))
    return JobCost(estimate.low_usd, estimate.high_usd)


def _first_prompt_tokens(rlm: Any, instance: Instance) -> int:
    """Tokens of the first root request: the system prompt, the question and the inputs summary."""
    report = rlm.dry_run(instance.question, **instance.inputs)
    return int(report["tokens"])


def run_eval(spec: EvalSpec, *, progress: bool | TextIO = False,
             on_row: Callable[[ResultRow], None] | None = None) -> EvalReport:
    """Run (or resume) the evaluation; KeyboardInterrupt stops it after the rows already written."""
    spec = spec.checked()
    results = ResultsFile(spec.out) if spec.out is not None else None
    done = latest(results.rows()) if results is not None else {}
    jobs = plan(spec)
    keys = {_key(job, spec) for job in jobs}
    rows = [row for key, row in done.items() if key in keys]
    report = EvalReport(rows=rows, skipped=len(rows), spent_usd=sum(r.cost_usd or 0.0 for r in rows))
    todo = [job for job in jobs if _key(job, spec) not in done]
    if spec.max_cost is not None:
        report.estimates = estimate(spec)
        _check_priced(report.estimates, spec)
    bar = ProgressBar(len(todo), enabled=bool(progress),
                      stream=progress if progress not in (True, False) else None)  # type: ignore[arg-type]
    instances = _Instances(spec.seed)
    try:
        for job in todo:
            label = f"{job.task} {format_size(job.size)} {job.method} #{job.index}"
            left = None if spec.max_cost is None else spec.max_cost - report.spent_usd
            if left is not None:
                lean = report.estimates[(job.task, job.size, job.method)].low or 0.0
                if lean > left:
                    report.stopped = (f"stopped before {label}: its lean estimate ${lean:.4f} is more than the "
                                      f"${left:.4f} left of --max-cost ${spec.max_cost:.4f}")
                    break
            bar.start(label)
            row = run_one(get_method(job.method), instances.get(job.task, job.size, job.index), spec, left)
            if row.status == "interrupted":
                raise KeyboardInterrupt
            if results is not None:
                results.append(row)
            report.rows.append(row)
            report.ran += 1
            report.spent_usd += row.cost_usd or 0.0
            bar.advance(label, row.score, row.cost_usd or 0.0)
            if on_row is not None:
                on_row(row)
            if row.extra.get("refused_calls"):
                report.stopped = (f"stopped at {label}: its next call could have passed --max-cost "
                                  f"${spec.max_cost:.4f} (${report.spent_usd:.4f} spent)")
                break
    finally:
        bar.close()
    return report


def _check_priced(estimates: Mapping[tuple[str, int, str], JobCost], spec: EvalSpec) -> None:
    unpriced = sorted({method for (_, _, method), cost in estimates.items() if not cost.known})
    if unpriced:
        raise ConfigError(f"--max-cost needs prices, and no price is known for the models of "
                          f"{', '.join(unpriced)}: register one (e.g. --price {spec.setup.model_label}=IN,OUT "
                          f"dollars per million tokens) or drop --max-cost.")


def run_one(method: Method, instance: Instance, spec: EvalSpec, max_cost: float | None = None) -> ResultRow:
    """One method on one instance, scored; the row that goes into results.jsonl."""
    if method.name in PEERS:  # their REPLs run the model's code in their own process: not in this one
        outcome = run_apart(method, instance, spec.setup, max_cost=max_cost)
    else:
        outcome = method.run(instance, spec.setup, max_cost=max_cost)
    usage = outcome.usage
    score = instance.score(outcome.answer) if outcome.answer is not None else 0.0
    priced = usage.unpriced_calls == 0
    extra: dict[str, Any] = dict(outcome.extra)
    extra["meta"] = {k: v for k, v in instance.meta.items() if k != "counts"}
    split = outcome.tokens or TokenSplit.from_usage(usage)
    if spec.out is not None and outcome.trajectory is not None:
        extra["trajectory"] = str(_save_trajectory(outcome.trajectory, Path(spec.out), instance, method.name))
    return ResultRow(
        task=instance.task, size=instance.size, method=method.name, index=instance.index, seed=instance.seed,
        model=spec.setup.model_label, sub_model=spec.setup.sub_label, kind=instance.kind, tokens=instance.tokens,
        score=float(score), status=outcome.status, error=outcome.error,
        prediction=short_json(outcome.answer), truth=short_json(instance.answer),
        cost_usd=round(usage.cost_usd, 8) if priced or usage.cost_usd else None, unpriced_calls=usage.unpriced_calls,
        root_calls=usage.root_calls, sub_calls=usage.sub_calls, cached_calls=usage.cached_calls,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, root_input_tokens=split.root_input if split else None,
        root_output_tokens=split.root_output if split else None, sub_tokens=split.sub if split else None,
        cached_input_tokens=usage.cached_input_tokens, saved_usd=round(usage.saved_usd, 8),
        wall_s=round(usage.wall_s, 3), note=outcome.note, extra=extra,
        finished_at=now())


def _save_trajectory(trajectory: Any, out: Path, instance: Instance, method: str) -> Path:
    """`<out>/trajectories/<task>-<size>-<method>-<index>.json`: what the run did, for `rlmnb view` or the widget."""
    name = re.sub(r"[^\w.-]+", "_", f"{instance.task}-{format_size(instance.size)}-{method}-{instance.index}")
    folder = out / "trajectories"
    folder.mkdir(parents=True, exist_ok=True)
    path: Path = trajectory.save(folder / f"{name}.json")
    return path
