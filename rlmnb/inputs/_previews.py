"""Bounded renderings of values for previews (cells, briefs, sizes, counts) and sampled token estimates.

Invariants: nothing here builds the whole repr of a big value; `brief(value, limit)` stays near `limit`
characters; `cell` is one line of at most CELL_CHARS; token estimates extrapolate from a seeded sample
(`sample_positions` gives the same positions for the same length every time).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens
from rlmnb.inputs._readonly import FAST_LEAF, ReadOnlyMapping, ReadOnlySequence, is_scalar
from rlmnb.inputs._records import type_name

CELL_CHARS = 60            # a table cell in a preview
ITEM_CHARS = 100           # one list item or dict value in a preview
NAME_CHARS = 40            # a column name or dict key in a preview

SAMPLE_ROWS = 32           # rows of a table rendered to estimate its tokens
SAMPLE_COLS = 64           # columns of a wide table rendered to estimate its tokens

def sample_positions(n: int, k: int) -> Any:
    """k distinct positions out of n, sorted, always the same for the same n (seeded numpy Generator)."""
    import numpy as np

    if n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, k, replace=False))


def cells_tokens(cells: Any, total_cells: int) -> int:
    """Tokens of total_cells cells, extrapolated from a 2-D sample rendered as comma-separated lines."""
    lines = []
    chars = 0
    count = 0
    for row in cells:
        parts = []
        for v in row:
            text, true_len = _cell_sample(v)
            parts.append(text)
            chars += true_len + 1
            count += 1
        lines.append(",".join(parts))
    if not count:
        return 0
    text = "\n".join(lines)
    ratio = count_tokens(text) / max(1, len(text))
    return max(1, round(ratio * chars / count * total_cells))


def _cell_sample(v: Any) -> tuple[str, int]:
    if isinstance(v, str):
        return v[:2000], len(v)
    text = str(v) if is_scalar(v) or v is None else brief(v, 2000)
    return text[:2000], len(text)


def one_line(s: str) -> str:
    if "\n" in s or "\r" in s or "\t" in s:
        s = s.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return s








def cell(v: Any, limit: int = CELL_CHARS) -> str:
    """A table cell or index label: str() for scalars, a bounded repr otherwise, one line, clipped."""
    if isinstance(v, str):
        text = v[: limit + 1]
    elif v is None or is_scalar(v):
        text = str(v)
    elif isinstance(v, tuple) and len(v) <= 8 and all(x is None or isinstance(x, str) or is_scalar(x) for x in v):
        text = "(" + ", ".join(str(x) for x in v) + ")"  # a MultiIndex label
    else:
        text = brief(v, limit + 1)
    return clip(one_line(text), limit)


def brief(value: Any, limit: int, depth: int = 0) -> str:
    """repr(value) cut to about `limit` characters without building the whole repr of a big value."""
    if isinstance(value, str):
        r = repr(value[:limit])
        return r if len(value) <= limit else r[:-1] + "…" + r[-1]
    if isinstance(value, bytes | bytearray | memoryview):
        chunk = bytes(memoryview(value).cast("B")[:limit]) if not isinstance(value, bytes) else value[:limit]
        return clip(repr(chunk), limit)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3000:
        return f"<int with ~{int(value.bit_length() * 0.30103):,} digits>"
    if type(value) in FAST_LEAF:
        return clip(repr(value), limit)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return f"<DataFrame {value.shape[0]:,} rows x {value.shape[1]:,} columns>"
    if pd is not None and isinstance(value, pd.Series):
        return f"<Series {len(value):,} rows, dtype {value.dtype}>"
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return f"<ndarray {' x '.join(f'{d:,}' for d in value.shape) or '0-d'}, dtype {value.dtype}>"
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch):
        return f"<{type_name(value)} {value.num_rows:,} rows x {value.num_columns:,} columns>"
    if isinstance(value, range):
        return clip(repr(value), limit)
    if isinstance(value, Mapping | Sequence | set | frozenset):
        return _brief_collection(value, limit, depth)
    try:
        text = repr(value)
    except Exception:
        text = f"<{type_name(value)}>"
    return clip(one_line(text), limit)


def _brief_collection(value: Any, limit: int, depth: int) -> str:
    if depth >= 4:
        return "…"
    base = value._data if isinstance(value, ReadOnlySequence | ReadOnlyMapping) else value
    if isinstance(value, Mapping):
        opening, closing = "{", "}"
    elif isinstance(base, set | frozenset):
        if not value:
            return repr(value)
        opening, closing = "{", "}"
    elif isinstance(base, tuple):
        opening, closing = "(", ")"
    else:
        opening, closing = "[", "]"
    entries: Iterator[Any] = iter(value.items()) if isinstance(value, Mapping) else iter(value)
    parts: list[str] = []
    used = 2
    for entry in entries:
        room = max(8, limit - used - 4)
        if isinstance(value, Mapping):
            key = brief(entry[0], min(NAME_CHARS, room), depth + 1)
            part = f"{key}: {brief(entry[1], max(8, room - len(key) - 2), depth + 1)}"
        else:
            part = brief(entry, room, depth + 1)
        if parts and used + len(part) > limit:
            break
        parts.append(part)
        used += len(part) + 2
        if used >= limit:
            break
    body = ", ".join(parts)
    if len(parts) < len(value):
        body += ", …" if parts else "…"
    return clip(opening + body + closing, limit + 4)


def approx_chars(value: Any, depth: int = 0) -> float:
    """Roughly len(repr(value)), from a bounded sample of a big nested value."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bytes | bytearray):
        return len(value) + 3
    if isinstance(value, memoryview):
        return value.nbytes + 3
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() * 0.30103 + 1
    if isinstance(value, float):
        return 18
    if depth >= 4:
        return 20
    if isinstance(value, Mapping):
        if not value:
            return 2
        items = list(itertools.islice(value.items(), 8))
        return 2 + len(value) * sum(approx_chars(k, depth + 1) + approx_chars(v, depth + 1) + 4
                                    for k, v in items) / len(items)
    if isinstance(value, list | tuple | ReadOnlySequence | set | frozenset):
        if not value:
            return 2
        sample = list(itertools.islice(value, 8))
        return 2 + len(value) * sum(approx_chars(v, depth + 1) + 2 for v in sample) / len(sample)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return 10.0 * int(value.shape[0]) * int(value.shape[1])
    if pd is not None and isinstance(value, pd.Series):
        return 10.0 * len(value)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return 10.0 * int(value.size)
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch):
        return 10.0 * int(value.num_rows) * int(value.num_columns)
    return len(brief(value, 200))


def plural(n: int, unit: str) -> str:
    return f"{n:,} {unit}" if n == 1 else f"{n:,} {unit}s"


def human_bytes(n: int) -> str:
    if n < 1000:
        return f"{n:,} bytes"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < scale * 999.95:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e12:,.1f} TB"


def human_count(n: int) -> str:
    if n < 10_000:
        return f"{n:,}"
    for unit, scale in (("K", 1e3), ("M", 1e6)):
        if n < scale * 999.95:
            return f"{n / scale:.1f}{unit}"
    return f"{n / 1e9:,.1f}B"


__all__ = [
    "CELL_CHARS", "ITEM_CHARS", "NAME_CHARS", "SAMPLE_COLS", "SAMPLE_ROWS", "approx_chars", "brief", "cell",
    "cells_tokens", "human_bytes", "human_count", "one_line", "plural", "sample_positions",
]
