"""The Arrow family: `pyarrow.Table` and `RecordBatch` (immutable, seen as they are)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .brief import (
    CELL_CHARS,
    NAME_CHARS,
    SAMPLE_COLS,
    SAMPLE_ROWS,
    _cell,
    _cells_tokens,
    _clip_end,
    _one_line,
    _sample_positions,
)
from .records import Field, FieldInfo, _type_name
from .registry import Family

if TYPE_CHECKING:
    from ..config import RLMConfig

def _describe_arrow(name: str, t: Any, config: RLMConfig) -> Field:
    import pyarrow as pa

    n, ncols = t.num_rows, t.num_columns
    shown = min(ncols, config.max_columns_shown)
    dtypes = tuple((_clip_end(_one_line(f.name), CELL_CHARS), str(f.type)) for f in list(t.schema)[:shown])
    preview, truncated = arrow_preview(t, n, config)
    tokens = 0
    if n and ncols:
        cols = [int(j) for j in _sample_positions(ncols, SAMPLE_COLS)]
        tokens = arrow_tokens(t.select(cols).take(pa.array(_sample_positions(n, SAMPLE_ROWS))), n * ncols)
    info = FieldInfo(name, "arrow", _type_name(t), size_bytes=int(t.nbytes), rows=n, columns=ncols,
                     est_tokens=tokens, dtypes=dtypes, more_columns=ncols - shown, preview=preview,
                     truncated=truncated)
    return Field(name, t, info, lambda: t)


def arrow_preview(head: Any, n: int | None, config: RLMConfig) -> tuple[str, bool]:
    """(preview, truncated) of a table of `n` rows (None: unknown) from an Arrow table of its first rows."""
    ncols = head.num_columns
    shown = min(ncols, config.max_columns_shown)
    k = min(head.num_rows, config.preview_rows)
    if k <= 0:
        return "", bool(n is None or n > 0)
    first = head.slice(0, k)
    columns = [first.column(j).to_pylist() for j in range(shown)]
    lines = [" | ".join(_clip_end(_one_line(f.name), NAME_CHARS) for f in list(head.schema)[:shown])]
    lines += [" | ".join(_cell(col[i]) for col in columns) for i in range(k)]
    more_rows = n is None or n > k
    return "\n".join(lines), more_rows or ncols > shown or any(
        c.endswith("…") for line in lines for c in line.split(" | "))


def arrow_tokens(sample: Any, total_cells: int) -> int:
    """Tokens of `total_cells` cells, extrapolated from an Arrow sample of rows."""
    if not sample.num_rows or not sample.num_columns:
        return 0
    values = [sample.column(j).to_pylist() for j in range(sample.num_columns)]
    return _cells_tokens([list(row) for row in zip(*values, strict=True)], total_cells)


FAMILY = Family("arrow", ("arrow",), _describe_arrow, classes=("pyarrow:Table", "pyarrow:RecordBatch"),
                tables=("arrow",), sql=lambda value: value)
