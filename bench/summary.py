"""How long describing one input and rendering its summary takes, from small to huge inputs.

Texts of 10^4 .. 10^9 characters and DataFrames of 10^3 .. 10^7 rows (id int, user str, date
datetime, score float, ~80-character free text). Building the data is not timed; each row is the
median of a few `describe()` + `render_summary()` calls. Goal: under 50 ms each, and the same
summary size whatever the input size.

Lazy and out-of-core frames (bench_frames.py): Polars DataFrames of the same rows, and Polars
LazyFrames and Dask DataFrames over Parquet folders of 10^4 .. 10^8 rows (1 M-row files written once
by DuckDB into a cache folder outside the repository; the 10^8 folder hard-links the 10^7 one's files).
Their goal is the file-table one, 200 ms, and flat tokens: describing never reads the whole data.

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
    print(f"{'input':<28}{'size':>22}{'median ms':>12}{'tokens':>8}  result")
    misses = 0
    families: list[tuple[str, list[int], Any]] = [
        ("text (str)", [10**k for k in range(4, 10)], make_text),
        ("table (5 columns)", [10**k for k in range(3, 8)], make_frame),
    ]
    goals = {}
    if "--no-lazy" not in sys.argv:
        from bench_frames import FRAME_FAMILIES, LAZY_GOAL_MS

        families += FRAME_FAMILIES
        goals = {name: LAZY_GOAL_MS for name, _, _ in FRAME_FAMILIES}
    for family, sizes, make in families:
        first_tokens = None
        for n in sizes:
            value = make(n)
            ms, tokens = measure(value)
            del value
            gc.collect()
            first_tokens = first_tokens or tokens
            ok = ms < goals.get(family, GOAL_MS) and tokens <= FLAT * first_tokens
            misses += not ok
            unit = "chars" if family.startswith("text") else "rows"
            print(f"{family:<28}{f'{n:,} {unit}':>22}{ms:>12.1f}{tokens:>8}  {'PASS' if ok else 'MISS'}")
    print("all PASS" if not misses else f"{misses} MISS")
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
