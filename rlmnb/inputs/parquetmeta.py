"""What a Parquet dataset's footers say: exact rows, one schema for all files, column statistics.

Rows and schemas come from the head of every file's footer (parquetfooter.py: 15-50 us a file here,
against ~2 ms for pyarrow's full parse of a 25 M-row file's footer), so the count is exact and the
schema checked over every file, however many bytes the files hold. Only beyond MAX_COUNT_FILES files,
or beyond MIN_COUNT_FILES when reading heads takes longer than COUNT_SECONDS (so the same dataset of up
to 1,024 files gets the same exact answer on a busy machine), the count is scaled up from the files read (a
seeded random sample, first file always included) by their share of the bytes and marked as an
estimate; the schemas of the files not read are then checked by DuckDB when a query reads them.
Statistics need the row groups, so whole footers are parsed for at most STATS_FILES files spread over
the dataset and STATS_FOOTER_BYTES of footers in all (a parse costs ~20 us a KB: every file of a small
dataset, two of 25 M rows each), and the summary says which part they cover. So
describing stays in the same tens of milliseconds whether the dataset is 10 MB or 10 GB.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ..errors import InputError
from .brief import _clip_end, _human_count, _one_line
from .parquetfooter import FooterError, FooterHead, read_head

MAX_COUNT_FILES = 2048           # files whose footer heads are read for the row count (beyond: estimated)
COUNT_SECONDS = 0.1              # ... or as many as can be read in this time, but at least:
MIN_COUNT_FILES = 1024           # files read however long they take: up to this many, the count is always exact
STATS_FILES = 32                 # files whose whole footers are parsed for statistics: first, last, between
STATS_FOOTER_BYTES = 256 << 10   # ... while their footers add up to at most this (the first is always read)
STATS_ROW_GROUPS = 32            # row groups whose statistics make the summary's min/max and null counts (~30 us a column each)
STATS_COLUMNS = 12               # columns with statistics in the summary
STATS_CHARS = 600                # the statistics line of the summary
T = TypeVar("T")


def _footer(name: str, path: str) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError; truncation an OSError
        raise InputError(f"Input {name!r}: cannot read {os.path.basename(path)} as Parquet "
                         f"({_clip_end(' '.join(str(exc).split()), 200)}); fix or remove the file.") from None


def _head(name: str, path: str, like: FooterHead | None = None) -> FooterHead:
    """The head of a file's footer; from pyarrow's full parse when the fast reader cannot read it."""
    try:
        return read_head(path, like)
    except FooterError:
        meta = _footer(name, path)  # InputError saying what is wrong with the file, or what we could not read
        schema = meta.schema
        leaves = tuple((schema.column(i).path, str(schema.column(i).physical_type)) for i in range(len(schema)))
        # a schema key no other file has, so this file's schema is always compared in full
        return FooterHead(int(meta.num_rows), b"\0" + os.fsencode(path), leaves, int(meta.serialized_size))


def parquet_meta(name: str, files: Sequence[str], sizes: Sequence[int] | None = None
                 ) -> tuple[int, bool, str, str, list[tuple[str, str]]]:
    """(rows, estimated, how the rows are known, statistics line, [(column, physical type)]) of the files.

    `sizes` are the files' sizes in bytes (stat'ed again when not given); they scale an estimate.
    """
    order = _count_order(len(files))
    deadline = time.perf_counter() + COUNT_SECONDS
    heads = {0: _head(name, files[0])}
    same = {heads[0].schema}  # schema encodings seen to be equal to the first file's
    for i in order[1:]:
        if len(heads) >= MIN_COUNT_FILES and time.perf_counter() > deadline:
            break
        head = heads[i] = _head(name, files[i], heads[0])
        if head.schema not in same:
            _check_schema(name, files[0], files[i])
            same.add(head.schema)
    rows = sum(h.num_rows for h in heads.values())
    columns = list(heads[0].leaves)
    stats = _statistics(name, files, heads, columns)
    if len(heads) < len(files):
        size = (lambda i: sizes[i]) if sizes is not None else (lambda i: os.path.getsize(files[i]))
        seen = sum(size(i) for i in heads)
        total = sum(size(i) for i in range(len(files)))
        rows = round(rows * total / max(1, seen))
        return (rows, True, f"estimated from the footers of {len(heads):,} of the {len(files):,} files (scaled by "
                f"their share of the bytes)", stats, columns)
    return rows, False, "from Parquet metadata", stats, columns


def _count_order(n: int) -> list[int]:
    """File 0, then the others whose heads are read: all of them, or a seeded random sample of MAX_COUNT_FILES."""
    if n <= MAX_COUNT_FILES:
        rest = list(range(1, n))
        random.Random(n).shuffle(rest)  # a spread sample if the time budget stops the reading early
    else:
        rest = random.Random(n).sample(range(1, n), MAX_COUNT_FILES - 1)
    return [0, *rest]


def _check_schema(name: str, a_path: str, b_path: str) -> None:
    """Raise the schema clash between two files whose schema encodings differ, unless pyarrow finds them equal."""
    a, b = _footer(name, a_path).schema, _footer(name, b_path).schema
    if not a.equals(b):
        raise _clash(name, a_path, b_path, a, b)


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


def _statistics(name: str, files: Sequence[str], heads: Mapping[int, FooterHead],
                columns: Sequence[tuple[str, str]]) -> str:
    """Min..max and null counts of the first columns, from row groups spread over a few files' footers."""
    footers: list[Any] = []
    budget = STATS_FOOTER_BYTES
    picks = spread(range(len(files)), STATS_FILES)
    for i in dict.fromkeys([picks[0], picks[-1], *picks[1:-1]]):  # first and last before the others
        size = (heads[i] if i in heads else _head(name, files[i])).footer_bytes
        if footers and size > budget:
            continue
        footers.append(_footer(name, files[i]))
        budget -= size
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
    if len(footers) < len(files):
        scope = (f" (from {len(groups):,} row group{'' if len(groups) == 1 else 's'} in {len(footers):,} of "
                 f"{len(files):,} files)")
    else:
        scope = f" (from {len(groups):,} of {total:,} row groups)" if len(groups) < total else ""
    return _clip_end(f"statistics{scope}: " + "; ".join(parts), STATS_CHARS)


def spread(items: Sequence[T], k: int) -> list[T]:
    """k items spread evenly over `items`, first and last included."""
    if len(items) <= k:
        return list(items)
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]
