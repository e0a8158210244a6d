"""Metrics by name, for tasks whose rows say how they are scored (JSON Lines tasks, published datasets).

Every metric takes the list of accepted answers and a prediction and returns a score in [0, 1]; a
malformed prediction scores 0, never raises.

- `exact`: 1 when the normalised prediction equals any answer (`scoring.normalize_text`).
- `numeric`: `0.75 ** |answer - prediction|` (OOLONG's score), the best over the answers.
- `contains`: 1 when any answer appears, case-insensitive, in the prediction (RULER's string_match_part).
- `all`: the fraction of the answers that appear in the prediction (RULER's string_match_all).
- `choice`: 1 when the letter chosen (A-D: "B", "(B)", "The correct answer is (B)") is the answer's letter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rlmnb._eval.tasks.scoring import exact_match, numeric_score, unwrap
from rlmnb._ground.errors import ConfigError

__all__ = ["METRICS", "all_of", "choice", "chosen_letter", "contains", "exact", "get_metric", "numeric"]


def _text(prediction: Any) -> str:
    value = unwrap(prediction)
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def exact(answers: Sequence[Any], prediction: Any) -> float:
    return max((exact_match(a, prediction) for a in answers), default=0.0)


def numeric(answers: Sequence[Any], prediction: Any) -> float:
    scores = []
    for answer in answers:
        try:
            scores.append(numeric_score(float(answer), prediction))
        except (TypeError, ValueError):
            scores.append(exact_match(answer, prediction))
    return max(scores, default=0.0)


def contains(answers: Sequence[Any], prediction: Any) -> float:
    text = _text(prediction).lower()
    return max((1.0 if str(a).lower() in text else 0.0 for a in answers), default=0.0)


def all_of(answers: Sequence[Any], prediction: Any) -> float:
    text = _text(prediction).lower()
    return sum(1.0 for a in answers if str(a).lower() in text) / len(answers) if answers else 0.0


_CHOICE = (re.compile(r"correct answer is\s*\(?([A-D])\)?", re.I), re.compile(r"^\s*\(?([A-D])\)?(?:[.:)\s]|$)"),
           re.compile(r"\(([A-D])\)"))


def chosen_letter(prediction: Any) -> str | None:
    """The letter A-D a prediction chooses, LongBench-v2 style ("The correct answer is (B)"), or None."""
    text = _text(prediction).strip()
    for pattern in _CHOICE:
        match = pattern.search(text)
        if match:
            return match.group(1).upper()
    return None


def choice(answers: Sequence[Any], prediction: Any) -> float:
    got = chosen_letter(prediction)
    return 1.0 if got is not None and any(got == str(a).strip().upper() for a in answers) else 0.0


METRICS: dict[str, Callable[[Sequence[Any], Any], float]] = {
    "exact": exact, "numeric": numeric, "contains": contains, "all": all_of, "choice": choice,
    "string_match_part": contains, "string_match_all": all_of,
}


def get_metric(name: str) -> Callable[[Sequence[Any], Any], float]:
    """The metric called `name`; ConfigError listing them otherwise."""
    metric = METRICS.get(str(name).strip().lower())
    if metric is None:
        raise ConfigError(f"unknown metric {name!r}: choose from {', '.join(METRICS)}.")
    return metric
