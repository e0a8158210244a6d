"""The pandas family: `DataFrame` and `Series`, seen as shallow copy-on-write copies."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb.inputs._previews import (
    CELL_CHARS,
    NAME_CHARS,
    SAMPLE_COLS,
    SAMPLE_ROWS,
    cell,
    cells_tokens,
    one_line,
    sample_positions,
)
from rlmnb.inputs._records import Field, FieldInfo, type_name
from rlmnb.inputs._registry import Family

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

_WIDE = 256                # above this many columns, memory use is extrapolated from a sample

def _describe_frame(name: str, df: Any, config: RLMConfig) -> Field:
    n, ncols = df.shape
    shown = min(ncols, config.max_columns_shown)
    if ncols > _WIDE:
        cols = sample_positions(ncols, SAMPLE_COLS)
        part = int(df.iloc[:, cols].memory_usage(index=False, deep=False).sum())
        size_bytes = round(part * ncols / len(cols)) + int(df.index.memory_usage(deep=False))
    else:
        size_bytes = int(df.memory_usage(index=True, deep=False).sum())
    first = df.iloc[:, :shown]
    dtypes = tuple((clip(one_line(str(c)), CELL_CHARS), str(t)) for c, t in first.dtypes.items())
    k = min(n, config.preview_rows)
    if k > 0:
        head = first.iloc[:k]
        show_index = not _default_index(df.index)
        index_name = ", ".join(str(x) for x in df.index.names if x is not None) or "index"
        header = ([clip(one_line(index_name), NAME_CHARS)] if show_index else []) + [
            clip(one_line(str(c)), NAME_CHARS) for c in head.columns]
        lines = [" | ".join(header)]
        clipped = False
        cells = head.to_numpy(dtype=object)
        for i in range(k):
            row = [cell(v) for v in cells[i]]
            if show_index:
                row.insert(0, cell(head.index[i]))
            clipped = clipped or any(c.endswith("…") for c in row)
            lines.append(" | ".join(row))
        preview, truncated = "\n".join(lines), n > k or ncols > shown or clipped
    else:
        preview, truncated = "", n > 0
    tokens = 0
    if n and ncols:
        rows = sample_positions(n, SAMPLE_ROWS)
        cols = sample_positions(ncols, SAMPLE_COLS)
        sample = df.iloc[rows, cols].to_numpy(dtype=object)
        tokens = cells_tokens(sample, n * ncols)
    detail = "" if _default_index(df.index) else f"index: {type(df.index).__name__}"
    info = FieldInfo(name, "table", type_name(df), size_bytes=size_bytes, rows=n, columns=ncols,
                     est_tokens=tokens, dtypes=dtypes, more_columns=ncols - shown, preview=preview,
                     truncated=truncated, detail=detail)
    return Field(name, df, info, lambda: df.copy(deep=False))


def _describe_series(name: str, s: Any, config: RLMConfig) -> Field:
    n = len(s)
    k = min(n, config.preview_rows)
    lines = [f"{cell(i, NAME_CHARS)}: {cell(v)}" for i, v in zip(s.index[:k], s.iloc[:k].tolist(), strict=True)]
    tokens = 0
    if n:
        sample = s.iloc[sample_positions(n, SAMPLE_ROWS)].to_numpy(dtype=object).reshape(-1, 1)
        tokens = cells_tokens(sample, n)
    label = "" if s.name is None else clip(one_line(str(s.name)), CELL_CHARS)
    info = FieldInfo(name, "series", type_name(s), size_bytes=int(s.memory_usage(index=True, deep=False)),
                     rows=n, est_tokens=tokens, dtypes=((label, str(s.dtype)),), preview="\n".join(lines),
                     truncated=n > k or any("…" in line for line in lines))
    return Field(name, s, info, lambda: s.copy(deep=False))


def _default_index(index: Any) -> bool:
    pd = sys.modules["pandas"]
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1




def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    if type(value).__name__ == "Series" or any(c.__name__ == "Series" for c in type(value).__mro__):
        return _describe_series(name, value, config)
    return _describe_frame(name, value, config)


FAMILY = Family("pandas", ("table", "series"), _describe, classes=("pandas:DataFrame", "pandas:Series"),
                view=lambda _name, raw: raw.copy(deep=False), tables=("table",), sql=lambda value: value)


__all__ = ["FAMILY"]
