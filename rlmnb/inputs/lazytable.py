"""The FieldInfo of a table that is not in memory, from its schema, a small Arrow head and what is known.

Every lazy family (tables in files, DuckDB relations, Arrow datasets, and Polars LazyFrames or Dask
frames in other modules) knows its column names and types without running anything, can read a
head of a few rows cheaply, and knows its row count exactly, as an estimate, or not at all. This
turns those into one FieldInfo, so the summary reads the same whatever library holds the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..tokens import CHARS_PER_TOKEN
from .arrow import arrow_preview, arrow_tokens
from .brief import CELL_CHARS, _clip_end, _one_line
from .records import FieldInfo

if TYPE_CHECKING:
    from ..config import RLMConfig


def lazy_table_info(name: str, kind: str, python_type: str, columns: Sequence[str], types: Sequence[str],
                    head: Any, config: RLMConfig, *, rows: int | None, estimated: bool = False,
                    size_bytes: int | None = None, path: str | None = None, detail: str = "") -> FieldInfo:
    """A table's FieldInfo; `head` is an Arrow table of its first rows (at most a few dozen)."""
    ncols = len(columns)
    shown = min(ncols, config.max_columns_shown)
    dtypes = tuple((_clip_end(_one_line(str(c)), CELL_CHARS), str(t))
                   for c, t in zip(columns[:shown], types[:shown], strict=True))
    preview, truncated = arrow_preview(head, rows, config)
    if rows is not None and ncols:
        tokens = arrow_tokens(head, rows * ncols)
    elif size_bytes is not None:
        tokens = round(size_bytes / CHARS_PER_TOKEN)
    else:
        tokens = 0
    return FieldInfo(name, kind, python_type, size_bytes=size_bytes, rows=rows, columns=ncols, est_tokens=tokens,
                     dtypes=dtypes, more_columns=ncols - shown, preview=preview, truncated=truncated, path=path,
                     detail=detail, estimated=estimated)
