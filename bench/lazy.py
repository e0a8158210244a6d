"""Data where it lives: binding Parquet datasets of 10^6, 10^8 and 10^9 rows and aggregating them in the kernel.

For each dataset (5 columns: id, user_id, category, amount, day; ~13 bytes a row on disk), generated once
with DuckDB into ~/.cache/rlmnb-bench/ (override with RLMNB_BENCH_CACHE) and reused, in files of 25 M rows.
Only the first 4 files of a dataset are generated row by row; the 10^9-row dataset's other 36 files are
byte copies of its first (real copies, so the aggregate reads all ~13 GB; generating 10^9 distinct rows
takes about an hour on two busy cores). Counts and aggregates are over all 10^9 rows.

- bind: median time of `bind_inputs({"events": folder})` (describe from footers + a LIMIT sample + the
  summary). Goal: <= 200 ms at every size, flat.
- shipped: bytes written to the kernel sandbox's transfer directory for that input. Goal: 0.
- sql(): a whole-dataset aggregate (`SELECT category, count(*), avg(amount), max(day) ... GROUP BY 1`) run
  by a scripted root model in a real kernel sandbox, twice: "1st sql" includes importing DuckDB and opening
  its database in the kernel, "sql() s" is the second run; and the peak RSS of the kernel and of this
  (host) process. Goal: kernel peak RSS under 1 GB while the dataset is several times that on disk.
- baseline: `pandas.read_parquet(folder)` and the same aggregate in pandas, in a subprocess capped at
  BASELINE_GB of address space (RLIMIT_AS): its time and peak RSS, or "out of memory".

Run: PYTHONPATH=. .venv/bin/python bench/lazy.py [--sizes 6,8,9] [--generate-only]
The first run generates the data (10^9 rows: ~12 GB, tens of minutes on 2 busy cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("RLMNB_BENCH_CACHE", Path.home() / ".cache" / "rlmnb-bench"))
FILE_ROWS = 25_000_000
DISTINCT_FILES = 4  # files generated row by row; later files of a dataset are byte copies of its first
BASELINE_GB = 6
GOAL_BIND_MS = 200.0
GOAL_KERNEL_RSS = 1 << 30
AGGREGATE = ("SELECT category, count(*) AS n, avg(amount) AS mean_amount, max(day) AS last_day "
             "FROM events GROUP BY category ORDER BY category")

_GENERATE = """
import duckdb, os, sys
out, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
con = duckdb.connect()
con.execute("SET threads = 2; SET memory_limit = '2GB'; SET enable_progress_bar = false")
tmp = out + ".tmp"
con.execute(f'''COPY (SELECT range AS id, (range * 2654435761) % 1000003 AS user_id,
    ['books','games','music','food','tools','garden','toys','health'][(range % 8) + 1] AS category,
    (((range * 40503) % 100000) / 100.0)::DOUBLE AS amount,
    (DATE '2025-01-01' + ((range // 1000) % 365)::INTEGER) AS day
    FROM range({first}, {last})) TO '{tmp}' (FORMAT parquet)''')
os.replace(tmp, out)
"""

_BASELINE = """
import json, resource, sys, time
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    import pandas as pd
    start = time.perf_counter()
    df = pd.read_parquet(sys.argv[1])
    out = df.groupby("category").agg(n=("id", "size"), mean_amount=("amount", "mean"), last_day=("day", "max"))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "groups": len(out)}))
