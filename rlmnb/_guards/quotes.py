"""Quotes in an answer: finding them, and matching them against text with whitespace forgiven.

A quote is a passage in quotation marks ("...", “...”, «...», „...“) of at least `min_chars`
characters anywhere in the answer, or the string value(s) of a field named like quote / quotes /
evidence / excerpt / citation in a structured answer (any length). Matching is verbatim after
whitespace normalisation: every run of whitespace, line breaks included, counts as one space.
The matcher is a regex of the quote's words joined by `\\s+`, so a text is searched as it is, without
a normalised copy, and the offset found is the offset in the original text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

QUOTE_FIELDS = ("quote", "quotes", "evidence", "excerpt", "excerpts", "citation", "citations", "source_text")
MAX_QUOTE_CHARS = 2_000  # longer "quotes" are not checked (and fail): nobody quotes pages word for word
_N = MAX_QUOTE_CHARS + 1  # a longer "quote" is kept whole (to fail), never cut into a shorter one
_MARKS = re.compile(rf'"([^"]{{1,{_N}}})"|“([^”]{{1,{_N}}})”|«([^»]{{1,{_N}}})»|„([^“”]{{1,{_N}}})[“”]')
_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFC, every whitespace run as one space, trimmed."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _field_matches(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return name in QUOTE_FIELDS or name.endswith(("_quote", "_quotes", "_evidence", "_excerpt"))


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)


def extract_quotes(answer: Any, *, min_chars: int = 20) -> list[str]:
    """The distinct quotes of an answer (normalised), in order of appearance."""
    found: list[str] = []

    def add(text: str) -> None:
        quote = normalise(text)
        if quote and quote not in seen:
            seen.add(quote)
            found.append(quote)

    seen: set[str] = set()

    def walk(value: Any, depth: int) -> None:
        if depth > 20:
            return
        if isinstance(value, str):
            for match in _MARKS.finditer(value):
                text = next(g for g in match.groups() if g is not None)
                if len(normalise(text)) >= min_chars:
                    add(text)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _field_matches(key):
                    for text in _strings(item):
                        add(text)
                else:
                    walk(item, depth + 1)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, depth + 1)

    walk(answer, 0)
    return found


def quote_pattern(quote: str) -> re.Pattern[str]:
    """A regex that finds `quote` in raw text with any whitespace between its words."""
    return re.compile(r"\s+".join(re.escape(word) for word in quote.split(" ")))


@dataclass(frozen=True)
class Finding:
    """One quote and where it was found (None when it was not, or was not checked)."""

    quote: str
    found: bool
    where: str | None = None  # e.g. "input 'report', offset 1,204" or "input 'tickets', row 17, column 'text'"
    checked: bool = True
    input: str | None = None
    row: int | None = None
    offset: int | None = None
    column: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"quote": self.quote, "found": self.found, "where": self.where, "checked": self.checked,
                "input": self.input, "row": self.row, "offset": self.offset, "column": self.column}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(quote=str(data.get("quote", "")), found=bool(data.get("found")), where=data.get("where"),
                   checked=bool(data.get("checked", True)), input=data.get("input"), row=data.get("row"),
                   offset=data.get("offset"), column=data.get("column"))
