"""OOLONG and OOLONG-Pairs: questions over a table of labelled records, each labelled only by reading its note.

The tasks: `OOLONG` (aggregates over the labels: counts, most/least frequent, comparisons) and
`OOLONG_PAIRS` (the record pairs whose labels satisfy a predicate, scored by F1); each class docstring says
how its answer can and cannot be found without reading. The records they share (`make_records`):

Labelled records for OOLONG and OOLONG-Pairs: one short note per line, labelled only by its meaning.

A record reads `#1234567 | user 0042 | 2025-03-14 | I thought it would be the tuba, but it turned out to
be the pear.` Its label is the category of the thing the note is really about (here: fruit). Every note
names one thing of its own category and one thing of another (the distractor), and which of the two
the note is about is carried by the sentence (negation, correction, contrast), in templates that put
the true thing first or second about equally often.

Why a regex cannot recover the label: the only words that carry a category are the two nouns, and
both are there. A keyword rule (first category word, last one, any one) is right about half the time,
which is what `rlm_no_sub` can reach with code alone; telling them apart takes reading the sentence.
Distractors pair the categories by frequency rank (`partner`: most frequent with least frequent and so
on), so keyword counts cannot even rank the labels: they mix each category with its partner.
A program could parse the notes if it were given all the templates, which is what the oracle models in
`rlmnb._eval.oracles` do, standing in for a sub-model that reads; a model sees only samples of them.
"""

from __future__ import annotations

import inspect
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any

from rlmnb._eval.tasks.base import Instance, instance_seed
from rlmnb._eval.tasks.scoring import exact_match, numeric_score, pair_f1
from rlmnb._eval.tasks.text import chars_per_token, size_tokens

__all__ = ["KINDS", "LABELS", "LABEL_RULE", "OOLONG", "OOLONG_PAIRS", "PREAMBLE", "PROPORTIONS", "TEMPLATES", "THINGS",
           "OOLONGPairsTask", "OOLONGTask", "Records", "answer_for", "ask", "ask_pairs", "category_words",
           "make_records", "pairs_for", "parse_line", "partner", "read_note"]


LABELS = ("fruit", "vehicle", "instrument", "animal", "tool", "garment")
THINGS: dict[str, tuple[str, ...]] = {
    "fruit": ("pear", "plum", "mango", "cherry", "lemon", "peach", "melon", "papaya", "kiwi", "fig", "lime", "guava"),
    "vehicle": ("tram", "truck", "scooter", "van", "bicycle", "canoe", "tractor", "bus", "yacht", "sedan",
                "motorbike", "glider"),
    "instrument": ("tuba", "violin", "banjo", "cello", "flute", "harp", "piano", "trumpet", "drum", "oboe",
                   "ukulele", "bassoon"),
    "animal": ("badger", "hamster", "pony", "goat", "parrot", "turtle", "rabbit", "donkey", "ferret", "llama",
               "beagle", "tortoise"),
    "tool": ("hammer", "wrench", "chisel", "shovel", "ladder", "drill", "saw", "rake", "pliers", "trowel",
             "spanner", "crowbar"),
    "garment": ("scarf", "jacket", "sweater", "coat", "skirt", "vest", "poncho", "cardigan", "hoodie", "tunic",
                "blazer", "raincoat"),
}
# {x}: the thing the note is about; {y}: the distractor. About half put {x} first.
TEMPLATES = (
    "I thought it would be the {y}, but it turned out to be the {x}.",
    "Not the {y} at all: what arrived was the {x}.",
    "They kept asking about the {y}; this note is only about my {x}.",
    "My {x} is nothing like the {y} my neighbour keeps.",
    "Forget the {y}. The {x} is what this note is about.",
    "Everyone expected the {y}, yet the box held the {x} instead.",
    "The {x}, unlike the {y}, is the subject here.",
    "The {y} came up once, but the whole story is about the {x}.",
    "Ignore the {y} in the photo; I am writing about the {x}.",
    "Compared with the {y}, the {x} I bought is far better.",
    "The {x} arrived today; the {y} was never ordered.",
    "No {y} this time, only the {x}.",
    "The {x} is what I want reviewed, not the {y}.",
    "My {x} broke again, while the {y} is fine.",
    "The {x} deserves the attention here, far more than the {y}.",
    "A note on the {x}; the {y} is mentioned only for contrast.",
)
PROPORTIONS = (0.26, 0.21, 0.17, 0.14, 0.12, 0.10)  # shuffled over the labels per instance: counts never tie
LABEL_RULE = ("Each note is about exactly one thing; label it by that thing's category: " + ", ".join(LABELS)
              + ". Notes mention a second thing in passing (for contrast); it does not count.")


@dataclass(frozen=True)
class Records:
    """The structured truth of a record table: ids, users, label and template indexes, and the text."""

    text: str
    ids: Any        # numpy int64, ascending
    users: Any      # numpy int64
    labels: Any     # numpy int64, indexes into LABELS
    templates: Any  # numpy int64, indexes into TEMPLATES

    @property
    def count(self) -> int:
        return len(self.ids)

    def label_names(self) -> list[str]:
        return [LABELS[i] for i in self.labels]


