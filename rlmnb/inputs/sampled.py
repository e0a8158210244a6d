"""Describe a table from its schema and two small Arrow tables (a head and a sample), never the whole.

Polars frames, Polars plans and Dask frames each give these cheaply (a `head`, a few rows, dtypes),
so one renderer makes their previews and token estimates, and they read like pandas and Arrow tables
in the summary. A kind whose row count is unknown says so rather than guessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .brief import CELL_CHARS, NAME_CHARS, _cell, _cells_tokens, _clip_end, _one_line

if TYPE_CHECKING:
    from ..config import RLMConfig


def column_pairs(schema: Sequence[tuple[str, str]], config: RLMConfig) -> tuple[tuple[tuple[str, str], ...], int]:
    """(the first `max_columns_shown` (name, dtype) pairs, clipped; how many more columns there are)."""
    shown = min(len(schema), config.max_columns_shown)
    pairs = tuple((_clip_end(_one_line(str(n)), CELL_CHARS), str(t)) for n, t in list(schema)[:shown])
    return pairs, len(schema) - shown


def arrow_preview(head: Any, columns: int, rows: int | None, config: RLMConfig) -> tuple[str, bool]:
    """A header line and up to `preview_rows` lines of `head` (an Arrow table); and whether it shows less
    than the whole (more rows or columns than shown, a clipped cell, or an unknown row count)."""
    k = min(head.num_rows, config.preview_rows)
    shown = min(head.num_columns, config.max_columns_shown)
    if k <= 0:
        return "", rows is None or rows > 0
    names = head.schema.names[:shown]
    cols = [head.column(j).slice(0, k).to_pylist() for j in range(shown)]
    lines = [" | ".join(_clip_end(_one_line(str(n)), NAME_CHARS) for n in names)]
    lines += [" | ".join(_cell(col[i]) for col in cols) for i in range(k)]
    clipped = any(c.endswith("…") for line in lines[1:] for c in line.split(" | "))
    more_rows = rows is None or rows > k
    return "\n".join(lines), more_rows or columns > shown or clipped


def sample_tokens(sample: Any, rows: int | None, columns: int) -> int:
    """Tokens of the whole table extrapolated from an Arrow sample; 0 when the row count is unknown."""
    if sample is None or not sample.num_rows or not sample.num_columns or not rows:
        return 0
    values = [sample.column(j).to_pylist() for j in range(sample.num_columns)]
    return _cells_tokens([list(r) for r in zip(*values, strict=True)], rows * columns)
