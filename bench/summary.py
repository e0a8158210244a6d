"""How long describing one input and rendering its summary takes, from small to huge inputs.

Texts of 10^4 .. 10^9 characters and DataFrames of 10^3 .. 10^7 rows (id int, user str, date
datetime, score float, ~80-character free text). Building the data is not timed; each row is the
median of a few `describe()` + `render_summary()` calls. Goal: under 50 ms each, and the same
summary size whatever the input size.

Lazy tables (a Parquet folder bound as a file table, the same as a DuckDB relation and as a pyarrow
dataset) use bench/lazy.py's cached datasets of 10^6, 10^8 and 10^9 rows (those present; 10^6 is
generated when missing). Goal for them: under 200 ms (describing reads footers and runs a few small
DuckDB queries), and flat tokens.

Polars DataFrames take the tables' rows (goal 50 ms); a Polars LazyFrame and a Dask DataFrame over
the same cached Parquet datasets are lazy rows too (goal 200 ms, flat tokens: describing reads footers
and the first rows of one file, never the whole data).

Run: .venv/bin/python bench/summary.py   (a few minutes the first time; the 10^9-character text needs ~1 GB)
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rlmnb.config import RLMConfig
from rlmnb.inputs import describe, render_summary

GOAL_MS = 50.0
FLAT = 1.25  # a summary may grow by at most this factor from the smallest input of its family
REPEATS = 5
CONFIG = RLMConfig()
WORDS = ("error", "timeout", "user", "payment", "refund", "order", "shipped", "delayed", "customer", "says",
         "the", "a", "was", "not", "received", "again", "please", "help", "account", "locked", "on", "monday")


def make_text(n: int) -> str:
    rng = np.random.default_rng(1)
    chunk = " ".join(rng.choice(WORDS, 3_000))[:10_000]
    chunk += "." * (10_000 - len(chunk))
    return chunk[:n] if n <= 10_000 else chunk * (n // 10_000)


def make_frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    users = pa.array([f"user_{i:05d}" for i in range(5_000)])
    notes = pa.array([" ".join(rng.choice(WORDS, 20))[:80].ljust(80, ".") for _ in range(2_000)])
    start = np.datetime64("2024-01-01T00:00:00", "s")
    table = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "user": users.take(pa.array(rng.integers(0, len(users), n))),
        "date": start + rng.integers(0, 365 * 86_400, n).astype("timedelta64[s]"),
        "score": rng.random(n),
        "text": notes.take(pa.array(rng.integers(0, len(notes), n))),
    })
    return table.to_pandas()


def polars_frame(n: int) -> Any:
    import polars as pl

    return pl.from_pandas(make_frame(n))


def measure(value: Any) -> tuple[float, int]:
    times = []
    tokens = 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        field = describe("data", value, CONFIG)
        summary = render_summary([field.info], CONFIG)
        times.append((time.perf_counter() - start) * 1000)
        tokens = summary.tokens
    return statistics.median(times), tokens


def main() -> int:
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"pandas {pd.__version__}, numpy {np.__version__}, pyarrow {pa.__version__}")
    print(f"goal: < {GOAL_MS:.0f} ms, flat tokens (at most x{FLAT} the smallest input's); "
          f"median of {REPEATS}, summary cap {CONFIG.summary_max_tokens} tokens")
    measure("warm up the tokenizer")
    print(f"{'input':<20}{'size':>22}{'median ms':>12}{'tokens':>8}  result")
    misses = 0
    families: list[tuple[str, list[int], Any]] = [
        ("text (str)", [10**k for k in range(4, 10)], make_text),
        ("table (5 columns)", [10**k for k in range(3, 8)], make_frame),
    ]
    families.append(("polars DataFrame", [10**k for k in range(3, 8)], polars_frame))
    for family, sizes, make in families:
        first_tokens = None
        for n in sizes:
            value = make(n)
            ms, tokens = measure(value)
            del value
            gc.collect()
            first_tokens = first_tokens or tokens
            ok = ms < GOAL_MS and tokens <= FLAT * first_tokens
            misses += not ok
            unit = "chars" if family.startswith("text") else "rows"
            print(f"{family:<20}{f'{n:,} {unit}':>22}{ms:>12.1f}{tokens:>8}  {'PASS' if ok else 'MISS'}")
    misses += lazy_rows()
    print("all PASS" if not misses else f"{misses} MISS")
    return 0 if not misses else 1


GOAL_LAZY_MS = 200.0


def lazy_rows() -> int:
    """Rows for tables that stay where they are: file tables, DuckDB relations, Arrow datasets."""
    import dask.dataframe as dd
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds
    from lazy import CACHE, dataset

    exps = [6] + [e for e in (8, 9) if (CACHE / f"events-1e{e}").is_dir() and not any(
        (CACHE / f"events-1e{e}").glob("*.tmp"))]
    folders = {e: dataset(e) if e == 6 else CACHE / f"events-1e{e}" for e in exps}
    makers = [("file table (Parquet)", lambda f: f),
              ("duckdb relation", lambda f: duckdb.read_parquet(f"{f}/*.parquet")),
              ("pyarrow dataset", lambda f: ds.dataset(f, format="parquet")),
              ("polars LazyFrame", lambda f: pl.scan_parquet(f"{f}/*.parquet")),
              ("dask DataFrame", lambda f: dd.read_parquet(str(f)))]
    misses = 0
    for family, make in makers:
        first_tokens = None
        for e in exps:
            ms, tokens = measure(make(folders[e]))
            first_tokens = first_tokens or tokens
            ok = ms < GOAL_LAZY_MS and tokens <= FLAT * first_tokens
            misses += not ok
            print(f"{family:<20}{f'{10**e:,} rows':>22}{ms:>12.1f}{tokens:>8}  {'PASS' if ok else 'MISS'}")
    return misses


if __name__ == "__main__":
    sys.exit(main())
