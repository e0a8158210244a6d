"""Passages of a text: where it names a question's terms, and whether it holds what an answer states.

Entry points:
- `question_names(question)`: the names a question asks about (numbered, hyphenated, capitalised terms).
- `mentions(text, terms, ...)`: every place `text` names one of `terms` that it names between one and `rare`
  times, as a `Mention` (term, the passage's span, its words), in text order; `question_mentions(question,
  text, ...)` the same for the question's rarest names, as (name, passage) pairs, rarest first.
- `passage_around(text, start, end, width)`: the line around a span, or about `width` characters of it.
- `held_by(answer, text, question=...)` / `echoes_question(...)`: whether a text holds what an answer states
  beyond the question (its numbers, else half its longer words), and whether an answer only echoes the question.

Pure Python and the standard library only: the engine uses it on the host, and the sandbox's reading
primitives (`rlmnb._operators.reading`) use it beside the data. Matching is case-insensitive and by whole word
(a term is never found inside a longer word). A term named more than `rare` times is no place to look: the
passages would be the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ECHO_WORDS", "Mention", "RARE_MENTIONS", "decimals_of", "echoes_question", "held_by", "long_words", "mentions", "number_in", "passage_around", "question_mentions", "question_names", "stated_beyond", "word_pattern", "words_of"]

RARE_MENTIONS = 5
"""Most times a text may name a term for its places to be quoted (`mentions`, `question_mentions`)."""
ECHO_WORDS = 3
"""Words (of four or more letters) an answer made only of the question's words needs before `echoes_question` checks them."""

