"""OOLONG: questions that aggregate over the labels of thousands of records, each labelled by reading.

The input is a record table (see `records.py` for the design: a label is recoverable by reading the
note, not by a regex). Questions: how many records carry a label (scored `0.75 ** |error|`, as in the
paper), which label is the most or the least frequent, and whether one label is more or less common than
another (both exact match). Label counts follow fixed, shuffled proportions, so they never tie.

How the answer can be found without reading: it cannot, beyond luck. The structure (ids, users, dates,
one record a line) is plain to code, but every note names two things of different categories; a
keyword rule labels about half the records right, which leaves counts off by a large margin (score
near 0) and ranks labels by noise. A method has to have every note read (by sub-calls) and aggregate
the labels with code; a truncated prompt sees only a prefix, and its counts shrink with it.
"""

from __future__ import annotations

from typing import Any

from rlmnb._eval.tasks.base import Instance, instance_seed
from rlmnb._eval.tasks.records import LABEL_RULE, LABELS, make_records
from rlmnb._eval.tasks.scoring import exact_match, numeric_score
from rlmnb._eval.tasks.text import size_tokens

KINDS = ("count", "most_frequent", "least_frequent", "compare")
PREAMBLE = "The input `context` holds one record per line: `#id | user | date | note`. " + LABEL_RULE


def answer_for(kind: str, counts: dict[str, int], params: dict[str, str]) -> Any:
    """The answer to question `kind` given label counts (used for the truth and by the oracle root)."""
    if kind == "count":
        return counts.get(params["label"], 0)
    if kind == "most_frequent":
        return max(LABELS, key=lambda label: counts.get(label, 0))
    if kind == "least_frequent":
        return min(LABELS, key=lambda label: counts.get(label, 0))
    a, b = counts.get(params["a"], 0), counts.get(params["b"], 0)
    return "more" if a > b else "fewer" if a < b else "same"


def ask(kind: str, params: dict[str, str]) -> str:
    if kind == "count":
        return f"How many records are labelled {params['label']}? Answer with a number."
    if kind == "most_frequent":
        return "Which label is the most frequent among the records? Answer with the label only."
    if kind == "least_frequent":
        return "Which label is the least frequent among the records? Answer with the label only."
    return (f"Are records labelled {params['a']} more or fewer than records labelled {params['b']}? "
            f"Answer with one word: more, fewer or same.")


class OOLONGTask:
    name = "oolong"
    description = __doc__ or ""

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        import numpy as np

        rng = np.random.default_rng(instance_seed(self.name, size, seed, index))
        kind = KINDS[int(rng.integers(0, len(KINDS)))]
        picks = rng.choice(len(LABELS), 2, replace=False)
        params = ({"label": LABELS[picks[0]]} if kind == "count" else
                  {"a": LABELS[picks[0]], "b": LABELS[picks[1]]} if kind == "compare" else {})
        records = make_records(rng, size)
        counts = {label: int((records.labels == i).sum()) for i, label in enumerate(LABELS)}
        return Instance(task=self.name, size=size, index=index, seed=seed,
                        question=f"{PREAMBLE}\n\n{ask(kind, params)}", inputs={"context": records.text},
                        answer=answer_for(kind, counts, params), kind=kind, tokens=size_tokens(records.text),
                        meta={"records": records.count, "params": params, "counts": counts},
                        data=records)

    def score(self, instance: Instance, prediction: Any) -> float:
        if instance.kind == "count":
            return numeric_score(float(instance.answer), prediction)
        return exact_match(instance.answer, prediction)


OOLONG = OOLONGTask()
