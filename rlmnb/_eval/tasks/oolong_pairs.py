"""OOLONG-Pairs: the set of record pairs whose two labels satisfy a predicate, scored by F1.

Same record table as OOLONG (`records.py`). A question asks for every pair of records by the same user
where one note is about a thing of category A and the other about category B (or both about A), as
`[id, id]` pairs. Scored by F1 of the predicted pair set against the true one (order within a pair and of
the pairs does not matter; both empty scores 1; a malformed answer scores 0).

How the answer can be found without reading: the user grouping is plain to code (a few records per
user), but the predicate is over both labels, and a label needs reading (see `records.py`); with
keyword labels about half right, a pair is right only when both labels are, so F1 stays near a quarter
of the way. The answer grows with the input: every record has to be read, and the pairs built by code.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any

from rlmnb._eval.tasks.base import Instance, instance_seed
from rlmnb._eval.tasks.records import LABEL_RULE, LABELS, make_records
from rlmnb._eval.tasks.scoring import pair_f1
from rlmnb._eval.tasks.text import size_tokens

PREAMBLE = "The input `context` holds one record per line: `#id | user | date | note`. " + LABEL_RULE


def pairs_for(ids: list[int], users: list[int], labels: list[str], a: str, b: str) -> list[list[int]]:
    """Every pair of records by one user with labels {a, b} (a == b: both a), as sorted [id, id] lists."""
    by_user: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for record_id, user, label in zip(ids, users, labels, strict=True):
        if label in (a, b):
            by_user[user].append((record_id, label))
    out = []
    for records in by_user.values():
        for (i, la), (j, lb) in combinations(records, 2):
            if {la, lb} == {a, b}:
                out.append(sorted((i, j)))
    return sorted(out)


def ask(a: str, b: str) -> str:
    what = f"both notes are about a {a}" if a == b else f"one note is about a {a} and the other about a {b}"
    return (f"List every pair of records written by the same user where {what} (by label). Answer with a "
            f"list of [id, id] pairs using the numbers after '#', e.g. [[1234567, 2345678]].")


class OOLONGPairsTask:
    name = "oolong_pairs"
    description = __doc__ or ""

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        import numpy as np

        rng = np.random.default_rng(instance_seed(self.name, size, seed, index))
        same = bool(rng.random() < 0.3)
        picks = rng.choice(len(LABELS), 2, replace=False)
        a, b = LABELS[picks[0]], LABELS[picks[0] if same else picks[1]]
        records = make_records(rng, size)
        pairs = pairs_for(records.ids.tolist(), records.users.tolist(), records.label_names(), a, b)
        return Instance(task=self.name, size=size, index=index, seed=seed, question=f"{PREAMBLE}\n\n{ask(a, b)}",
                        inputs={"context": records.text}, answer=pairs, kind="same_label" if same else "label_pair",
                        tokens=size_tokens(records.text),
                        meta={"records": records.count, "params": {"a": a, "b": b}, "pairs": len(pairs)},
                        data=records)

    def score(self, instance: Instance, prediction: Any) -> float:
        return pair_f1(instance.answer, prediction)


OOLONG_PAIRS = OOLONGPairsTask()
