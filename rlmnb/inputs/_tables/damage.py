"""Where a Parquet file is damaged, for `sql()`'s error: the file, the row group and the column.

DuckDB reports a page it cannot decode with a message that may name neither the file nor the place
(`don't know what type:`, `Snappy decompression failure`). When a query over file tables fails with a
DuckDB error that is not about the SQL itself, `locate` reads the suspect Parquet files one column chunk
at a time with pyarrow, in file order, and stops at the first chunk that fails: a footer that reads but a
page that does not. It runs only after a failure, and gives up after `budget_s` seconds (a damaged file is
usually found in its first pass; a healthy 5 M-row table takes a few seconds to read through).

Entry points: `locate(paths)` -> `Damage | None`; `DamagedTableFile`, the error `sql()` raises instead of
DuckDB's (its message is written for the model as reader, and is what the user sees in the run's tree).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Damage", "DamagedTableFile", "damaged_error", "locate", "suspect_files", "table_paths"]

# DuckDB errors that are about the query, never about a file's bytes
_QUERY_ERRORS = ("ParserException", "CatalogException", "BinderException", "ConversionException",
                 "OutOfRangeException", "InterruptException", "OutOfMemoryException", "NotImplementedException")
_NAMED_FILE = re.compile(r"""(?:file|File) ["']([^"']+\.(?:parquet|parq|pq))["']""")
_PARQUET = (".parquet", ".parq", ".pq")


class DamagedTableFile(RuntimeError):
    """A Parquet file an input reads from cannot be decoded at one place; queries that need it fail."""


@dataclass(frozen=True)
class Damage:
    """The first unreadable column chunk of a Parquet file: 0-based `row_group` of `row_groups`."""

    path: str
    row_group: int
    row_groups: int
    column: str
    reason: str

    def sentence(self) -> str:
        """One sentence naming the file, the row group and the column, and what to do."""
        return (f"The Parquet file {self.path} is damaged: row group {self.row_group + 1} of {self.row_groups}, "
                f"column {self.column!r}, cannot be decoded ({self.reason}). Queries that read that column "
                f"cannot succeed; query the other columns, or report the damaged file to the user.")


def suspect_files(message: str, query: str, tables: Mapping[str, Sequence[str]]) -> list[str]:
    """The Parquet files to check after `message` (a DuckDB error) for `query`: the file DuckDB named,
    else those of the tables the query names (`tables`: input name -> its files or folders)."""
    named = _NAMED_FILE.search(message)
    if named:
        return [named.group(1)]
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
    out: list[str] = []
    for name, paths in tables.items():
        if name in words:
            out.extend(_parquet_files(paths))
    return out


def locate(paths: Iterable[str], budget_s: float = 20.0) -> Damage | None:
    """The first damaged column chunk among `paths`, or None if every chunk read (or time ran out)."""
    import pyarrow.parquet as pq

    deadline = time.monotonic() + budget_s
    for path in paths:
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # a footer that does not read: the whole file
            return Damage(path, 0, 0, "(footer)", _short(exc))
        names = pf.schema_arrow.names
        groups = pf.metadata.num_row_groups
        for rg in range(groups):
            for column in names:
                if time.monotonic() > deadline:
                    return None
                try:
                    pf.read_row_group(rg, columns=[column])
                except Exception as exc:
                    return Damage(path, rg, groups, column, _short(exc))
    return None


def damaged_error(exc: BaseException, query: str, tables: Mapping[str, Sequence[str]]) -> DamagedTableFile | None:
    """The `DamagedTableFile` to raise instead of DuckDB's `exc`, or None when no file is found damaged."""
    if any(c.__name__ in _QUERY_ERRORS for c in type(exc).__mro__):
        return None
    files = suspect_files(str(exc), query, tables)
    damage = locate(files) if files else None
    if damage is None:
        return None
    return DamagedTableFile(damage.sentence())


def _parquet_files(paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for folder, dirs, files in os.walk(path):
                dirs.sort()
                out.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(_PARQUET))
        elif path.endswith(_PARQUET):
            out.append(path)
    return out


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160].rstrip(": ") or type(exc).__name__


def table_paths(fields: Iterable[Any]) -> dict[str, list[str]]:
    """Input name -> the files of a file table (its bind-time plan) or its path, for `suspect_files`."""
    out: dict[str, list[str]] = {}
    for field in fields:
        plan = getattr(field, "plan", None)
        files = plan.get("files") if isinstance(plan, Mapping) else None
        if isinstance(files, (list, tuple)) and files:
            out[field.name] = [str(f) for f in files]
        elif isinstance(field.source, (str, os.PathLike)):
            out[field.name] = [os.fspath(field.source)]
    return out