def make_records(rng: Any, size: int, *, users_per_record: float = 0.25) -> Records:
    """About `size` tokens of records; label counts follow PROPORTIONS (shuffled), exactly."""
    import numpy as np

    sample = _sample_line()
    n = max(60, int(size * chars_per_token(sample) / ((len(sample) + 1) / 64)))
    shares = np.array(PROPORTIONS)[rng.permutation(len(LABELS))]
    counts = np.floor(shares * n).astype(np.int64)
    counts[int(np.argmax(shares))] += n - int(counts.sum())
    labels = rng.permutation(np.repeat(np.arange(len(LABELS)), counts))
    distractor_labels = partner(counts)[labels]
    x_word = rng.integers(0, 12, size=n)
    y_word = rng.integers(0, 12, size=n)
    templates = rng.integers(0, len(TEMPLATES), size=n)
    ids = np.sort(rng.choice(np.arange(1_000_000, 10_000_000), size=n, replace=False))
    users = rng.integers(0, max(2, int(n * users_per_record)), size=n)
    days = rng.integers(0, 365, size=n)
    dates = (np.datetime64("2025-01-01") + days).astype(str)
    things = [THINGS[label] for label in LABELS]
    lines = [f"#{i} | user {u:04d} | {d} | " + TEMPLATES[t].format(x=things[lx][wx], y=things[ly][wy])
             for i, u, d, t, lx, wx, ly, wy in zip(ids.tolist(), users.tolist(), dates.tolist(), templates.tolist(),
                                                   labels.tolist(), x_word.tolist(), distractor_labels.tolist(),
                                                   y_word.tolist(), strict=True)]
    return Records(text="\n".join(lines), ids=ids, users=users, labels=labels, templates=templates)


def partner(counts: Any) -> Any:
    """The distractor category of each label: the most frequent label's notes name the least frequent
    category in passing and the reverse, the second with the fifth, the third with the fourth.

    So a keyword count of a category mixes the counts of two partners: it tells a pair's total, never
    which of the two is the larger, and the ranking (most / least frequent, comparisons) is lost to code.
    """
    import numpy as np

    order = np.argsort(-np.asarray(counts), kind="stable")
    out = np.empty(len(order), dtype=np.int64)
    out[order] = order[::-1]
    return out


@lru_cache(maxsize=1)
def _sample_line() -> str:
    return "\n".join(f"#{1_234_567 + k} | user {k:04d} | 2025-03-14 | " + TEMPLATES[k % len(TEMPLATES)].format(
        x=THINGS["fruit"][k % 12], y=THINGS["tool"][k % 12]) for k in range(64))


# ---- the reader's side: what a sub-model that reads concludes (the oracles use this) ---------------------
_LINE = re.compile(r"^#(\d+) \| user (\d+) \| (\S+) \| (.*)$")


@lru_cache(maxsize=1)
def _template_patterns() -> tuple[re.Pattern[str], ...]:
    out = []
    for template in TEMPLATES:
        pattern = re.escape(template).replace(r"\{x\}", r"(?P<x>\w+)").replace(r"\{y\}", r"(?P<y>\w+)")
        out.append(re.compile(f"^{pattern}$"))
    return tuple(out)


_CATEGORY = {word: label for label, words in THINGS.items() for word in words}


def read_note(note: str) -> str | None:
    """The label of a note, read with knowledge of every template (None for text that is not a note)."""
    for pattern in _template_patterns():
        match = pattern.match(note.strip())
        if match:
            return _CATEGORY.get(match.group("x"))
    return None


def parse_line(line: str) -> tuple[int, int, str] | None:
    """(id, user, note) of one record line, or None for anything else (a cut line, a blank)."""
    match = _LINE.match(line.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(4)


def category_words(note: str) -> list[str]:
    """The category of every thing a note names, in order (what a keyword rule sees)."""
    return [_CATEGORY[w] for w in re.findall(r"[a-z]+", note.lower()) if w in _CATEGORY]


# ---- OOLONG ------------------------------------------------------------------------------------------

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

    name = "oolong"
    description = inspect.cleandoc(__doc__ or "")

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


# ---- OOLONG-Pairs ------------------------------------------------------------------------------------

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


def ask_pairs(a: str, b: str) -> str:
    what = f"both notes are about a {a}" if a == b else f"one note is about a {a} and the other about a {b}"
    return (f"List every pair of records written by the same user where {what} (by label). Answer with a "
            f"list of [id, id] pairs using the numbers after '#', e.g. [[1234567, 2345678]].")


class OOLONGPairsTask:
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

    name = "oolong_pairs"
    description = inspect.cleandoc(__doc__ or "")

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        import numpy as np

        rng = np.random.default_rng(instance_seed(self.name, size, seed, index))
        same = bool(rng.random() < 0.3)
        picks = rng.choice(len(LABELS), 2, replace=False)
        a, b = LABELS[picks[0]], LABELS[picks[0] if same else picks[1]]
        records = make_records(rng, size)
        pairs = pairs_for(records.ids.tolist(), records.users.tolist(), records.label_names(), a, b)
        return Instance(task=self.name, size=size, index=index, seed=seed, question=f"{PREAMBLE}\n\n{ask_pairs(a, b)}",
                        inputs={"context": records.text}, answer=pairs, kind="same_label" if same else "label_pair",
                        tokens=size_tokens(records.text),
                        meta={"records": records.count, "params": {"a": a, "b": b}, "pairs": len(pairs)},
                        data=records)

    def score(self, instance: Instance, prediction: Any) -> float:
        return pair_f1(instance.answer, prediction)


OOLONG_PAIRS = OOLONGPairsTask()
