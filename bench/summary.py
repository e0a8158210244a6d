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

DuckDB relations: over the Parquet files (`duckdb.read_parquet`), over an in-memory table (10^6 and 10^7
rows), and over a file-backed database made once beside the Parquet cache (`events-1e8.duckdb`: a table
`events` and a view `events_view` over the Parquet files): the table, a filtered query of it and the view.
Their rows come from the plan (a table's stored count, Parquet metadata), never from running the query.
The `kernel` column says how each reaches a kernel sandbox: `reopen` (zero data bytes) or `copy` (Arrow).

Run: .venv/bin/python bench/summary.py [--lazy-only]   (a few minutes the first time; the 10^9-character
text needs ~1 GB; the 10^8-row database file ~1 minute once)
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rlmnb._ground.config import RLMConfig
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
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min) at start")
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"pandas {pd.__version__}, numpy {np.__version__}, pyarrow {pa.__version__}")
    print(f"goal: < {GOAL_MS:.0f} ms in memory, < {GOAL_LAZY_MS:.0f} ms lazy, flat tokens (at most x{FLAT} the smallest input's); "
          f"median of {REPEATS}, summary cap {CONFIG.summary_max_tokens} tokens")
    measure("warm up the tokenizer")
    if "--lazy-only" not in sys.argv:
        print(f"{'input':<20}{'size':>22}{'median ms':>12}{'tokens':>8}  result")
    misses = 0
    families: list[tuple[str, list[int], Any]] = [
        ("text (str)", [10**k for k in range(4, 10)], make_text),
        ("table (5 columns)", [10**k for k in range(3, 8)], make_frame),
    ]
    families.append(("polars DataFrame", [10**k for k in range(3, 8)], polars_frame))
    if "--lazy-only" in sys.argv:  # only the rows of tables that stay where they are
        families = []
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
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min) at end")
    print("all PASS" if not misses else f"{misses} MISS")
    return 0 if not misses else 1


GOAL_LAZY_MS = 200.0


def duckdb_file(exp: int) -> Path | None:
    """`events-1e{exp}.duckdb` in the bench cache: a real table `events` of the cached Parquet rows and a view
    `events_view` over the Parquet files, made once (10^8 rows: ~1 min and ~0.5 GB here; 10^9: ~20 min and
    ~5.3 GB, made only when RLMNB_BENCH_DUCKDB_1E9=1). None when it is not there and is not to be made."""
    import duckdb
    from lazy import CACHE

    path = CACHE / f"events-1e{exp}.duckdb"
    if path.exists():
        return path
    if exp >= 9 and os.environ.get("RLMNB_BENCH_DUCKDB_1E9") != "1":
        return None
    tmp = path.with_suffix(".duckdb.tmp")
    for leftover in (tmp, Path(f"{tmp}.wal")):
        leftover.unlink(missing_ok=True)
    print(f"(making {path.name} once: a table of 10^{exp} rows...)", flush=True)
    con = duckdb.connect(str(tmp))
    files = f"{CACHE}/events-1e{exp}/*.parquet"
    con.execute(f"CREATE VIEW events_view AS SELECT * FROM read_parquet('{files}')")
    con.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{files}')")
    con.close()
    tmp.rename(path)
    return path


def _crossing(value: Any) -> str:
    """How the value reaches a kernel sandbox: reopened (0 data bytes) or copied once as Arrow."""
    from rlmnb.inputs._registry import crossing_spec

    field = describe("data", value, CONFIG)
    return "reopen" if crossing_spec(field) is not None else "copy"


def lazy_rows() -> int:
    """Rows for tables that stay where they are: file tables, DuckDB relations, Arrow datasets, LazyFrames, Dask.

    Each repeat describes a value made afresh (not timed), so no run profits from metadata an earlier one
    read; the sizes of a family take turns. `x 1e6` is the median time over the same family's 10^6-row
    median, measured in the same rounds."""
    import dask.dataframe as dd
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds
    from lazy import CACHE, dataset

    exps = [6] + [e for e in (8, 9) if (CACHE / f"events-1e{e}").is_dir() and not any(
        (CACHE / f"events-1e{e}").glob("*.tmp"))]
    folders = {e: dataset(e) if e == 6 else CACHE / f"events-1e{e}" for e in exps}
    files = {e: duckdb_file(e) for e in exps}
    memory = duckdb.connect()
    for e in (6, 7):
        memory.execute(f"CREATE TABLE events_1e{e} AS SELECT * FROM read_parquet('{folders[6]}/*.parquet')"
                       + ("" if e == 6 else f", range(10) t(r) LIMIT {10**e}"))
    mems = {6: "events_1e6", 7: "events_1e7"}
    makers: list[tuple[str, dict[int, Any], Any]] = [
        ("file table (Parquet)", folders, lambda f: f),
        ("duckdb rel: Parquet", folders, lambda f: duckdb.read_parquet(f"{f}/*.parquet")),
        ("duckdb rel: memory", mems, lambda t: memory.table(t)),
        ("duckdb rel: db table", files, lambda p: duckdb.connect(str(p), read_only=True).table("events")),
        ("duckdb rel: db filter", files,
         lambda p: duckdb.connect(str(p), read_only=True).sql("SELECT * FROM events WHERE amount > 50")),
        ("duckdb rel: db view", files, lambda p: duckdb.connect(str(p), read_only=True).table("events_view")),
        ("pyarrow dataset", folders, lambda f: ds.dataset(f, format="parquet")),
        ("polars LazyFrame", folders, lambda f: pl.scan_parquet(f"{f}/*.parquet")),
        ("dask DataFrame", folders, lambda f: dd.read_parquet(str(f)))]
    print(f"{'lazy input':<22}{'size':>20}{'median ms':>12}{'x 1e6':>7}{'tokens':>8}{'kernel':>8}  result")
    misses = 0
    for family, sources, make in makers:
        present = {e: source for e, source in sources.items() if source is not None}
        timed = measure_interleaved(make, present)
        first_tokens = first_ms = None
        for e, source in sources.items():
            if source is None:
                print(f"{family:<22}{f'{10**e:,} rows':>20}  (no {10**e:,}-row database file; see duckdb_file)")
                continue
            ms, tokens = timed[e]
            first_tokens, first_ms = first_tokens or tokens, first_ms or ms
            ok = ms < GOAL_LAZY_MS and tokens <= FLAT * first_tokens
            misses += not ok
            how = _crossing(make(source))
            print(f"{family:<22}{f'{10**e:,} rows':>20}{ms:>12.1f}{ms / first_ms:>7.2f}{tokens:>8}{how:>8}  "
                  f"{'PASS' if ok else 'MISS'}")
    memory.close()
    return misses


def measure_interleaved(make: Any, sources: dict[int, Any]) -> dict[int, tuple[float, int]]:
    """Median time of describe() + render_summary() of `make(source)` for every size, REPEATS rounds over
    all sizes in turn (so load that drifts during the run weighs on every size alike); each value is made,
    untimed, just before it is described. Returns {size: (median ms, summary tokens)}."""
    times: dict[int, list[float]] = {e: [] for e in sources}
    tokens: dict[int, int] = {}
    for _ in range(REPEATS):
        for e, source in sources.items():
            value = make(source)
            start = time.perf_counter()
            field = describe("data", value, CONFIG)
            summary = render_summary([field.info], CONFIG)
            times[e].append((time.perf_counter() - start) * 1000)
            tokens[e] = summary.tokens
            del value, field
    return {e: (statistics.median(times[e]), tokens[e]) for e in sources}


if __name__ == "__main__":
    sys.exit(main())
