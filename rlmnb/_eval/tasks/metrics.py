"""Metrics by name, for tasks whose rows say how they are scored (JSON Lines tasks, published datasets).

Every metric takes the list of accepted answers and a prediction and returns a score in [0, 1]; a
malformed prediction scores 0, never raises.

- `exact`: 1 when the normalised prediction equals any answer (`scoring.normalize_text`).
- `numeric`: `0.75 ** |answer - prediction|` (OOLONG's score), the best over the answers.
- `contains`: 1 when any answer appears, case-insensitive, in the prediction (RULER's string_match_part).
- `all`: the fraction of the answers that appear in the prediction (RULER's string_match_all).
- `choice`: 1 when the letter chosen (A-D: "B", "(B)", "The correct answer is (B)") is the answer's letter.

Metrics for answers in the forms a person gives them (a sentence around the value, a word for yes or no,
a date in words), each 1 or 0:

- `number`: the prediction states one number (thousands separators and a trailing % allowed; digits
  inside a word such as E503 or T-0042 are not numbers), equal to the answer at the answer's precision
  (1.2 accepts 1.22; 37 accepts 37.0). Two different numbers ("12 or 37") score 0.
- `word`: an answer appears as a whole word or phrase, case-insensitive ("Billing, with 64 tickets").
- `yes_no`: the prediction says yes or no (a bool, a leading yes/no/true/false, or one of the words alone
  in a sentence) and it is the answer's.
- `date`: every date the prediction states (ISO 2022-01-05, 2022/01/05, "January 5, 2022", "5 Jan 2022",
  a timestamp) is the answer's date, and it states one.
- `quote`: the answer's text appears in the prediction with whitespace and quote marks normalised
  (case kept: a quote is verbatim).
- `set`: the items the prediction lists (a list, a JSON or Python list in text, or items named in prose)
  are exactly the answer's (a list). An empty answer accepts an empty list or a text that says there
  are none; None or a blank text is no answer.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from rlmnb._eval.tasks.scoring import exact_match, numeric_score, unwrap
from rlmnb._ground.errors import ConfigError

__all__ = ["METRICS", "all_of", "choice", "chosen_letter", "contains", "date", "exact", "get_metric", "listed_items",
           "numeric", "number", "quote", "same_set", "stated_dates", "stated_numbers", "word", "yes_no",
           "yes_or_no"]


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


# ---- answers in ordinary forms -------------------------------------------------------------------

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_STANDALONE_NUMBER = re.compile(r"(?<![\w.\-])-?\d+(?:\.\d+)?(?![\w])")


def stated_numbers(prediction: Any) -> list[Decimal]:
    """The numbers a prediction states, in order: a real number itself, or the standalone numbers of its text.

    "1,234" is one number; digits inside a word (E503, T-0042, 2nd) are not numbers; a bool states none.
    """
    value = unwrap(prediction)
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        try:
            return [Decimal(str(value))]
        except InvalidOperation:  # nan and inf are no number of anything
            return []
    text = _THOUSANDS.sub("", _text(value))
    return [Decimal(found) for found in _STANDALONE_NUMBER.findall(text)]


def _precision(answer: Any) -> int:
    """Decimal places the answer is given to (0 for an integer)."""
    exponent = Decimal(str(answer)).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def number(answers: Sequence[Any], prediction: Any) -> float:
    distinct = set(stated_numbers(prediction))
    if len(distinct) != 1:
        return 0.0
    got = distinct.pop()
    for answer in answers:
        try:
            truth = Decimal(str(answer))
        except InvalidOperation:
            continue
        places = _precision(answer)
        if round(got, places) == round(truth, places):
            return 1.0
    return 0.0


def _whole(phrase: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(phrase.strip())}(?![\w-])", re.I)


def word(answers: Sequence[Any], prediction: Any) -> float:
    text = _text(prediction)
    return 1.0 if any(str(a).strip() and _whole(str(a)).search(text) for a in answers) else 0.0


_YES, _NO = ("yes", "true"), ("no", "false", "none")


def yes_or_no(prediction: Any) -> bool | None:
    """True for yes, False for no, None when the prediction says neither or both."""
    value = unwrap(prediction)
    if isinstance(value, bool):
        return value
    words = re.findall(r"[a-z]+", _text(value).lower())
    if not words:
        return None
    if words[0] in _YES or words[0] in _NO:
        return words[0] in _YES
    said = {w in ("yes", "true") for w in words if w in ("yes", "true", "no", "false")}
    return said.pop() if len(said) == 1 else None


def yes_no(answers: Sequence[Any], prediction: Any) -> float:
    got = yes_or_no(prediction)
    return 1.0 if got is not None and any(yes_or_no(a) is got for a in answers) else 0.0


_MONTHS = {name: number for number, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")), start=1) for name in names}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_FORMS = (
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), ("y", "m", "d")),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), ("mon", "d", "y")),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), ("d", "mon", "y")),
)


def stated_dates(prediction: Any) -> set[dt.date]:
    """The calendar dates a prediction states (a date or datetime itself, or the dates written in its text)."""
    value = unwrap(prediction)
    if isinstance(value, dt.datetime):
        return {value.date()}
    if isinstance(value, dt.date):
        return {value}
    text = _text(value)
    found: set[dt.date] = set()
    for pattern, order in _DATE_FORMS:
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups(), strict=True))
            month = _MONTHS[parts["mon"].lower()] if "mon" in parts else int(parts["m"])
            try:
                found.add(dt.date(int(parts["y"]), month, int(parts["d"])))
            except ValueError:  # 2022-13-45 is no date
                continue
    return found


def date(answers: Sequence[Any], prediction: Any) -> float:
    got = stated_dates(prediction)
    return 1.0 if len(got) == 1 and any(stated_dates(a) == got for a in answers) else 0.0


_QUOTE_MARKS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _plain(text: str) -> str:
    return " ".join(text.translate(_QUOTE_MARKS).split())


def quote(answers: Sequence[Any], prediction: Any) -> float:
    text = _plain(_text(prediction))
    return 1.0 if any(_plain(str(a)) and _plain(str(a)) in text for a in answers) else 0.0


_NONE_SAID = re.compile(r"\b(?:none|no|not|nothing|neither|nor|zero|empty)\b|n't\b", re.I)
_CLAUSES = re.compile(r"[.;:!?\n,]|\bbut\b|\bhowever\b", re.I)
_LEAD_IN = re.compile(r"(?:after|based|according|from|in|having|upon|on|looking|reading|searching|checking|"
                      r"scanning|going|across|within|among|throughout)\b", re.I)


def says_none(text: str) -> bool:
    """Whether prose answers "none": its first clause (past lead-ins such as "After reading every clause,") says so.
    "No clause mentions it" and "After reading them all, none does" say none; "The contract mentions it, but the
    terms are not clear" makes a claim first and is not an empty answer, whatever negation comes later."""
    for clause in _CLAUSES.split(text):
        clause = clause.strip()
        if not clause or _LEAD_IN.match(clause):
            continue
        return bool(_NONE_SAID.search(clause))
    return False


