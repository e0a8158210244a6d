"""The task suite at scale: generation speed per task and size, and oracle runs up to 10M tokens.

Part 1 generates one instance of every task at each size and prints wall time, characters, estimated
tokens and the throughput (tokens generated per second). Part 2 runs the oracle root and sub-model
(`rlm`, local sandbox) on every task at each size and prints score, sub-calls and wall time: the harness
itself must stay exact (100 %) and cheap at 10M tokens. Part 3 prints the example table of the README
(scripted oracle models, offline).

    .venv/bin/python bench/eval_suite.py [--sizes 1m,10m] [--table]
"""

from __future__ import annotations

import argparse
import time

from rlmnb._eval import EvalSpec, Setup, format_table, run_eval, summarise
from rlmnb._eval.oracles import OracleModel
from rlmnb._eval.tasks import TASK_NAMES, format_size, get_task, parse_size
from rlmnb.testing import ScriptedLM


def oracle_setup(window: int = 16_000) -> Setup:
    oracle = OracleModel()
    return Setup(ScriptedLM(oracle, name="oracle-root"), ScriptedLM(oracle, name="oracle-sub"),
                 {"sandbox": "local", "cache": False}, context_window=window)


def generation(sizes: list[int]) -> None:
    print("| task | size | generate (s) | characters | tokens (est.) | tokens/s |")
    print("|---|---|--:|--:|--:|--:|")
    for size in sizes:
        for task in TASK_NAMES:
            started = time.perf_counter()
            inst = get_task(task).generate(size, seed=0, index=0)
            wall = time.perf_counter() - started
            print(f"| {task} | {format_size(size)} | {wall:.2f} | {inst.chars:,} | {inst.tokens:,} | "
                  f"{inst.tokens / wall:,.0f} |", flush=True)


def oracle_runs(sizes: list[int]) -> None:
    print("\n| task | size | score | status | sub-calls | tokens through the harness | wall (s) |")
    print("|---|---|--:|---|--:|--:|--:|")
    for size in sizes:
        for task in TASK_NAMES:
            started = time.perf_counter()
            rows = run_eval(EvalSpec([task], [size], ["rlm"], oracle_setup(), n=1)).rows
            wall = time.perf_counter() - started
            row = rows[0]
            print(f"| {task} | {format_size(size)} | {100 * row.score:.0f}% | {row.status} | {row.sub_calls} | "
                  f"{row.total_tokens:,} | {wall:.1f} |", flush=True)


def readme_table() -> None:
    spec = EvalSpec(TASK_NAMES, ["8k", "128k"], ["rlm", "rlm_no_sub", "direct"], oracle_setup(), n=3)
    print("\n" + format_table(summarise(run_eval(spec).rows)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1m,10m")
    parser.add_argument("--table", action="store_true", help="only print the README's example table")
    args = parser.parse_args()
    if args.table:
        readme_table()
        return
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    generation(sizes)
    oracle_runs(sizes)


if __name__ == "__main__":
    main()
