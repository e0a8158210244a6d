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


def _citation_text(value: Any) -> str | None:
    """The quoted text of a citation {"text" or "quote": ..., "source": ..., "page": ...}, else None."""
    if isinstance(value, dict) and ("source" in value or "page" in value):
        text = value.get("text", value.get("quote"))
        return text if isinstance(text, str) else None
    return None


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif (cited := _citation_text(value)) is not None:
        yield cited
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
        elif (cited := _citation_text(value)) is not None:
            add(cited)
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


@dataclass(frozen=True)
class Citation:
    """A quote the answer places: `{"text": ..., "source": "contract.pdf", "page": 12}` anywhere in it
    ("quote" for "text"; source and page each optional, at least one given). Text is normalised."""

    text: str
    source: str | None = None
    page: int | None = None


def extract_citations(answer: Any) -> list[Citation]:
    """The distinct citations of an answer, in order of appearance (see `Citation`)."""
    found: list[Citation] = []
    stack: list[tuple[Any, int]] = [(answer, 0)]
    while stack:
        value, depth = stack.pop()
        cited = _citation_text(value)
        if cited is not None and normalise(cited):
            page, source = value.get("page"), value.get("source")
            citation = Citation(normalise(cited), str(source) if source not in (None, "") else None,
                                int(page) if isinstance(page, int | float) and not isinstance(page, bool) else None)
            found += [] if citation in found else [citation]
        elif depth <= 20 and isinstance(value, dict | list | tuple):
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in reversed(list(items)))
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
    source: str | None = None  # the document (its path within a folder input) where the quote was found
    page: int | None = None    # 1-based page, slide, sheet, section or message of that document
    label: str | None = None   # that page's heading, slide title, sheet name or subject

    def to_dict(self) -> dict[str, Any]:
        return {"quote": self.quote, "found": self.found, "where": self.where, "checked": self.checked,
                "input": self.input, "row": self.row, "offset": self.offset, "column": self.column,
                "source": self.source, "page": self.page, "label": self.label}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(quote=str(data.get("quote", "")), found=bool(data.get("found")), where=data.get("where"),
                   checked=bool(data.get("checked", True)), input=data.get("input"), row=data.get("row"),
                   offset=data.get("offset"), column=data.get("column"), source=data.get("source"),
                   page=data.get("page"), label=data.get("label"))