_TERM = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_SENTENCE_START = re.compile(r"(?:^|[.?!:\n\[(]\s*)$")
_NUMBER = re.compile(r"(?<![\d.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Mention:
    """One place a text names a term: `text[start:end]` is the passage (its line, or about `width` characters of
    it cut between words); `passage` is those words with whitespace folded and "..." where cut."""

    term: str
    start: int
    end: int
    passage: str

    def to_dict(self) -> dict[str, str | int]:
        return {"term": self.term, "start": self.start, "end": self.end, "passage": self.passage}


def question_names(question: str) -> list[str]:
    """The names a question asks about, as written: its terms of three or more characters (hyphenated words whole;
    a plain number of four or more digits) that hold a digit, join words with a hyphen or underscore, are written in
    capitals, or start with a capital where no sentence starts."""
    names = []
    for m in _TERM.finditer(question):
        term = m.group()
        if len(term) < 3 or (term.isdigit() and len(term) < 4):  # "10", "190": counts and list numbers
            continue
        if (any(c.isdigit() for c in term) or "-" in term or "_" in term
                or (len(term) > 1 and term.isupper())
                or (term[0].isupper() and not _SENTENCE_START.search(question[max(0, m.start() - 3):m.start()]))):
            names.append(term)
    return list(dict.fromkeys(names))


def mentions(text: str, terms: Iterable[str], *, width: int = 240, rare: int = RARE_MENTIONS) -> list[Mention]:
    """Every place `text` names one of `terms` that it names between one and `rare` times, in text order.

    A passage overlapping one already taken is left out; passages are taken for the rarest terms first, so a term
    named once keeps its place beside a commoner one.

    Args:
        text: the text to search.
        terms: the words or names to look for (each matched whole, ignoring case; blank ones skipped).
        width: about how many characters a passage holds around its term (its line, when shorter).
        rare: the most times a term may occur for its places to count.

    Returns:
        The places, ordered by where their passages start.
    """
    found = _passages(text, _rare_hits(text, terms, rare), width)
    return sorted(found, key=lambda m: m.start)


def question_mentions(question: str, text: str, *, width: int = 240, names: int = 4,
                      rare: int = RARE_MENTIONS) -> list[tuple[str, str]]:
    """(name, excerpt) for each place `text` mentions a name the question asks about (`question_names`) that it holds
    between one and `rare` times: the rarest `names` of them, each place's words as `passage_around` cuts them,
    places that overlap an earlier one left out. A name the input mentions more often is not where to look."""
    counted = _rare_hits(text, question_names(question), rare)[:names]
    return [(m.term, m.passage) for m in _passages(text, counted, width)]


def _rare_hits(text: str, terms: Iterable[str], rare: int) -> list[tuple[str, list[tuple[int, int]]]]:
    """(term, its spans) for each distinct term `text` holds between one and `rare` times, rarest first (a stable
    sort: terms equally rare keep their order)."""
    counted = []
    for term in dict.fromkeys(t for t in terms if t.strip()):
        hits = [(m.start(), m.end()) for m in re.finditer(word_pattern(term.strip()), text, re.IGNORECASE)]
        if 1 <= len(hits) <= rare:
            counted.append((term, hits))
    return sorted(counted, key=lambda c: len(c[1]))


def _passages(text: str, counted: list[tuple[str, list[tuple[int, int]]]], width: int) -> list[Mention]:
    """The passage around each hit, in the order given, leaving out one that overlaps a passage already taken."""
    found: list[Mention] = []
    for term, hits in counted:
        for start, end in hits:
            lo, hi, excerpt = passage_around(text, start, end, width)
            if not any(lo < m.end and m.start < hi for m in found):
                found.append(Mention(term, lo, hi, excerpt))
    return found


def word_pattern(word: str) -> str:
    return r"(?<![^\W_])" + re.escape(word) + r"(?![^\W_])"


def passage_around(text: str, start: int, end: int, width: int) -> tuple[int, int, str]:
    """(lo, hi, excerpt): the line of `text` holding [start, end), or at most about `width` characters of it cut
    between words, whitespace folded, "..." where cut."""
    lo, hi = max(0, start - width // 2), min(len(text), end + width // 2)
    line_start, line_end = text.rfind("\n", lo, start), text.find("\n", end, hi)
    if line_start >= 0:
        lo = line_start + 1
    elif lo > 0:  # cut between words
        lo = next((i + 1 for i in range(lo - 1, start) if text[i].isspace()), lo)
    if line_end >= 0:
        hi = line_end
    elif hi < len(text):
        hi = next((i for i in range(hi, end, -1) if text[i].isspace()), hi)
    head = "..." if lo > 0 and text[lo - 1] != "\n" else ""
    tail = "..." if hi < len(text) and text[hi] != "\n" else ""
    return lo, hi, head + " ".join(text[lo:hi].split()) + tail


# ---- whether a text holds an answer ----------------------------------------------------------------------------
def held_by(answer: str, text: str, *, question: str = "") -> bool | None:
    """Whether `text` holds what `answer` states beyond `question`: every number the answer gives that the question
    does not (commas allowed, rounded to the answer's decimals), or, for an answer without such numbers, at least
    half of its words of four or more letters that the question does not use.

    An answer of the question's own words states nothing beyond it: None (nothing to check: a choice the question
    offers, a restatement), unless it echoes the question (`echoes_question`); then False. A count or a summary the
    text never writes out is not held either: False says "check this", not "this is wrong"."""
    numbers, words = stated_beyond(answer, question)
    if numbers:
        return all(number_in(float(n.replace(",", "")), decimals_of(n), text) for n in numbers)
    if not words:  # the question's own words: checked only when there are enough of them
        return False if echoes_question(answer, text, question=question) else None
    have = set(words_of(text))
    return 2 * sum(w in have for w in words) >= len(words)


def echoes_question(answer: str, text: str, *, question: str) -> bool:
    """Whether `answer` is made only of `question`'s words and numbers, with `ECHO_WORDS` or more words of four or
    more letters, fewer than half of which `text` holds: an answer copied from the question (say, an example it
    carries), not read from `text`."""
    numbers, words = stated_beyond(answer, question)
    if numbers or words:
        return False
    words = long_words(answer)
    if len(words) < ECHO_WORDS:
        return False
    have = set(words_of(text))
    return 2 * sum(w in have for w in words) < len(words)


def stated_beyond(answer: str, question: str) -> tuple[list[str], list[str]]:
    """What `answer` states beyond `question`: its numbers the question does not give, and its words of four or
    more letters the question does not use (in order, once each)."""
    asked = set(words_of(question))
    numbers = [m.group() for m in _NUMBER.finditer(answer) if m.group().replace(",", "") not in asked]
    return numbers, [w for w in long_words(answer) if w not in asked]


def long_words(text: str) -> list[str]:
    """The words of `text` of four or more letters (not numbers), in order, once each."""
    return list(dict.fromkeys(w for w in words_of(text) if len(w) >= 4 and not w.isdigit()))


def words_of(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def decimals_of(value: str) -> int:
    text = value.strip().rstrip("%")
    return len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0


def number_in(number: float, decimals: int, text: str) -> bool:
    """Whether `text` shows `number` (rounded to `decimals`; commas and percentages allowed)."""
    target = abs(number)
    if target.is_integer() and decimals == 0:  # the common case first, without parsing every number
        plain = str(int(target))
        if plain not in text and f"{int(target):,}" not in text:
            return False
    return any(_close(float(m.group().replace(",", "")), target, decimals) for m in _NUMBER.finditer(text))


def _close(seen: float, target: float, decimals: int) -> bool:
    if math.isclose(seen, target, rel_tol=1e-9, abs_tol=1e-12):
        return True
    return bool(decimals) and (round(seen, decimals) == target or round(seen * 100, decimals) == target)
