"""The FieldInfo of a table that is not in memory, from its schema, a small Arrow head and what is known.

Every lazy family (tables in files, DuckDB relations, Arrow datasets, and Polars LazyFrames or Dask
frames in other modules) knows its column names and types without running anything, can read a
head of a few rows cheaply, and knows its row count exactly, as an estimate, or not at all. This
turns those into one FieldInfo, so the summary reads the same whatever library holds the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb._ground.tokens import CHARS_PER_TOKEN
from rlmnb.inputs._previews import CELL_CHARS, NAME_CHARS, cell, cells_tokens, one_line
from rlmnb.inputs._records import FieldInfo

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig


def lazy_table_info(name: str, kind: str, python_type: str, columns: Sequence[str], types: Sequence[str],
                    head: Any, config: RLMConfig, *, rows: int | None, estimated: bool = False,
                    size_bytes: int | None = None, path: str | None = None, detail: str = "") -> FieldInfo:
    """A table's FieldInfo; `head` is an Arrow table of its first rows (at most a few dozen)."""
    ncols = len(columns)
    shown = min(ncols, config.max_columns_shown)
    dtypes = tuple((clip(one_line(str(c)), CELL_CHARS), str(t))
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


def arrow_preview(head: Any, n: int | None, config: RLMConfig) -> tuple[str, bool]:
    """(preview, truncated) of a table of `n` rows (None: unknown) from an Arrow table of its first rows."""
    ncols = head.num_columns
    shown = min(ncols, config.max_columns_shown)
    k = min(head.num_rows, config.preview_rows)
    if k <= 0:
        return "", bool(n is None or n > 0)
    first = head.slice(0, k)
    columns = [first.column(j).to_pylist() for j in range(shown)]
    lines = [" | ".join(clip(one_line(f.name), NAME_CHARS) for f in list(head.schema)[:shown])]
    lines += [" | ".join(cell(col[i]) for col in columns) for i in range(k)]
    more_rows = n is None or n > k
    return "\n".join(lines), more_rows or ncols > shown or any(
        c.endswith("…") for line in lines for c in line.split(" | "))


def arrow_tokens(sample: Any, total_cells: int) -> int:
    """Tokens of `total_cells` cells, extrapolated from an Arrow sample of rows."""
    if not sample.num_rows or not sample.num_columns:
        return 0
    values = [sample.column(j).to_pylist() for j in range(sample.num_columns)]
    return cells_tokens([list(row) for row in zip(*values, strict=True)], total_cells)


__all__ = ["arrow_preview", "arrow_tokens", "lazy_table_info"]
