"""Quotes in an answer checked against the run's inputs: `QuotesFound`, a verify guard.

Entry points: `QuotesFound()` (used as `RLM(..., verify=QuotesFound())` or `%%rlm --verify quotes`),
`extract_quotes` (the quotes of an answer), `search_inputs` (look quotes up in a run's inputs) and
`normalise` / `quote_pattern` (whitespace-forgiving matching), `extract_citations` (the citations
`{"text": ..., "source": "contract.pdf", "page": 12}` of an answer) and `check_documents`.

A quote is a passage in quotation marks ("...", “...”, «...», „...“) of at least `min_chars`
characters anywhere in the answer, or the string value(s) of a field named like quote / quotes /
evidence / excerpt / citation in a structured answer (any length). Matching is verbatim after
whitespace normalisation: every run of whitespace, line breaks included, counts as one space. The
matcher is a regex of the quote's words joined by `\\s+`, so a text is searched as it is, without a
normalised copy, and the offset found is the offset in the original text.

Inputs are searched without loading a big input whole, within a deadline: files are read in
overlapping chunks; tables (pandas, Arrow tables and datasets, DuckDB relations, Polars frames,
Parquet and CSV files) are streamed as record batches of their string columns and searched through
DuckDB, one query per batch and column for all quotes still missing, with cell whitespace normalised
in SQL. Each quote's first hit is kept; quotes the deadline leaves unsearched are marked
`checked=False`. A hostile answer cannot hold the run: at most `max_quotes` quotes are checked, within
`time_limit` seconds, and anything left unchecked fails the attempt with a request to quote less; the
per-quote findings (found where / not found / not checked) go into the attempt's event for the views.

Document inputs (kinds "document", "documents", "workbook", "workbooks") are not searched here: their text comes from C parsers
that never see a hostile file in the host process, so `check_documents` looks the quotes up page by
page in a confined helper (rlmnb._guards.quote_pages), and a finding names the document and page. A
citation must be on that page of that document, or the attempt fails saying where the text is.
"""

from __future__ import annotations

import os
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmnb._ground.errors import ConfigError
from rlmnb._guards.quote_pages import quote_pattern, search_documents

__all__ = ["BATCH_ROWS", "FILE_CHUNK", "MAX_QUOTE_CHARS", "MAX_STRINGS", "OVERLAP", "QUOTE_FIELDS", "SHOWN_MISSING",
           "DOCUMENT_KINDS", "Citation", "Finding", "QuotesFound", "Search", "check_documents", "document_inputs",
           "extract_citations", "extract_quotes", "normalise", "quote_pattern", "search_inputs", "table_batches"]
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


# ---- looking quotes up in the inputs ---------------------------------------------------------------
FILE_CHUNK = 4 << 20  # characters read from a file at a time
OVERLAP = 4 * MAX_QUOTE_CHARS  # kept from the previous chunk, so a quote across a chunk edge is still found
BATCH_ROWS = 200_000
MAX_STRINGS = 200_000  # strings of a list/dict input searched
_TABLE_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv"}
_TEXT_SKIP = (".png", ".jpg", ".jpeg", ".gif", ".pdf", ".zip", ".gz", ".bin", ".so", ".pyc", ".arrow", ".feather")