def listed_items(prediction: Any) -> list[str] | None:
    """The items a prediction lists when it is a list, or text holding a JSON or Python list; else None."""
    value = unwrap(prediction)
    if isinstance(value, str):
        text = value.strip()
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(text)
                break
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    if isinstance(value, list | tuple | set | frozenset):
        return [str(v).strip() for v in value]
    return None


def _shape(item: str) -> str:
    """A pattern for tokens shaped like `item`: letters for letters, digits for digits (E503 -> [A-Za-z]\\d\\d\\d)."""
    return "".join(r"[A-Za-z]" if c.isalpha() else r"\d" if c.isdigit() else re.escape(c) for c in item)


def _named_in_prose(expected: Iterable[str], text: str) -> set[str] | None:
    """The expected items a text names, or None when it also names another item of the same shape."""
    items = [e for e in expected if e]
    named = {e.lower() for e in items if _whole(e).search(text)}
    shapes = {_shape(e) for e in items}
    for shape in shapes:
        for token in re.findall(rf"(?<![\w-]){shape}(?![\w-])", text):
            if token.lower() not in {e.lower() for e in items}:
                return None
    return named


def same_set(answers: Sequence[Any], prediction: Any) -> float:
    listed, text = listed_items(prediction), _text(prediction)
    if listed is None and not text.strip():
        return 0.0  # None or a blank text is no answer, not an empty one
    for answer in answers:
        expected = [str(a).strip() for a in (answer if isinstance(answer, list | tuple | set) else [answer])]
        want = {e.lower() for e in expected if e}
        if listed is not None:
            got = {item.lower() for item in listed if item}
        elif not want:
            got = set() if says_none(text) else {text}
        else:
            named = _named_in_prose(expected, text)
            got = named if named is not None else {"<another item>"}
        if got == want:
            return 1.0
    return 0.0


METRICS: dict[str, Callable[[Sequence[Any], Any], float]] = {
    "exact": exact, "numeric": numeric, "contains": contains, "all": all_of, "choice": choice,
    "string_match_part": contains, "string_match_all": all_of,
    "number": number, "word": word, "yes_no": yes_no, "date": date, "quote": quote, "set": same_set,
}


def get_metric(name: str) -> Callable[[Sequence[Any], Any], float]:
    """The metric called `name`; ConfigError listing them otherwise."""
    metric = METRICS.get(str(name).strip().lower())
    if metric is None:
        raise ConfigError(f"unknown metric {name!r}: choose from {', '.join(METRICS)}.")
    return metric