except MemoryError:
    print(json.dumps({"oom": True, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def dataset(exp: int) -> Path:
    """The folder of 10**exp rows, generated (file by file, resumable) when missing."""
    rows = 10**exp
    folder = CACHE / f"events-1e{exp}"
    folder.mkdir(parents=True, exist_ok=True)
    parts = max(1, rows // FILE_ROWS)
    per = rows // parts
    for i in range(parts):
        path = folder / f"part-{i:04d}.parquet"
        if path.exists():
            continue
        if i >= DISTINCT_FILES:  # a real copy of the first file (not a link: the scan reads every byte)
            print(f"  copying {folder / 'part-0000.parquet'} to {path.name}", flush=True)
            shutil.copyfile(folder / "part-0000.parquet", f"{path}.tmp")
            os.replace(f"{path}.tmp", path)
            continue
        print(f"  generating {path} ({per:,} rows)", flush=True)
        subprocess.run([sys.executable, "-c", _GENERATE, str(path), str(i * per), str((i + 1) * per)], check=True)
    return folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.parquet"))


def bind_ms(folder: Path) -> tuple[float, int, str]:
    from rlmnb.config import RLMConfig
    from rlmnb.inputs import bind_inputs

    config = RLMConfig()
    times, tokens, text = [], 0, ""
    for _ in range(5):
        start = time.perf_counter()
        _, summary = bind_inputs({"events": folder}, config)
        times.append((time.perf_counter() - start) * 1000)
        tokens, text = summary.tokens, summary.text
    return statistics.median(times), tokens, text


_KERNEL_CODE = f"""
import resource, time
start = time.perf_counter()
result = sql({AGGREGATE!r})
first = time.perf_counter() - start
start = time.perf_counter()
result = sql({AGGREGATE!r})
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(result)
"""


def kernel_aggregate(folder: Path) -> dict[str, Any]:
    from rlmnb import RLM
    from rlmnb.testing import ScriptedLM

    root = ScriptedLM([f"```python\n{_KERNEL_CODE}\n```",
                       "```python\nsubmit({'seconds': seconds, 'first': first, 'peak': peak, 'groups': len(result), "
                       "'rows': int(result['n'].sum())})\n```"])
    result = RLM(root, sandbox="kernel", timeout=3600).run("Aggregate it", events=folder, keep_session=True)
    try:
        if result.status != "submitted":
            raise RuntimeError(f"the kernel run did not submit: {result.reason}")
        sandbox = result.session.sandbox
        answer = dict(result.answer)
        answer["shipped"] = sandbox.bytes_shipped
        directory = sandbox.transfer_dir
        answer["transfer_dir_bytes"] = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
                                           if not n.startswith("manifest"))
        return answer
    finally:
        result.session.close()


def baseline(folder: Path) -> dict[str, Any]:
    limit = BASELINE_GB << 30
    proc = subprocess.run([sys.executable, "-c", _BASELINE, str(folder), str(limit)], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"oom": True, "why": (proc.stderr.strip().splitlines() or ["killed"])[-1][:120]}
    return dict(json.loads(lines[-1]))


def gb(n: float) -> str:
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6,8,9", help="powers of ten of the row counts (default 6,8,9)")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--no-baseline", action="store_true", help="skip pandas.read_parquet")
    args = parser.parse_args()
    exps = [int(x) for x in args.sizes.split(",")]
    folders = {e: dataset(e) for e in exps}
    if args.generate_only:
        for e, f in folders.items():
            print(f"10^{e} rows: {f} ({gb(folder_bytes(f))})")
        return 0
    import duckdb
    import pandas as pd

    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"duckdb {duckdb.__version__}, pandas {pd.__version__}; cache {CACHE}")
    print(f"goals: bind <= {GOAL_BIND_MS:.0f} ms and flat, 0 bytes shipped, kernel peak RSS < {gb(GOAL_KERNEL_RSS)}; "
          f"baseline capped at {BASELINE_GB} GB of address space")
    bind_ms(folders[exps[0]])  # warm up: imports duckdb and pyarrow, the tokenizer
    header = (f"{'rows':>14} {'on disk':>9} {'bind ms':>8} {'tokens':>7} {'shipped':>8} {'sql() s':>8} "
              f"{'1st sql':>8} {'kernel RSS':>11} {'host RSS':>9} {'pandas s':>9} {'pandas RSS':>11}  result")
    print(header)
    misses = 0
    binds = []
    for e in exps:
        folder = folders[e]
        ms, tokens, _ = bind_ms(folder)
        binds.append(ms)
        agg = kernel_aggregate(folder)
        host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        base = {"skipped": True} if args.no_baseline else baseline(folder)
        if base.get("oom"):
            pandas_s, pandas_rss = "out of", "memory"
        elif base.get("skipped"):
            pandas_s, pandas_rss = "-", "-"
        else:
            pandas_s, pandas_rss = f"{base['seconds']:.1f}", gb(base["rss"])
        ok = (ms <= GOAL_BIND_MS and agg["shipped"] == 0 and agg["transfer_dir_bytes"] == 0
              and agg["peak"] < GOAL_KERNEL_RSS and agg["rows"] == 10**e)
        misses += not ok
        print(f"{10**e:>14,} {gb(folder_bytes(folder)):>9} {ms:>8.0f} {tokens:>7} {agg['shipped']:>8,} "
              f"{agg['seconds']:>8.1f} {agg['first']:>8.1f} {gb(agg['peak']):>11} {gb(host):>9} {pandas_s:>9} {pandas_rss:>11}  "
              f"{'PASS' if ok else 'MISS'}", flush=True)
    flat = max(binds) <= max(GOAL_BIND_MS, 2 * min(binds))
    print(f"bind time flat across sizes: {'yes' if flat else 'no'} ({min(binds):.0f}..{max(binds):.0f} ms)")
    print("all PASS" if not misses and flat else f"{misses + (not flat)} MISS")
    return 0 if not misses and flat else 1


if __name__ == "__main__":
    sys.exit(main())
