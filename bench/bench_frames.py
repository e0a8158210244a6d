"""The lazy and out-of-core rows of bench/summary.py: Polars DataFrames, Polars LazyFrames and Dask
DataFrames, from 10^3 / 10^4 to 10^7 / 10^8 rows, with the columns of summary.py's tables.

Parquet folders of 1 M-row files are written once by DuckDB into a cache folder outside the repository
(RLMNB_BENCH_CACHE, default ~/.cache/rlmnb-bench/frames); the 10^8-row folder hard-links the 10^7-row
folder's files ten times, so it costs no extra disk. Describing reads footers and the first rows only,
so the time and the summary's tokens should stay flat from the smallest folder to the largest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

LAZY_GOAL_MS = 200.0
FILE_ROWS = 1_000_000
CACHE = Path(os.environ.get("RLMNB_BENCH_CACHE", Path.home() / ".cache" / "rlmnb-bench" / "frames"))

_COLUMNS = """i AS id, 'user_' || lpad(CAST(hash(i) % 5000 AS VARCHAR), 5, '0') AS user,
  TIMESTAMP '2024-01-01' + to_seconds(CAST(hash(i * 7) % 31536000 AS BIGINT)) AS date,
  (hash(i * 13) % 1000000) / 1e6 AS score,
  'note ' || CAST(hash(i * 17) % 2000 AS VARCHAR) || ': the payment was not received again, please help' AS text"""


def parquet_folder(rows: int) -> Path:
    """A folder of Parquet files holding `rows` rows (at most 1 M per file), written once."""
    folder = CACHE / f"rows-{rows}"
    done = folder / ".complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    if rows > 10 * FILE_ROWS and rows % (10 * FILE_ROWS) == 0:
        base = parquet_folder(10 * FILE_ROWS)
        files = sorted(base.glob("*.parquet"))
        for k in range(rows // (10 * FILE_ROWS)):
            for f in files:
                target = folder / f"copy{k:03d}-{f.name}"
                if not target.exists():
                    os.link(f, target)
    else:
        import duckdb

        for start in range(0, rows, FILE_ROWS):
            count = min(FILE_ROWS, rows - start)
            target = folder / f"part-{start // FILE_ROWS:04d}.parquet"
            duckdb.sql(f"COPY (SELECT {_COLUMNS} FROM range({start}, {start + count}) t(i)) TO '{target}' "
                       f"(FORMAT parquet, ROW_GROUP_SIZE 200000)")
    done.touch()
    return folder


def polars_frame(rows: int) -> Any:
    import polars as pl
    from summary import make_frame

    return pl.from_pandas(make_frame(rows))


def polars_lazy(rows: int) -> Any:
    import polars as pl

    return pl.scan_parquet(parquet_folder(rows) / "*.parquet")


def dask_frame(rows: int) -> Any:
    import dask.dataframe as dd

    return dd.read_parquet(str(parquet_folder(rows) / "*.parquet"))


FRAME_FAMILIES: list[tuple[str, list[int], Any]] = [
    ("polars DataFrame", [10**k for k in range(3, 8)], polars_frame),
    ("polars LazyFrame (Parquet)", [10**k for k in range(4, 9)], polars_lazy),
    ("dask DataFrame (Parquet)", [10**k for k in range(4, 9)], dask_frame),
]
