"""The Arrow family: `pyarrow.Table` and `RecordBatch` (immutable, seen as they are)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb.inputs._previews import (
    CELL_CHARS,
    SAMPLE_COLS,
    SAMPLE_ROWS,
    one_line,
    sample_positions,
)
from rlmnb.inputs._records import Field, FieldInfo, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables.lazytable import arrow_preview, arrow_tokens

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

def _describe_arrow(name: str, t: Any, config: RLMConfig) -> Field:
    import pyarrow as pa

    n, ncols = t.num_rows, t.num_columns
    shown = min(ncols, config.max_columns_shown)
    dtypes = tuple((clip(one_line(f.name), CELL_CHARS), str(f.type)) for f in list(t.schema)[:shown])
    preview, truncated = arrow_preview(t, n, config)
    tokens = 0
    if n and ncols:
        cols = [int(j) for j in sample_positions(ncols, SAMPLE_COLS)]
        tokens = arrow_tokens(t.select(cols).take(pa.array(sample_positions(n, SAMPLE_ROWS))), n * ncols)
    info = FieldInfo(name, "arrow", type_name(t), size_bytes=int(t.nbytes), rows=n, columns=ncols,
                     est_tokens=tokens, dtypes=dtypes, more_columns=ncols - shown, preview=preview,
                     truncated=truncated)
    return Field(name, t, info, lambda: t)


FAMILY = Family("arrow", ("arrow",), _describe_arrow, classes=("pyarrow:Table", "pyarrow:RecordBatch"),
                tables=("arrow",), sql=lambda value: value)


__all__ = ["FAMILY"]