class Search:
    """Findings of one check; `missing` are the quotes not found yet."""

    def __init__(self, quotes: list[str], deadline: float) -> None:
        self.quotes = [q for q in quotes if len(q) <= MAX_QUOTE_CHARS]
        self.too_long = [q for q in quotes if len(q) > MAX_QUOTE_CHARS]
        self.deadline = deadline
        self.found: dict[str, Finding] = {}
        self._patterns = {q: quote_pattern(q) for q in self.quotes}
        self.timed_out = False

    @property
    def missing(self) -> list[str]:
        return [q for q in self.quotes if q not in self.found]

    def late(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.timed_out = True
        return self.timed_out

    def hit(self, quote: str, name: str, *, offset: int | None = None, row: int | None = None,
            column: str | None = None, detail: str = "", source: str | None = None, page: int | None = None,
            label: str | None = None) -> None:
        if quote in self.found:
            return
        parts = [f"input {name!r}"] + ([detail] if detail else [])
        if source is not None and source != name:
            parts.append(f"document {source!r}")
        if page is not None:
            parts.append(f"page {page:,}" + (f" ({label!r})" if label else ""))
        if row is not None:
            parts.append(f"row {row:,}")
        if column is not None:
            parts.append(f"column {column!r}")
        if offset is not None:
            parts.append(f"offset {offset:,}")
        self.found[quote] = Finding(quote, True, ", ".join(parts), input=name, row=row, offset=offset, column=column,
                                    source=source, page=page, label=label or None)

    def findings(self) -> list[Finding]:
        out = []
        for quote in self.quotes:
            if quote in self.found:
                out.append(self.found[quote])
            else:
                out.append(Finding(quote, False, checked=not self.timed_out))
        out += [Finding(q, False, "too long to be a quote") for q in self.too_long]
        return out

    # ---- text ------------------------------------------------------------------------------------
    def text(self, name: str, text: str, *, base: int = 0, row: int | None = None, detail: str = "") -> None:
        for quote in self.missing:
            if self.late():
                return
            match = self._patterns[quote].search(text)
            if match is not None:
                self.hit(quote, name, offset=base + match.start(), row=row, detail=detail)

    def file(self, name: str, path: Path, detail: str = "") -> None:
        kind = _TABLE_SUFFIXES.get(path.suffix.lower())
        if kind is not None:
            self.table(name, _file_batches(path, kind), detail)
            return
        if path.suffix.lower() in _TEXT_SKIP:
            return
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                carry, base = "", 0
                while self.missing and not self.late():
                    chunk = handle.read(FILE_CHUNK)
                    if not chunk:
                        return
                    window = carry + chunk
                    self.text(name, window, base=base - len(carry), detail=detail)
                    carry = window[-OVERLAP:]
                    base += len(chunk)
        except OSError:
            return

    def folder(self, name: str, root: Path) -> None:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for file in sorted(files):
                if not self.missing or self.late():
                    return
                path = Path(folder) / file
                self.file(name, path, detail=f"file {str(path.relative_to(root))!r}")

    def strings(self, name: str, value: Any) -> None:
        for count, (where, text) in enumerate(_walk_strings(value, "")):
            if count >= MAX_STRINGS or not self.missing or self.late():
                return
            self.text(name, text, detail=f"item {where}")

    # ---- tables ----------------------------------------------------------------------------------
    def table(self, name: str, batches: Iterable[Any], detail: str = "") -> None:
        """Search the string columns of Arrow record batches through DuckDB, batch by batch."""
        import duckdb
        import pyarrow as pa

        con = duckdb.connect()
        try:
            start = 0
            for batch in batches:
                if not self.missing or self.late():
                    return
                strings = [i for i, f in enumerate(batch.schema) if _is_string(pa, f.type)]
                if strings and batch.num_rows:
                    names = [f"c{i}" for i in range(len(strings))]
                    frame = pa.table([batch.column(i) for i in strings] + [pa.array(range(start, start + batch.num_rows),
                                                                                   pa.int64())],
                                     names=[*names, "row_"])
                    con.register("b", frame)
                    for label, column in zip(names, strings, strict=True):
                        self._column(con, pa, name, label, batch.schema.field(column).name, detail)
                    con.unregister("b")
                start += batch.num_rows
        finally:
            con.close()

    def _column(self, con: Any, pa: Any, name: str, label: str, column: str, detail: str) -> None:
        missing = self.missing
        if not missing or self.late():
            return
        con.register("q", pa.table({"qid": list(range(len(missing))), "pat": missing}))
        rows = con.execute(
            f"SELECT q.qid, min(b.row_) FROM b JOIN q "  # noqa: S608 - generated column labels, no user text
            f"ON contains(trim(regexp_replace(b.{label}, '\\s+', ' ', 'g')), q.pat) GROUP BY q.qid").fetchall()
        con.unregister("q")
        for qid, row in sorted(rows, key=lambda r: r[1]):
            self.hit(missing[qid], name, row=int(row), column=column, detail=detail)


def _is_string(pa: Any, kind: Any) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(kind)))


