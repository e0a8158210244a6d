"""Packing measured on a real model: llm_classify at pack sizes 1, 5, 20 and 50 against the local server.

`bench/operators.py` shows packing's call savings with a scripted sub-model that always answers right, so its
"equal accuracy" cannot fail. This runs the same `llm_classify` (the operators bench's instruction and labels,
`rlmnb.testing.generators.labelled_table` rows, whose label is implied by the text only) against the real
model of `../shared/realmodel/` (Qwen2.5-Coder 1.5B on llama.cpp, one request at a time, temperature 0) at each
pack size (`pack_items`), and prints per size: accuracy against the generated labels, sub-calls (re-asks
included), input and output tokens as the server counted them, wall time, re-asked and failed items.

The default is chosen from that curve: the largest pack size whose accuracy is within `--tolerance` (2
points) of one item per call. PASS when the shipped default for this model (`RLMConfig.pack_items`, None: one
item a call for a sub-model whose window is at most 32,768 tokens) is that size or one whose accuracy is as
good; MISS otherwise.

Run: python bench/packing.py [--rows 200] [--sizes 1,5,20,50]   (~48 minutes for sizes 1, 5 and 20 at 200 rows here;
     the server must be running: bash ../shared/realmodel/serve.sh start). Not part of the suite.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from operators import INSTRUCTION  # noqa: E402
from realmodel import MODEL_SETTINGS, URL, server_up  # noqa: E402


@dataclass(frozen=True)
class Point:
    pack: int
    accuracy: float
    calls: int
    input_tokens: int
    output_tokens: int
    wall_s: float
    reasks: int
    failures: int


def measure(pack: int, texts: list[str], labels: list[str], label_set: list[str]) -> Point:
    from rlmnb import RLM
    from rlmnb._models.litellm import LiteLLM
    from rlmnb.events import MapFinished
    from rlmnb.testing import ScriptedLM

    body = f"out = list(llm_classify(list(inputs['tickets']), {label_set!r}, {INSTRUCTION!r}))\nsubmit(out)"
    root = ScriptedLM(["```python\nprint(len(inputs['tickets']))\n```", f"```python\n{body}\n```"], name="root")
    sub = LiteLLM("openai/local", max_tokens=800, **MODEL_SETTINGS)
    rlm = RLM(root, sub, sandbox="local", cache=False, pack_items=pack, max_llm_calls=len(texts) * 4, timeout=3600,
              evidence_check=False, first_read="off")
    started = time.perf_counter()
    result = rlm.run("Label every ticket.", tickets=texts)
    wall = time.perf_counter() - started
    if result.status != "submitted":
        raise SystemExit(f"pack {pack}: the run ended {result.status}: {result.reason}")
    answers = list(result.answer)
    calls = result.trajectory.sub_calls()
    maps = result.trajectory.of(MapFinished)
    return Point(pack, sum(a == w for a, w in zip(answers, labels, strict=True)) / len(labels), len(calls),
                 sum(c["input_tokens"] or 0 for c in calls), sum(c["output_tokens"] or 0 for c in calls), wall,
                 sum(m.reasks for m in maps), sum(m.failures for m in maps))


def table(points: list[Point]) -> str:
    lines = ["| pack size | accuracy | sub-calls | input tokens | output tokens | wall s | re-asked | failed |",
             "|--:|--:|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| {p.pack} | {p.accuracy:.1%} | {p.calls} | {p.input_tokens:,} | {p.output_tokens:,} | "
              f"{p.wall_s:.0f} | {p.reasks} | {p.failures} |" for p in points]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rlmnb._ground.config import RLMConfig
    from rlmnb.testing.generators import LABELS, labelled_table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--sizes", default="1,5,20,50")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--tolerance", type=float, default=0.02, help="accuracy points a pack may lose to size 1")
    args = parser.parse_args(argv)
    if not server_up():
        print(f"no model server at {URL}: start it with bash ../shared/realmodel/serve.sh start", file=sys.stderr)
        return 2
    frame, labels = labelled_table(args.rows, seed=args.seed)
    texts, wanted = [str(t) for t in frame["text"]], [str(x) for x in labels]
    points: list[Point] = []
    for pack in (int(s) for s in args.sizes.split(",")):
        points.append(measure(pack, texts, wanted, list(LABELS)))
        print(points[-1], flush=True)
    print()
    print(table(points))
    base = next((p for p in points if p.pack == 1), points[0])
    good = [p for p in points if p.accuracy >= base.accuracy - args.tolerance]
    best = max(good, key=lambda p: p.pack)
    shipped = RLMConfig().pack_items or 1  # None: one item a call for a sub-model of this window (<= 32,768)
    at_shipped = next((p for p in points if p.pack == shipped), None)
    ok = at_shipped is not None and at_shipped.accuracy >= best.accuracy - args.tolerance
    print(f"\nlargest pack within {args.tolerance:.0%} of one item per call: {best.pack} "
          f"({best.accuracy:.1%}, {base.calls / max(1, best.calls):.1f}x fewer calls, "
          f"{base.input_tokens / max(1, best.input_tokens):.1f}x fewer input tokens than size 1)")
    print(f"shipped default pack_items={shipped}: {'PASS' if ok else 'MISS'} "
          f"({at_shipped.accuracy:.1%})" if at_shipped else f"shipped default pack_items={shipped}: not measured")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
