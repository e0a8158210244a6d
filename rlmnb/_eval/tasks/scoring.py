"""Scorers shared by the tasks, as in the RLM paper: exact match, `0.75 ** |error|` for numbers, pair F1.

Predictions come from models, so every scorer accepts the shapes a model plausibly submits (a
string with surrounding prose or quotes, a number as text, a JSON list as a string, a dict with an
"answer" key) and gives 0 to anything it cannot read: a malformed answer is a wrong answer, never
an exception.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["exact_match", "normalize_text", "numeric_score", "pair_f1", "parse_number", "parse_pairs", "unwrap"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PAIR = re.compile(r"[\[(]\s*['\"]?(\d+)['\"]?\s*,\s*['\"]?(\d+)['\"]?\s*[\])]")
_STRIP = " \t\n\r\"'`.,;:!?*"


def unwrap(prediction: Any) -> Any:
    """A dict with one "answer"-like key gives its value; anything else is returned as is."""
    if isinstance(prediction, dict):
        for key in ("answer", "final", "result", "value"):
            if key in prediction:
                return prediction[key]
    return prediction


def normalize_text(value: Any) -> str:
    """Lower-case, inner whitespace collapsed, surrounding quotes/punctuation and a "the answer is" removed."""
    text = " ".join(str(unwrap(value)).split()).strip(_STRIP).lower()
    text = re.sub(r"^(?:final answer|the answer is|answer)\s*[:=-]?\s*", "", text)
    return text.strip(_STRIP)


def exact_match(truth: Any, prediction: Any) -> float:
    """1.0 when the normalised texts are equal, else 0.0 (None, empty or malformed answers score 0)."""
    if prediction is None:
        return 0.0
    got = normalize_text(prediction)
    return 1.0 if got and got == normalize_text(truth) else 0.0


def parse_number(prediction: Any) -> float | None:
    """The number a prediction states: a real number, or the only number in a short text; else None."""
    value = unwrap(prediction)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    found = _NUMBER.findall(value.replace(",", ""))
    if len(found) != 1:  # "12 or 13", or no number at all: not an answer
        return None
    return float(found[0])


def numeric_score(truth: float, prediction: Any) -> float:
    """`0.75 ** abs(truth - prediction)` (the paper's OOLONG score); 0 for a non-number."""
    got = parse_number(prediction)
    if got is None:
        return 0.0
    return float(0.75 ** abs(float(truth) - got))


def parse_pairs(prediction: Any) -> set[tuple[int, int]] | None:
    """A set of unordered id pairs (smaller id first) from a list of pairs, or from text/JSON holding them.

    None when the prediction is not a collection of pairs at all (a malformed answer).
    """
    value = unwrap(prediction)
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            matches = _PAIR.findall(text)
            if not matches and text.lower().strip(_STRIP) not in ("", "none", "[]", "no pairs"):
                return None
            return {_ordered(int(a), int(b)) for a, b in matches}
    if not isinstance(value, list | tuple | set | frozenset):
        return None
    pairs: set[tuple[int, int]] = set()
    for item in value:
        pair = _as_pair(item)
        if pair is None:
            return None
        pairs.add(pair)
    return pairs


def _as_pair(item: Any) -> tuple[int, int] | None:
    if isinstance(item, str):
        found = _PAIR.findall(item) or [tuple(_NUMBER.findall(item))]
        item = found[0] if found and len(found[0]) == 2 else None
    if not isinstance(item, list | tuple) or len(item) != 2:
        return None
    try:
        return _ordered(int(item[0]), int(item[1]))
    except (TypeError, ValueError):
        return None


def _ordered(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a <= b else (b, a)


def pair_f1(truth: Iterable[Iterable[int]], prediction: Any) -> float:
    """F1 of the predicted pair set against the true one; both empty scores 1, malformed scores 0."""
    expected = {_ordered(int(a), int(b)) for a, b in truth}
    got = parse_pairs(prediction)
    if got is None:
        return 0.0
    if not expected and not got:
        return 1.0
    hits = len(expected & got)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(got), hits / len(expected)
    return 2 * precision * recall / (precision + recall)
