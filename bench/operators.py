"""Semantic operators: llm_classify against one llm_query_batched prompt per ticket.

10,000 generated support tickets with known labels (`rlmnb.testing.generators.labelled_table`), labelled
three ways through real runs (scripted root model, local sandbox by default, response cache off):

  baseline     one llm_query_batched call with one prompt per ticket (the instruction in every prompt)
  classify     llm_classify(tickets, LABELS, INSTRUCTION): packed prompts, the instruction once per pack
  garbled 5 %  llm_classify against a sub-model that drops, breaks or mislabels 5 % of packed items

Both ways use the same instruction text and a scripted sub-model that answers correctly (PackedResponder).
Printed: sub-calls, sub-model input tokens (counted with tiktoken), wall time, accuracy against the known
labels, and the ratios to the baseline. Goals: >= 10x fewer calls and >= 3x fewer input tokens at equal
accuracy; with 5 % garbled, accuracy still equal after re-asks.
Run: `.venv/bin/python bench/operators.py [--tickets 10000] [--sandbox local|kernel]` (about a minute).
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass
from typing import Any

INSTRUCTION = ("You triage customer support tickets. Put each ticket in exactly one category: billing (charges, "
               "invoices, refunds, payments), shipping (parcels, deliveries, couriers, tracking), technical "
               "(crashes, errors, sync or export failures), account (passwords, profiles, e-mail changes, "
               "two-factor codes) or praise (thanks and compliments).")


@dataclass
class Row:
    name: str
    calls: int
    input_tokens: int
    wall_s: float
    accuracy: float
    reasks: int
    failures: int


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def run(name: str, body: str, sub: Any, tickets: list[str], labels: list[str], sandbox: str) -> Row:
    from rlmnb import RLM
    from rlmnb.events import MapFinished
    from rlmnb.testing import ScriptedLM

    root = ScriptedLM([code("print(len(inputs['tickets']))"), code(body + "\nsubmit(out)")], name="root")
    rlm = RLM(root, ScriptedLM(sub, name="sub"), sandbox=sandbox, cache=False, max_llm_calls=len(tickets) * 2,
              timeout=600)
    started = time.perf_counter()
    result = rlm.run("Label every ticket.", tickets=tickets)
    wall = time.perf_counter() - started
    assert result.status == "submitted", result
    rows = result.trajectory.sub_calls()
    answer = list(result.answer)
    correct = sum(1 for got, want in zip(answer, labels, strict=True) if got == want)
    maps = result.trajectory.of(MapFinished)
    return Row(name, len(rows), sum(r["input_tokens"] or 0 for r in rows), wall, correct / len(labels),
               sum(m.reasks for m in maps), sum(m.failures for m in maps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=10_000)
    parser.add_argument("--sandbox", default="local", choices=["local", "kernel"])
    args = parser.parse_args()

    from rlmnb.testing.generators import LABELS, label_of, labelled_table
    from rlmnb.testing.packed import PackedResponder

    frame, truth = labelled_table(args.tickets, seed=7)
    tickets, labels = [str(t) for t in frame["text"]], [str(x) for x in truth]
    baseline = (f"INSTRUCTION = {INSTRUCTION!r}\nLABELS = {list(LABELS)!r}\n"
                "prompts = [f'{INSTRUCTION}\\nReply with the category name only, one of: {\", \".join(LABELS)}.'"
                "f'\\n\\n{t}' for t in inputs['tickets']]\n"
                "out = [r.strip() for r in llm_query_batched(prompts)]")
    packed = (f"out = list(llm_classify(list(inputs['tickets']), {list(LABELS)!r}, {INSTRUCTION!r}))")
    rows = [
        run("baseline (1 prompt per ticket)", baseline, PackedResponder(label_of), tickets, labels, args.sandbox),
        run("llm_classify", packed, PackedResponder(label_of), tickets, labels, args.sandbox),
        run("llm_classify, 5% garbled", packed, PackedResponder(label_of, garble=0.05, seed=11), tickets, labels,
            args.sandbox),
    ]
    base = rows[0]
    print(f"rlmnb bench/operators.py: {args.tickets:,} tickets, {args.sandbox} sandbox, Python "
          f"{platform.python_version()}")
    print(f"{'way':34} {'sub-calls':>9} {'input tok':>10} {'wall s':>7} {'accuracy':>8} {'re-asks':>7} "
          f"{'failed':>6} {'calls x':>8} {'tokens x':>8}")
    for r in rows:
        print(f"{r.name:34} {r.calls:>9,} {r.input_tokens:>10,} {r.wall_s:>7.2f} {r.accuracy:>8.2%} {r.reasks:>7,} "
              f"{r.failures:>6,} {base.calls / r.calls:>7.1f}x {base.input_tokens / r.input_tokens:>7.1f}x")
    packed_row, garbled = rows[1], rows[2]
    print(f"goal >= 10x fewer calls: {'met' if base.calls >= 10 * packed_row.calls else 'NOT met'}; "
          f">= 3x fewer input tokens: {'met' if base.input_tokens >= 3 * packed_row.input_tokens else 'NOT met'}; "
          f"equal accuracy: {'met' if packed_row.accuracy >= base.accuracy else 'NOT met'}; "
          f"5% garbled still equal after re-asks: {'met' if garbled.accuracy >= base.accuracy else 'NOT met'}")


if __name__ == "__main__":
    main()
