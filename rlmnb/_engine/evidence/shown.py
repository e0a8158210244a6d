"""Whether a value was shown: numbers (commas, rounding, percentages) and runs of words in texts (`found_in`), the numbers and ids a short answer claims (`value_claims`), an answer saying nothing was found, a copy of a text input (`copied_from`), prose stating what earlier outputs held (`found_before`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rlmnb._engine.evidence.steps import Step
from rlmnb._ground.passages import (
    decimals_of as _str_decimals,  # one number reading for the engine and the sandbox
)
from rlmnb._ground.passages import (
    held_by,
    number_in,
    words_of,
)

__all__ = ["as_number", "claims_in", "words_in", "COPY_CHARS", "EMPTY_WORDS", "SHORT_CHARS", "SHORT_WORDS", "copied_from", "found_before", "found_in", "says_nothing", "short_answer", "value_claims"]


SHORT_CHARS = 60
"""Longest string answer the evidence check reads (longer ones are prose, not a looked-up value)."""


SHORT_WORDS = 6


EMPTY_WORDS = frozenset({"", "none", "null", "nan", "n/a", "not found", "nothing", "nothing found", "no answer",
                         "unknown"})


def says_nothing(answer: Any) -> bool:
    """Whether a submitted answer says nothing was found: None, an empty string or collection, or one of
    `EMPTY_WORDS` (case and a trailing full stop aside)."""
    if answer is None:
        return True
    if isinstance(answer, str):
        return answer.strip().rstrip(".").strip().lower() in EMPTY_WORDS
    if isinstance(answer, list | tuple | dict | set | frozenset):
        return len(answer) == 0
    return False


COPY_CHARS = 2_000
"""An answer string this long that an input's text holds verbatim is a copy of the input, not an answer."""


def copied_from(answer: Any, texts: Iterable[tuple[str, str]], *, share: float = 0.0) -> tuple[str, int] | None:
    """(input name, characters) when `answer` is a string of at least `COPY_CHARS` characters (surrounding
    whitespace aside) that one of `texts` ((name, text) pairs) holds verbatim, and that covers at least `share` of
    that text; else None."""
    if not isinstance(answer, str) or len(body := answer.strip()) < COPY_CHARS:
        return None
    return next(((name, len(body)) for name, text in texts
                 if len(body) >= share * len(text.strip()) and body in text), None)


def found_before(prose: str, turn: int, steps: Sequence[Step], *, question: str) -> bool:
    """Whether `prose`, said at `turn`, states what the outputs of earlier steps held (`held_by` over the output of
    every step before `turn` that shows values): a statement of a finding, not a guess made before the output that
    holds it. A value said before any output showed it was a guess even when a later output happens to hold it."""
    outputs = "\n".join(s.text for s in steps if s.turn < turn)
    return bool(outputs) and held_by(prose, outputs, question=question) is True


def short_answer(answer: Any) -> bool:
    """A number (not a bool) or a one-line string of a few words: the values a model can invent."""
    if isinstance(answer, bool) or answer is None:
        return False
    if isinstance(answer, int | float):
        return not (isinstance(answer, float) and not math.isfinite(answer))
    if isinstance(answer, str):
        text = answer.strip()
        return bool(text) and "\n" not in text and len(text) <= SHORT_CHARS and len(text.split()) <= SHORT_WORDS
    return False


def as_number(value: Any) -> float | None:
    """The number an answer stands for: a number, or a string such as '4,015,985', '$12.50' or '12%'."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip().strip("$€£%").replace(",", "").replace("_", "").strip()
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def found_in(answer: Any, texts: Iterable[str]) -> bool:
    """Whether `answer` appears in any of `texts`: as a number (commas, rounding to the answer's decimals
    and percentages allowed) or, for a string, as the run of its words."""
    number = as_number(answer)
    words = words_of(answer) if isinstance(answer, str) else []
    decimals = _answer_decimals(answer)
    for text in texts:
        if not text:
            continue
        if number is not None and number_in(number, decimals, text):
            return True
        if words and words_in(words, text):
            return True
    return False


def words_in(words: list[str], text: str) -> bool:
    joined = " ".join(words)
    return f" {joined} " in f" {' '.join(words_of(text))} "


_ID = re.compile(r"[^\W_]*\d[\w-]*")


def value_claims(answer: Any) -> list[Any]:
    """What a short answer claims that a model could invent: the number itself, or in a string each number and id
    (a token holding a digit: "64", "2022", "T-0193", "E503"); [] for words, yes/no, labels and empty results,
    which a check of what output showed cannot judge (issue 44: "Yes" and "Billing, with 64 tickets" are
    ordinary correct answers)."""
    if not short_answer(answer):
        return []
    if not isinstance(answer, str):
        return [answer]
    number = as_number(answer)
    if number is not None:
        return [answer]
    return claims_in(answer)


def claims_in(text: str) -> list[str]:
    """The numbers and ids (tokens holding a digit) a text states, in order, once each."""
    return list(dict.fromkeys(m.group().strip("-") for m in _ID.finditer(text) if m.group().strip("-")))


def _answer_decimals(value: Any) -> int:
    """Decimal places an answer is given to (a number's repr, or a string such as '12.35%')."""
    return _str_decimals(value if isinstance(value, str) else repr(value))
