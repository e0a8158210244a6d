"""`sql(query)` in the sandbox: DuckDB over every table input, each registered under its input name.

One engine per sandbox namespace holds one DuckDB cursor. Before each query it registers the table
inputs it has not registered yet (the family's `sql` hook says what DuckDB scans: a pandas frame or an
Arrow table zero-copy, a relation over files lazily); a relation that lives in another DuckDB database
(the user's own connection) cannot be scanned from ours and is copied once as Arrow. Results come back
as a pandas DataFrame of at most `max_rows` rows; a longer result is cut and a note printed with its
full row count, so the model learns to aggregate in SQL instead of pulling tables into Python.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import duck

DEFAULT_MAX_ROWS = 10_000
_BATCH_ROWS = 8192


class SQLEngine:
    """The `sql` primitive of one namespace; reads `namespace["inputs"]` at each call."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self._ns = namespace
        self._cur: Any = None
        self._registered: dict[str, tuple[int, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, query: str, max_rows: int = DEFAULT_MAX_ROWS) -> Any:
        """Run DuckDB SQL over the table inputs (each under its input name); returns a pandas DataFrame."""
        if not isinstance(query, str) or not query.strip():
            raise TypeError(f"sql() takes a SQL query as a non-empty str, got {type(query).__name__}.")
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0:
            raise ValueError(f"sql(): max_rows must be a whole number >= 0, got {max_rows!r}.")
        with self._lock:
            cur = self._cursor()
            self._sync(cur)
            try:
                rel = cur.sql(query)
                if rel is None:  # a statement (CREATE VIEW, SET...) ran; nothing to return
                    import pandas as pd

                    return pd.DataFrame()
                return _fetch(rel, max_rows)
            except Exception as exc:
                damaged = self._damaged(exc, query)
                if damaged is None:
                    raise
        raise damaged from None  # outside the lock: DuckDB's message named no file, this one does

    def _damaged(self, exc: BaseException, query: str) -> Exception | None:
        """A DuckDB failure reading a damaged Parquet file, as one sentence naming the file, row group
        and column (see `damage`); None for any other failure."""
        if not duck.is_error(exc):
            return None
        from .damage import damaged_error, table_paths

        return damaged_error(exc, query, table_paths(field for _name, field in self._fields()))

    def tables(self) -> list[str]:
        """The names sql() can query."""
        return [name for name, _field in self._fields()]

    def _cursor(self) -> Any:
        if self._cur is None:
            self._cur = duck.cursor()
        return self._cur

    def _fields(self) -> list[tuple[str, Any]]:
        from .registry import sql_kinds

        inputs = self._ns.get("inputs")
        fields = getattr(inputs, "fields", None)
        if not callable(fields):
            return []
        kinds = sql_kinds()
        return [(f.name, f) for f in fields() if f.info.kind in kinds]

    def _sync(self, cur: Any) -> None:
        from .registry import family_of_kind

        current = dict(self._fields())
        for name in [n for n in self._registered if n not in current]:
            cur.unregister(name)
            del self._registered[name]
        for name, field in current.items():
            known = self._registered.get(name)
            if known is not None and known[0] == id(field):
                continue
            fam = family_of_kind(field.info.kind)
            hook: Callable[[Any], Any] = fam.sql if fam is not None and fam.sql is not None else (lambda v: v)
            target = hook(field.load())
            try:
                cur.register(name, target)
                cur.sql(f"SELECT * FROM {duck.ident(name)} LIMIT 1").fetchall()  # LIMIT 0 binds but never reads
            except Exception as exc:
                if not (duck.is_error(exc) and hasattr(target, "to_arrow_table")):
                    raise
                target = target.to_arrow_table()  # a relation of another DuckDB database: copied once
                cur.register(name, target)
            self._registered[name] = (id(field), target)


def _fetch(rel: Any, max_rows: int) -> Any:
    import pyarrow as pa

    reader = rel.to_arrow_reader(_BATCH_ROWS)
    batches, got, more = [], 0, False
    for batch in reader:
        if got >= max_rows:
            more = batch.num_rows > 0 or more
            if more:
                break
            continue
        batches.append(batch)
        got += batch.num_rows
    more = more or got > max_rows
    table = pa.Table.from_batches(batches, schema=reader.schema).slice(0, max_rows)
    reader.close()
    frame = table.to_pandas()
    if more:
        try:
            total: int | None = int(rel.aggregate("count(*)").fetchall()[0][0])
        except Exception:
            total = None
        counted = f"{total:,} rows" if total is not None else f"more than {max_rows:,} rows"
        print(f"[sql: the result has {counted}; returned the first {max_rows:,}. Aggregate or filter in SQL, "
              f"or pass max_rows= for more.]")
        frame.attrs["sql_total_rows"] = total
    return frame
