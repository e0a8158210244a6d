"""`rlmnb eval`: the task suite from the command line (arguments and the handler `cli.py` calls).

    rlmnb eval --task oolong --sizes 32k,256k,1m --methods rlm,direct -m MODEL -s SUB -n 5 --out results/

Writes `results.jsonl` (one line per run, resumable), `summary.md`, `summary.json` and `plot.png`
into `--out`; prints the summary table. `--dry-run` prints the cost estimate and calls no model.
Exit codes as `rlmnb run`: 0 done, 1 stopped by --max-cost, 2 bad arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rlmnb._eval.tasks import TASK_NAMES, format_size
from rlmnb._eval.tasks.base import expand_tasks
from rlmnb._eval.tasks.published import PUBLISHED
from rlmnb._ground.errors import ConfigError

__all__ = ["add_arguments", "run", "spec_from_args"]


_EPILOG = f"""tasks (--task, comma-separated):
  generated at each of --sizes: {', '.join(TASK_NAMES)}, all
  NVIDIA's RULER: ruler:NAME, ruler:all
  your own, one JSON object a line: jsonl:PATH
  published (--data PATH, else the Hugging Face hub): oolong_synth, oolong_real, longbench_v2, browsecomp_plus
methods (--methods, comma-separated):
  rlm, rlm_no_sub, direct, rlms, dspy_rlm, minrlm, fast_rlm"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Declare `rlmnb eval`'s options on `p`: each says what it does in one line; the task and method names
    are listed once, below the options (the epilog)."""
    p.epilog = _EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the epilog's lines as written
    p.add_argument("--task", "--tasks", dest="tasks", default="oolong", help="tasks to run (names below; default oolong)")
    p.add_argument("--data", help="local copy of a published task set (default: the Hugging Face hub)")
    p.add_argument("--sizes", default="32k", help="input sizes in tokens, e.g. 32k,256k,1m (default 32k)")
    p.add_argument("--methods", default="rlm,direct", help="methods to compare (names below; default rlm,direct)")
    p.add_argument("-m", "--model", required=True, help="root model, as provider/name")
    p.add_argument("-s", "--sub-model", help="sub-model (default: the root model)")
    p.add_argument("--api-base", help="OpenAI-compatible server for both models")
    p.add_argument("--api-key", help="key for both models (default: the provider's variable)")
    p.add_argument("--temperature", type=float, help="sampling temperature of both models")
    p.add_argument("--max-tokens", type=int, help="reply cap of every model call")
    p.add_argument("-n", type=int, default=5, help="instances per task and size (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated instances (default 0)")
    p.add_argument("--out", default="results", help="folder for results, summary and plot (default results/)")
    p.add_argument("--max-cost", type=float, help="dollars the evaluation may spend at most")
    p.add_argument("--dry-run", action="store_true", help="print the cost estimate; call no model")
    p.add_argument("--context-window", type=int, help="context window in tokens of a model litellm does not know")
    p.add_argument("--price", action="append", default=[], metavar="MODEL=IN,OUT",
                   help="a model's dollars per million tokens in and out; repeatable")
    p.add_argument("--sandbox", choices=("local", "kernel"), help="where rlm methods run code (default kernel)")
    p.add_argument("--max-iterations", type=int, help="root turns per rlm run (default 20)")
    p.add_argument("--max-llm-calls", type=int, help="sub-calls per rlm run (default 200)")
    p.add_argument("--policies", metavar="PROFILE|NAME,...",
                   help="rlm methods' policies: a profile, all, or names a,b (default auto)")
    p.add_argument("--timeout", type=float, help="seconds one code snippet may run (default 600)")
    p.add_argument("--request-timeout", type=_seconds, metavar="SECONDS",
                   help="seconds one model request may take (default 120; 600 local)")
    p.add_argument("--max-time", type=_seconds, metavar="SECONDS", help="wall-clock seconds of one run, every method")
    p.add_argument("--no-plot", action="store_true", help="write no plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _prices(specs: list[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        try:
            cost_in, cost_out = (float(x) for x in rest.split(","))
        except ValueError:
            raise ConfigError(f"--price expects MODEL=IN,OUT (dollars per million tokens), got {spec!r}.") from None
        if not sep or not name.strip():
            raise ConfigError(f"--price expects MODEL=IN,OUT (dollars per million tokens), got {spec!r}.")
        out[name.strip()] = (cost_in / 1e6, cost_out / 1e6)
    return out


def _model(name: str, args: argparse.Namespace, prices: dict[str, tuple[float, float]]) -> Any:
    """A litellm name as is, or a LiteLLM object when a server, key, window or price is given for it."""
    options: dict[str, Any] = {}
    if args.api_base:
        options["api_base"] = args.api_base
    if args.api_key:
        options["api_key"] = args.api_key
    if args.api_base and getattr(args, "context_window", None):  # a served model litellm knows nothing of
        options["context_window"] = args.context_window
    if getattr(args, "temperature", None) is not None:
        options["temperature"] = args.temperature
    if getattr(args, "max_tokens", None):
        options["max_tokens"] = args.max_tokens
    if getattr(args, "request_timeout", None):
        options["timeout"] = args.request_timeout
    price = prices.get(name) or prices.get(name.split("/", 1)[-1])
    if price:
        options["input_cost_per_token"], options["output_cost_per_token"] = price
    if not options:
        return name
    from rlmnb._models.litellm import LiteLLM

    return LiteLLM(name, **options)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds: give one above 0, e.g. 1200")
    return value


def spec_from_args(args: argparse.Namespace) -> Any:
    from rlmnb._eval.methods import Setup
    from rlmnb._eval.runner import EvalSpec

    prices = _prices(args.price)
    tasks = [f"{t}:{args.data or 'hub'}" if t.strip().lower() in PUBLISHED else t
             for t in expand_tasks(_split(args.tasks))]
    settings = {k: v for k, v in {"sandbox": args.sandbox, "max_iterations": args.max_iterations,
                                  "max_llm_calls": args.max_llm_calls, "timeout": args.timeout,
                                  "max_time": args.max_time,
                                  "policies": _policies(args.policies)}.items() if v is not None}
    settings.update(_confinement(args))
    model = _model(args.model, args, prices)
    sub = _model(args.sub_model, args, prices) if args.sub_model else None
    setup = Setup(model=model, sub_model=sub, settings=settings, context_window=args.context_window)
    return EvalSpec(tasks=tasks, sizes=_split(args.sizes), methods=_split(args.methods), setup=setup, n=args.n,
                    seed=args.seed, out=args.out, max_cost=args.max_cost).checked()


def _policies(value: str | None) -> str | tuple[str, ...] | None:
    """--policies as RLMConfig takes it (a profile, "all", or policy names with commas), checked now."""
    if value is None:
        return None
    from rlmnb._ground.config import RLMConfig

    config = RLMConfig(policies=value)
    config.validate()
    return config.policies


def _confinement(args: argparse.Namespace) -> dict[str, Any]:
    """--confinement, --allow-path and --allow-network (declared by cli.py as in %%rlm), checked now as
    RLM(...) checks them, so a mistake stops the evaluation before its first run."""
    from rlmnb._ground.flags import CONFINEMENT_SETTINGS, flags_for, values_of
    from rlmnb._sandbox.confinement.policy import resolve

    values = values_of(args, flags_for(CONFINEMENT_SETTINGS))
    if values:
        sandbox = args.sandbox or "kernel"
        resolve(values.get("confinement", "auto"), values.get("allow_paths", ()), values.get("allow_network", ()),
                sandbox=sandbox)
    return values


def run(args: argparse.Namespace) -> int:
    """The `eval` subcommand; ConfigError for bad arguments (the CLI prints it, exit 2)."""
    from rlmnb._eval.report import format_table, summarise
    from rlmnb._eval.runner import estimate, run_eval

    spec = spec_from_args(args)
    if args.dry_run:
        print(_estimate_text(spec, estimate(spec)))
        return 0
    report = run_eval(spec, progress=not args.quiet)
    out = Path(spec.out)
    summary = summarise(report.rows)
    table = format_table(summary)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(table + "\n", encoding="utf-8")
    (out / "summary.json").write_text(json.dumps([s.to_dict() for s in summary], indent=1), encoding="utf-8")
    print(table)
    print(f"{report.ran} run(s) done, {report.skipped} already in {out / 'results.jsonl'}; "
          f"${report.spent_usd:.4f} spent.", file=sys.stderr)
    if not args.no_plot and summary:
        from rlmnb._eval.report import plot_summary

        try:
            print(f"plot: {plot_summary(summary, out / 'plot.png')}", file=sys.stderr)
        except ConfigError as exc:
            print(f"rlmnb: no plot: {exc}", file=sys.stderr)
    if report.stopped:
        print(f"rlmnb: {report.stopped}", file=sys.stderr)
        return 1
    return 0


def _estimate_text(spec: Any, estimates: dict[tuple[str, int, str], Any]) -> str:
    lines = [f"Dry run: no model was called. {spec.n} instance(s) per task and size.",
             "| task | size | method | runs | per run (lean - whole budget) | total (lean - whole budget) |",
             "|---|---|---|--:|--:|--:|"]
    low_total = high_total = 0.0
    unknown = False
    for (task, size, method), cost in estimates.items():
        if not cost.known:
            unknown = True
            lines.append(f"| {task} | {format_size(size)} | {method} | {spec.n} | unknown (no price) | unknown |")
            continue
        low_total += cost.low * spec.n
        high_total += cost.high * spec.n
        lines.append(f"| {task} | {format_size(size)} | {method} | {spec.n} | ${cost.low:.4f} - ${cost.high:.4f} | "
                     f"${cost.low * spec.n:.4f} - ${cost.high * spec.n:.4f} |")
    lines.append(f"Estimated total: ${low_total:.4f} - ${high_total:.4f}" + (" plus unpriced runs" if unknown else ""))
    return "\n".join(lines)
