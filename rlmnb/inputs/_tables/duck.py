"""The one in-process DuckDB database that file tables, relations and sql() run on.

Opening a DuckDB connection costs ~100 ms here, a cursor ~0.03 ms; so the process keeps one in-memory
database and every user of it takes a cursor of its own (cursors keep their temporary views and
registered objects apart, and may run in different threads). DuckDB is imported on first use only.
"""

from __future__ import annotations

import threading
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
