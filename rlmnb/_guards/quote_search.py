"""Look quotes up in a run's inputs without loading a big input whole, within a deadline.

Text is searched as it is (see quotes.quote_pattern); files are read in overlapping chunks; tables
(pandas, Arrow tables and datasets, DuckDB relations, Polars frames, Parquet and CSV files) are
streamed as record batches of their string columns and searched through DuckDB, one query per batch
and column for all quotes still missing, with cell whitespace normalised in SQL. Each quote's first
hit is kept; quotes the deadline leaves unsearched are marked `checked=False`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rlmnb._guards.quotes import MAX_QUOTE_CHARS, Finding, quote_pattern

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
            column: str | None = None, detail: str = "") -> None:
        if quote in self.found:
            return
        parts = [f"input {name!r}"] + ([detail] if detail else [])
        if row is not None:
            parts.append(f"row {row:,}")
        if column is not None:
            parts.append(f"column {column!r}")
        if offset is not None:
            parts.append(f"offset {offset:,}")
        self.found[quote] = Finding(quote, True, ", ".join(parts), input=name, row=row, offset=offset, column=column)

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


def search_inputs(quotes: list[str], fields: Iterable[Any], *, time_limit: float) -> Search:
    """Look every quote up in every input (text, files, folders, tables, containers) until all are found."""
    search = Search(quotes, time.monotonic() + time_limit)
    for field in fields:
        if not search.missing or search.late():
            break
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
