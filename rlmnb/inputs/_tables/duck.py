"""The process's one in-memory DuckDB database, and `sql(query)` in the sandbox over the table inputs.

Every user of the database takes a cursor of its own (`cursor()`): cursors keep their temporary views
and registered objects apart and may run in different threads. DuckDB is imported on first use only
(docs/decisions/one-duckdb-database.md). `ident` and `literal` quote SQL names and strings.

`SQLEngine` is one sandbox namespace's sql(): one cursor; before each query it registers the table
inputs it has not registered yet (the family's `sql` hook says what DuckDB scans: a pandas frame or an
Arrow table zero-copy, a relation over files lazily), and the relations an input offers beside its own
name (a workbook's sheets: the family's `relations` hook) that the query names, each made once (an
input of the same name wins); a relation of another DuckDB database (the user's own connection) cannot
be scanned from ours and is copied once as Arrow. Results come back as a pandas
DataFrame of at most `max_rows` rows; a longer result is cut and a note printed with its full row
count, so the model learns to aggregate in SQL instead of pulling tables into Python.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

_lock = threading.Lock()
_database: Any = None
_applied: int | None = None


def cursor() -> Any:
    """A new connection (cursor) to the process's shared in-memory DuckDB database."""
    global _database
    if _database is None:
        with _lock:
            if _database is None:
                import duckdb

                _database = duckdb.connect(":memory:")
    _follow_data_limit()
    return _database.cursor()


def _follow_data_limit() -> None:
    """Keep DuckDB under the kernel sandbox's memory cap (set after start-up): it spills to disk instead."""
    global _applied
    limit = _data_limit()
    if limit != _applied:
        with _lock:
            if limit is not None:
                _database.execute(f"SET memory_limit = '{max(64, limit * 6 // 10 >> 20)}MB'")
            else:
                _database.execute("RESET memory_limit")
            _applied = limit


def _data_limit() -> int | None:
    """This process's RLIMIT_DATA (the kernel sandbox's memory_limit), or None when unlimited."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def is_error(exc: BaseException) -> bool:
    """True for DuckDB's own errors (bad SQL, unreadable files), without importing duckdb."""
    return any(c.__module__.split(".")[0] in ("duckdb", "_duckdb") for c in type(exc).__mro__)


def message(exc: BaseException) -> str:
    """The first line of a DuckDB error, without its 'Error:' prefix noise."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text


DEFAULT_MAX_ROWS = 10_000
_BATCH_ROWS = 8192


class SQLEngine:
    """The `sql` primitive of one namespace; reads `namespace["inputs"]` at each call."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self._ns = namespace
        self._cur: Any = None
        self._registered: dict[str, tuple[int, Any]] = {}
        self._relations: dict[str, int] = {}  # offered relation -> id of the Field offering it
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
            self._sync_relations(cur, query)
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
        if not is_error(exc):
            return None
        from rlmnb.inputs._tables.damage import damaged_error, table_paths

        return damaged_error(exc, query, table_paths(field for _name, field in self._fields()))

    def tables(self) -> list[str]:
        """The names sql() can query (the inputs', then the relations they offer, such as workbook sheets)."""
        names = [name for name, _field in self._fields()]
        for _name, field, hook in self._relation_hooks():
            names.extend(hook(field.load()))
        return names

    def _relation_hooks(self) -> list[tuple[str, Any, Callable[[Any], Mapping[str, Callable[[], Any]]]]]:
        from rlmnb.inputs._registry import family_of_kind

        out = []
        for name, field in self._fields():
            fam = family_of_kind(field.info.kind)
            if fam is not None and fam.relations is not None:
                out.append((name, field, fam.relations))
        return out

    def _sync_relations(self, cur: Any, query: str) -> None:
        """Register the offered relations this query names (made now, once), and drop those of gone inputs."""
        hooks = self._relation_hooks()
        alive = {id(field) for _name, field, _hook in hooks}
        for name in [n for n, owner in self._relations.items() if owner not in alive]:
            cur.unregister(name)
            del self._relations[name]
        for _name, field, hook in hooks:
            for rel, make in hook(field.load()).items():
                if self._relations.get(rel) == id(field) or rel in self._registered or not _names(query, rel):
                    continue
                cur.register(rel, make())
                self._relations[rel] = id(field)

    def _cursor(self) -> Any:
        if self._cur is None:
            self._cur = cursor()
        return self._cur

    def _fields(self) -> list[tuple[str, Any]]:
        from rlmnb.inputs._registry import sql_kinds

        inputs = self._ns.get("inputs")
        fields = getattr(inputs, "fields", None)
        if not callable(fields):
            return []
        kinds = sql_kinds()
        return [(f.name, f) for f in fields() if f.info.kind in kinds]

    def _sync(self, cur: Any) -> None:
        from rlmnb.inputs._registry import family_of_kind

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
                cur.sql(f"SELECT * FROM {ident(name)} LIMIT 1").fetchall()  # LIMIT 0 binds but never reads
            except Exception as exc:
                if not (is_error(exc) and hasattr(target, "to_arrow_table")):
                    raise
                target = target.to_arrow_table()  # a relation of another DuckDB database: copied once
                cur.register(name, target)
            self._registered[name] = (id(field), target)


def _names(query: str, name: str) -> bool:
    """Whether `query` mentions `name` as a whole word (quoted or not, any case)."""
    return re.search(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", query, re.IGNORECASE) is not None


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


__all__ = []
