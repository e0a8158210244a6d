"""What a Parquet dataset's footers say: exact rows, one schema for all files, column statistics.

Each footer is read once (pyarrow) and serves all three; the cost grows with the number of files
(~5 ms a footer here), not with their size. Footers of up to MAX_FOOTERS files are read (beyond that the row count is extrapolated
from file sizes and marked as an estimate); statistics come from at most STATS_ROW_GROUPS row groups
spread over the dataset, and the summary says when they cover only part of it. So describing stays in
the same few hundred milliseconds whether the dataset is 10 MB or 10 GB.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from .brief import _clip_end, _human_count, _one_line

MAX_FOOTERS = 1024         # files whose footers are read (beyond: rows estimated from file sizes)
STATS_ROW_GROUPS = 64      # row groups whose statistics make the summary's min/max and null counts
STATS_COLUMNS = 12         # columns with statistics in the summary
STATS_CHARS = 600          # the statistics line of the summary


def _footer(name: str, path: str) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError; truncation an OSError
        raise InputError(f"Input {name!r}: cannot read {os.path.basename(path)} as Parquet "
                         f"({_clip_end(_one_line(str(exc)), 200)}); fix or remove the file.") from None


def parquet_meta(name: str, files: Sequence[str]) -> tuple[int, bool, str, str, list[tuple[str, str]]]:
    """(rows, estimated, how the rows are known, statistics line, [(column, physical type)]) of the files."""
    read = list(files[:MAX_FOOTERS])
    footers = [_footer(name, p) for p in read]  # ~5 ms each; threads do not help (the parse holds the GIL)
    first = footers[0].schema
    for path, meta in zip(read[1:], footers[1:], strict=True):
        if not meta.schema.equals(first):
            raise _clash(name, read[0], path, first, meta.schema)
    rows = sum(int(m.num_rows) for m in footers)
    columns = [(first.column(i).path, str(first.column(i).physical_type)) for i in range(len(first))]
    stats = _statistics(footers, columns)
    if len(read) < len(files):
        seen = sum(os.path.getsize(p) for p in read)
        rows = round(rows * sum(os.path.getsize(p) for p in files) / max(1, seen))
        return rows, True, f"estimated from the footers of the first {len(read):,} files", stats, columns
    return rows, False, "from Parquet metadata", stats, columns


def _clash(name: str, a_path: str, b_path: str, a: Any, b: Any) -> InputError:
    a_cols = {f.name: str(f.type) for f in a.to_arrow_schema()}
    b_cols = {f.name: str(f.type) for f in b.to_arrow_schema()}
    only = [c for c in a_cols if c not in b_cols] + [c for c in b_cols if c not in a_cols]
    if only:
        what = f"column {only[0]!r} is in only one of them"
    else:
        col = next((c for c in a_cols if a_cols[c] != b_cols[c]), None)
        what = (f"column {col!r} is {a_cols[col]} in one and {b_cols[col]} in the other" if col
                else "their column types or order differ")
    return InputError(f"Input {name!r}: {os.path.basename(a_path)} and {os.path.basename(b_path)} do not share a "
                      f"schema ({what}); bind them as separate inputs or make their columns agree.")


def _statistics(footers: Sequence[Any], columns: Sequence[tuple[str, str]]) -> str:
    """Min..max and null counts of the first columns, from row groups spread over the dataset."""
    groups = [(f, g) for f, meta in enumerate(footers) for g in range(meta.num_row_groups)]
    total = len(groups)
    if total > STATS_ROW_GROUPS:
        step = (total - 1) / (STATS_ROW_GROUPS - 1)
        groups = [groups[round(i * step)] for i in range(STATS_ROW_GROUPS)]
    shown = [(j, c) for j, (c, _) in enumerate(columns[:STATS_COLUMNS]) if "." not in c]
    acc: dict[int, list[Any]] = {j: [None, None, 0, True] for j, _ in shown}  # lo, hi, nulls, nulls complete
    for f, g in groups:
        rg = footers[f].row_group(g)
        for j, _ in shown:
            st = rg.column(j).statistics
            slot = acc[j]
            if st is None:
                slot[3] = False
                continue
            if st.has_min_max:
                try:
                    slot[0] = st.min if slot[0] is None else min(slot[0], st.min)
                    slot[1] = st.max if slot[1] is None else max(slot[1], st.max)
                except TypeError:
                    pass
            if st.has_null_count:
                slot[2] += int(st.null_count)
            else:
                slot[3] = False
    parts = []
    for j, col in shown:
        lo, hi, nulls, complete = acc[j]
        bits = []
        if lo is not None and hi is not None:
            bits.append(f"{_clip_end(_one_line(str(lo)), 24)}..{_clip_end(_one_line(str(hi)), 24)}")
        if complete and nulls:
            bits.append(f"{_human_count(nulls)} nulls")
        if bits:
            parts.append(f"{_clip_end(col, 24)} {' '.join(bits)}")
    if not parts:
        return ""
    scope = f" (from {len(groups):,} of {total:,} row groups)" if len(groups) < total else ""
    return _clip_end(f"statistics{scope}: " + "; ".join(parts), STATS_CHARS)
