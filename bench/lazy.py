"""Data where it lives: binding Parquet datasets of 10^6, 10^8 and 10^9 rows and aggregating them in the kernel.

For each dataset (5 columns: id, user_id, category, amount, day; ~13 bytes a row on disk), generated once
with DuckDB into ~/.cache/rlmnb-bench/ (override with RLMNB_BENCH_CACHE) and reused, in files of 25 M rows.
Only the first 4 files of a dataset are generated row by row; the 10^9-row dataset's other 36 files are
byte copies of its first (real copies, so the aggregate reads all ~13 GB; generating 10^9 distinct rows
takes about an hour on two busy cores). Counts and aggregates are over all 10^9 rows.

- bind: median time of `bind_inputs({"events": folder})` (describe from footers + a LIMIT sample + the
  summary), the sizes interleaved round by round; "vs 1st" is the ratio to the first size's median.
  Goal: <= 200 ms at every size, flat.
- shipped: bytes written to the kernel sandbox's transfer directory for that input. Goal: 0.
- sql(): a whole-dataset aggregate (`SELECT category, count(*), avg(amount), max(day) ... GROUP BY 1`) run
  by a scripted root model in a real kernel sandbox, twice: "1st sql" includes importing DuckDB and opening
  its database in the kernel, "sql() s" is the second run; and the peak RSS of the kernel and of this
  (host) process. Goal: kernel peak RSS under 1 GB while the dataset is several times that on disk.
- baseline: `pandas.read_parquet(folder)` and the same aggregate in pandas, in a subprocess capped at
  BASELINE_GB of address space (RLIMIT_AS): its time and peak RSS, or "out of memory".

- many files (--many-files 1000,10000): 10^6 rows split into that many files, in one folder and as Hive
  partitions, bind time only (a Hive dataset's key types need DuckDB to bind over every path, ~0.1 ms a file):
  each file's footer head is read for an exact count up to parquet.MAX_COUNT_FILES files or
  COUNT_SECONDS, beyond that the count is an estimate and the summary says so.

Run: PYTHONPATH=. .venv/bin/python bench/lazy.py [--sizes 6,8,9] [--bind-only] [--many-files 1000,10000]
     [--repeat 9] [--generate-only]
--bind-only skips the sql() aggregate and the pandas baseline (minutes at 10^9) while iterating.
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
from typing import Any, TypeVar

K = TypeVar("K")
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


def bind_times(folders: dict[K, Path], repeat: int) -> dict[K, tuple[float, int, str]]:
    """Median bind time (ms), tokens and summary text of each folder; sizes interleaved round by round."""
    from rlmnb._ground.config import RLMConfig
    from rlmnb.inputs import bind_inputs

    config = RLMConfig()
    times: dict[K, list[float]] = {e: [] for e in folders}
    last: dict[K, tuple[int, str]] = {}
    for _ in range(repeat):
        for e, folder in folders.items():
            start = time.perf_counter()
            _, summary = bind_inputs({"events": folder}, config)
            times[e].append((time.perf_counter() - start) * 1000)
            last[e] = (summary.tokens, summary.text)
    return {e: (statistics.median(times[e]), *last[e]) for e in folders}


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


_KERNEL_BIND_ONLY = """
import resource
events = inputs["events"]
result = None
first = seconds = float("nan")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(type(events).__name__, len(events.columns))
"""


def kernel_aggregate(folder: Path, aggregate: bool = True) -> dict[str, Any]:
    """Bind the folder in a kernel sandbox (bytes shipped) and, with `aggregate`, run the GROUP BY there."""
    from rlmnb import RLM
    from rlmnb.testing import ScriptedLM

    code = _KERNEL_CODE if aggregate else _KERNEL_BIND_ONLY
    root = ScriptedLM([f"```python\n{code}\n```",
                       "```python\nsubmit({'seconds': seconds, 'first': first, 'peak': peak, "
                       "'rows': None if result is None else int(result['n'].sum())})\n```"])
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


def many_files(files: int, hive: bool) -> Path:
    """10^6 rows in `files` files: Hive partitions (part=0..files-1) or one flat folder (part-00000.parquet...)."""
    folder = CACHE / f"events-1e6-in-{files}-{'partitions' if hive else 'files'}"
    if folder.exists():
        return folder
    print(f"  generating {folder}", flush=True)
    tmp = f"{folder}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    query = (f"SELECT range AS id, range % {files} AS part, (range * 40503 % 100000) / 100.0 AS amount "
             f"FROM range(1000000)")
    if hive:
        script = "import duckdb, sys; duckdb.sql(sys.argv[1])"
        query = f"COPY ({query}) TO '{tmp}' (FORMAT parquet, PARTITION_BY (part))"
    else:
        script = ("import duckdb, os, sys, pyarrow.parquet as pq; t = duckdb.sql(sys.argv[1]).to_arrow_table(); "
                  "n = int(sys.argv[3]); os.makedirs(sys.argv[2]); step = -(-len(t) // n)\n"
                  "for i in range(n): pq.write_table(t.slice(i * step, step), f'{sys.argv[2]}/part-{i:05d}.parquet')")
    subprocess.run([sys.executable, "-c", "import duckdb; duckdb.sql('SET enable_progress_bar = false')\n" + script,
                    query, tmp, str(files)], check=True)
    os.replace(tmp, folder)
    return folder


def cell(value: float | None, fmt: str) -> str:
    return "-" if value is None or value != value else format(value, fmt)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6,8,9", help="powers of ten of the row counts (default 6,8,9)")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--bind-only", action="store_true",
                        help="only bind time, tokens and bytes shipped (no sql() aggregate, no pandas baseline)")
    parser.add_argument("--no-baseline", action="store_true", help="skip pandas.read_parquet")
    parser.add_argument("--repeat", type=int, default=9, help="bind rounds (sizes interleaved); medians (default 9)")
    parser.add_argument("--many-files", default="",
                        help="also bind 10^6 rows split into this many files, e.g. 1000,10000 (bind columns only)")
    args = parser.parse_args()
    exps = [int(x) for x in args.sizes.split(",")]
    folders = {e: dataset(e) for e in exps}
    counts = [int(n) for n in args.many_files.split(",") if n]
    spread = {(n, hive): many_files(n, hive) for n in counts for hive in (False, True)}
    if args.generate_only:
        for e, f in folders.items():
            print(f"10^{e} rows: {f} ({gb(folder_bytes(f))})")
        return 0
    import duckdb
    import pandas as pd

    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"duckdb {duckdb.__version__}, pandas {pd.__version__}; cache {CACHE}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"goals: bind <= {GOAL_BIND_MS:.0f} ms and flat, 0 bytes shipped, kernel peak RSS < {gb(GOAL_KERNEL_RSS)}; "
          f"baseline capped at {BASELINE_GB} GB of address space")
    bind_times({exps[0]: folders[exps[0]]}, 1)  # warm up: imports duckdb and pyarrow, the tokenizer
    binds = bind_times(folders, args.repeat)
    smallest = binds[exps[0]][0]
    print(f"{'rows':>14} {'on disk':>9} {'files':>5} {'bind ms':>8} {'vs 1st':>6} {'tokens':>7} {'shipped':>8} "
          f"{'sql() s':>8} {'1st sql':>8} {'kernel RSS':>11} {'host RSS':>9} {'pandas s':>9} {'pandas RSS':>11}"
          f"  result")
    misses = 0
    for e in exps:
        folder = folders[e]
        ms, tokens, _ = binds[e]
        agg = kernel_aggregate(folder, aggregate=not args.bind_only)
        host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        base = {"skipped": True} if args.no_baseline or args.bind_only else baseline(folder)
        if base.get("oom"):
            pandas_s, pandas_rss = "out of", "memory"
        elif base.get("skipped"):
            pandas_s, pandas_rss = "-", "-"
        else:
            pandas_s, pandas_rss = f"{base['seconds']:.1f}", gb(base["rss"])
        ok = ms <= GOAL_BIND_MS and agg["shipped"] == 0 and agg["transfer_dir_bytes"] == 0
        if not args.bind_only:
            ok = ok and agg["peak"] < GOAL_KERNEL_RSS and agg["rows"] == 10**e
        misses += not ok
        kernel_rss = "-" if args.bind_only else gb(agg["peak"])
        print(f"{10**e:>14,} {gb(folder_bytes(folder)):>9} {len(list(folder.glob('*.parquet'))):>5} {ms:>8.0f} "
              f"{ms / smallest:>6.2f} {tokens:>7} {agg['shipped']:>8,} {cell(agg['seconds'], '.1f'):>8} "
              f"{cell(agg['first'], '.1f'):>8} {kernel_rss:>11} {gb(host):>9} {pandas_s:>9} {pandas_rss:>11}  "
              f"{'PASS' if ok else 'MISS'}", flush=True)
    bind_ms = [binds[e][0] for e in exps]
    flat = max(bind_ms) <= max(GOAL_BIND_MS, 2 * min(bind_ms))
    print(f"bind time flat across sizes: {'yes' if flat else 'no'} ({min(bind_ms):.0f}..{max(bind_ms):.0f} ms)")
    for e in exps:  # what the summary says it knows, and from where
        known = [line.strip() for line in binds[e][2].splitlines() if "Parquet file" in line or "statistics" in line]
        print(f"  10^{e}: " + " | ".join(part.split("; files as of")[0][:120] for part in known))
    if spread:
        many = bind_times(spread, args.repeat)
        print("\n10^6 rows in many files: bind time by file count (Parquet in one folder, or one Hive partition each)")
        print(f"{'files':>7} {'layout':>10} {'bind ms':>8} {'tokens':>7}  rows")
        for (n, hive), (ms, tokens, text) in many.items():
            rows = next((line.split(";")[1].strip() for line in text.splitlines() if "Parquet files" in line), "?")
            print(f"{n:>7,} {'hive' if hive else 'flat':>10} {ms:>8.0f} {tokens:>7}  {rows}")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("all PASS" if not misses and flat else f"{misses + (not flat)} MISS")
    return 0 if not misses and flat else 1


if __name__ == "__main__":
    sys.exit(main())