def _walk_strings(value: Any, where: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > 20:
        return
    if isinstance(value, str):
        yield where or "[0]", value
    elif isinstance(value, dict) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        for key in list(value.keys()):
            yield from _walk_strings(value[key], f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, list | tuple) or type(value).__name__ == "ReadOnlySequence":
        for i, item in enumerate(value):
            yield from _walk_strings(item, f"{where}[{i}]", depth + 1)


def _file_batches(path: Path, kind: str) -> Iterator[Any]:
    if kind == "parquet":
        import pyarrow.dataset as ds

        yield from ds.dataset(str(path), format="parquet").to_batches(batch_size=BATCH_ROWS)
        return
    import duckdb

    con = duckdb.connect()
    try:
        yield from con.read_csv(str(path)).to_arrow_reader(BATCH_ROWS)
    finally:
        con.close()


def table_batches(value: Any) -> Any:
    """An iterator of Arrow record batches of a table value, read a slice at a time; None when not a table."""
    cls = type(value)
    module, name = cls.__module__.split(".")[0], cls.__name__
    if module == "pandas" and name in ("DataFrame", "Series"):
        return _pandas_batches(value.to_frame() if name == "Series" else value)
    if module == "pyarrow":
        if name == "Table":
            return iter(value.to_batches(max_chunksize=BATCH_ROWS))
        if name == "RecordBatch":
            return iter([value])
        if hasattr(value, "to_batches") and hasattr(value, "count_rows"):
            return iter(value.to_batches(batch_size=BATCH_ROWS))
    if module == "duckdb" and hasattr(value, "to_arrow_reader"):
        return iter(value.to_arrow_reader(BATCH_ROWS))
    if module == "polars":
        if name == "DataFrame":
            return iter(value.to_arrow().to_batches(max_chunksize=BATCH_ROWS))
        if name == "LazyFrame":
            return (b for frame in value.collect_batches(chunk_size=BATCH_ROWS) for b in frame.to_arrow().to_batches())
        if name == "Series":
            return iter(value.to_frame().to_arrow().to_batches(max_chunksize=BATCH_ROWS))
    return None


def _pandas_batches(frame: Any) -> Iterator[Any]:
    import pyarrow as pa

    columns = [c for c in frame.columns if str(frame[c].dtype) in ("object", "str", "string")]
    for start in range(0, len(frame), BATCH_ROWS):
        part = frame.iloc[start: start + BATCH_ROWS]
        arrays = [pa.array([v if isinstance(v, str) else None for v in part[c].tolist()], pa.string())
                  for c in columns]
        yield pa.RecordBatch.from_arrays(arrays, names=[str(c) for c in columns]) if columns else \
            pa.RecordBatch.from_pydict({})


DOCUMENT_KINDS = ("document", "documents", "workbook", "workbooks")  # searched page by page by check_documents, not here


def search_inputs(quotes: list[str], fields: Iterable[Any], *, time_limit: float) -> Search:
    """Look every quote up in every input (text, files, folders, tables, containers) until all are found.
    Document inputs are skipped (their text is searched in a confined helper: `check_documents`)."""
    search = Search(quotes, time.monotonic() + time_limit)
    for field in fields:
        if not search.missing or search.late():
            break
        if getattr(getattr(field, "info", None), "kind", None) in DOCUMENT_KINDS:
            continue
        name = str(getattr(field, "name", "?"))
        value = getattr(field, "source", field)
        _search_value(search, name, value)
        for extra in getattr(field, "read_paths", ()):  # i10's file tables: the files behind the input
            if search.missing and not search.late() and Path(extra) != _as_path(value):
                _search_path(search, name, Path(extra))
    return search


def _as_path(value: Any) -> Path | None:
    if isinstance(value, Path):
        return value
    root = getattr(value, "root", None)
    return Path(root) if isinstance(root, str | Path) else None


def _search_path(search: Search, name: str, path: Path) -> None:
    if path.is_dir():
        search.folder(name, path)
    elif path.is_file():
        search.file(name, path)


def _search_value(search: Search, name: str, value: Any) -> None:
    if isinstance(value, str):
        search.text(name, value)
        return
    if isinstance(value, bytes | bytearray | memoryview):
        search.text(name, bytes(value).decode("utf-8", errors="replace"))
        return
    path = _as_path(value)
    if path is not None:
        _search_path(search, name, path)
        return
    batches = table_batches(value)
    if batches is not None:
        search.table(name, batches)
        return
    search.strings(name, value)



# ---- document inputs: findings with pages, citations ----------------------------------------------
def document_inputs(fields: Sequence[Any]) -> list[tuple[str, str, str]]:
    """(input name, shown name, path) of every document of the document inputs among `fields`; the shown
    name is the file's name for a one-document input and its path within a folder or glob input."""
    found: list[tuple[str, str, str]] = []
    for f in fields:
        info = getattr(f, "info", None)
        kind, root = getattr(info, "kind", None), getattr(info, "path", None)
        if not root or kind not in DOCUMENT_KINDS:
            continue
        if kind in ("document", "workbook"):
            found.append((f.name, os.path.basename(str(root)), str(root)))
            continue
        for rel in (getattr(f, "plan", None) or {}).get("files", ()):
            found.append((f.name, rel, rel if os.path.isabs(rel) else os.path.join(str(root), *rel.split("/"))))
    return found


def _same(cited: str, shown: str, name: str) -> bool:
    return cited in (shown, name) or os.path.basename(cited) == os.path.basename(shown)


def check_documents(search: Search, citations: Sequence[Citation],
                    fields: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    """Find the quotes `search` still misses, and every cited quote, in the document
    inputs, recording each finding's document and page in `search`; check each citation's source and page.

    Returns the problems of misplaced citations (one sentence each: quoted text, where cited, where it is)
    and the documents the helper could not read (shown name -> sentence).
    """
    docs = document_inputs(fields)
    if not docs:
        return [], {}
    cited = {c.text for c in citations if c.source is not None or c.page is not None}
    wanted = [q for q in search.quotes if q in cited or q not in search.found]
    every: dict[str, list[str] | None] = {}  # where each cited quote must be looked for: its source, or everywhere
    for c in citations:
        if c.text in wanted:
            named = [shown for name, shown, _ in docs if c.source is not None and _same(c.source, shown, name)]
            before = every.get(c.text, [])
            every[c.text] = None if not named or before is None else [*before, *named]
    first = {s for d in every.values() for s in d or ()}  # the cited documents are read first
    order = sorted(docs, key=lambda d: d[1] not in first)
    pages = search_documents(wanted, [(shown, path) for _, shown, path in order], deadline=search.deadline,
                             every=every)
    if pages.timed_out:
        search.timed_out = True
    input_of = {shown: name for name, shown, _ in docs}
    for quote in search.missing:
        if pages.hits.get(quote):
            h = pages.hits[quote][0]
            search.hit(quote, input_of[h.source], source=h.source, page=h.page, label=h.label)
    problems: list[str] = []
    for c in citations:
        hits = pages.hits.get(c.text, [])
        if not hits or c.text not in search.quotes:
            continue  # not in any document: an ordinary missing quote, or found in another input
        here = [h for h in hits if c.source is None or _same(c.source, h.source, input_of[h.source])]
        good = [h for h in here if c.page is None or h.page <= c.page <= max(h.page, h.end_page)]
        if good:
            search.found.pop(c.text, None)
            search.hit(c.text, input_of[good[0].source], source=good[0].source, page=good[0].page,
                       label=good[0].label)
            continue
        if here:
            at = ", ".join(str(h.page) for h in here[:5])
            why = (f"not on page {c.page} of {here[0].source}: it is on page{'s' if len(here) > 1 else ''} {at}")
        else:
            why = f"not in {c.source}: it is in {hits[0].source}, page {hits[0].page}"
        search.found[c.text] = _finding(c, why, input_of[(here or hits)[0].source])
        problems.append(f'"{c.text[:120]}" is {why}')
    return problems, pages.errors


def _finding(citation: Citation, why: str, name: str) -> Finding:
    return Finding(citation.text, False, why, input=name, source=citation.source, page=citation.page)


# ---- the guard -------------------------------------------------------------------------------------
SHOWN_MISSING = 10  # missing quotes listed in the revision request
_FOUND = Finding("", True)


class QuotesFound:
    """Confidence 1 when every quote of the answer is in the inputs (whitespace forgiven), else 0.

    Args:
        min_chars: shortest passage in quotation marks that counts as a quote (20); fields named
            quote / quotes / evidence / excerpt / citation count at any length.
        max_quotes: most distinct quotes checked per answer (100); more fail the attempt.
        time_limit: seconds the lookup may take (20.0); quotes not reached by then fail the attempt.
    """

    def __init__(self, *, min_chars: int = 20, max_quotes: int = 100, time_limit: float = 20.0) -> None:
        for name, value in (("min_chars", min_chars), ("max_quotes", max_quotes)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"QuotesFound {name} must be a positive whole number, got {value!r}.")
        if not isinstance(time_limit, int | float) or isinstance(time_limit, bool) or time_limit <= 0:
            raise ConfigError(f"QuotesFound time_limit must be a positive number of seconds, got {time_limit!r}.")
        self.min_chars = min_chars
        self.max_quotes = max_quotes
        self.time_limit = float(time_limit)

    def __call__(self, answer: Any, context: dict[str, Any]) -> tuple[float, str]:
        quotes = extract_quotes(answer, min_chars=self.min_chars)
        checked, skipped = quotes[: self.max_quotes], quotes[self.max_quotes:]
        inputs = tuple(context.get("inputs") or ())
        search = search_inputs(checked, inputs, time_limit=self.time_limit)
        citations = [c for c in extract_citations(answer) if c.text in checked]
        misplaced, unread = check_documents(search, citations, inputs)  # document inputs: pages, citations
        findings = search.findings()
        context["details"] = {"quotes": [f.to_dict() for f in findings], "skipped": len(skipped),
                              "timed_out": search.timed_out, "unread": unread}
        if not quotes:
            return 1.0, "the answer quotes nothing"
        wrong = {c.text for c in citations if not search.found.get(c.text, _FOUND).found}
        missing = [f.quote for f in findings if not f.found and f.checked and f.quote not in wrong]
        unchecked = [f.quote for f in findings if not f.checked]
        problems = [f"{len(misplaced)} cited quote{'s are' if len(misplaced) > 1 else ' is'} not where the answer "
                    f"says: {'; '.join(misplaced[:SHOWN_MISSING])}. Cite the page the text is on"] if misplaced else []
        if unread and missing:
            problems.append("some documents could not be searched: " + "; ".join(list(unread.values())[:5]))
        if missing:
            shown = "; ".join(f'"{q[:200]}"' for q in missing[:SHOWN_MISSING])
            more = f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
            problems.append(f"{len(missing)} of {len(quotes)} quotes are not in the inputs word for word: "
                            f"{shown}{more}. Quote the data exactly (copy it with code) or drop those quotes")
        if skipped or unchecked:
            problems.append(f"{len(skipped) + len(unchecked)} of {len(quotes)} quotes could not be checked (at most "
                            f"{self.max_quotes} quotes in {self.time_limit:g} s); quote fewer, shorter passages")
        if problems:
            return 0.0, "; ".join(problems)
        return 1.0, f"all {len(quotes)} quote{'s' if len(quotes) != 1 else ''} found in the inputs"

    def __repr__(self) -> str:
        return f"QuotesFound(min_chars={self.min_chars}, max_quotes={self.max_quotes}, time_limit={self.time_limit:g})"
