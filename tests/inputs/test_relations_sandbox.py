"""Relations over DuckDB database files and partitioned Arrow datasets in both sandboxes, through RLM.run
with scripted models: the kernel sandbox (confined) reopens them from their files with zero data bytes
in its transfer directory; what cannot be reopened (a database file open for writing, which DuckDB locks
against other processes; an in-memory dataset) crosses once as Arrow and the summary says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database file with a table, a second schema and a view over a Parquet file beside it."""
    folder = tmp_path_factory.mktemp("shop")
    path = folder / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders AS SELECT range AS id, range % 5 AS region, range * 2 AS amount FROM range(10000)")
    con.execute("CREATE SCHEMA ref")
    con.execute("CREATE TABLE ref.regions AS SELECT range AS region, 'r' || range AS label FROM range(5)")
    con.execute(f"COPY (SELECT range AS id, range % 3 = 0 AS flagged FROM range(10000)) TO '{folder}/flags.parquet'")
    con.execute(f"CREATE VIEW flags AS SELECT * FROM read_parquet('{folder}/flags.parquet')")
    con.close()
    return path


def _run(kind: str, root: ScriptedLM, **inputs: Any) -> Any:
    confinement = "required" if kind == "kernel" else "auto"
    return RLM(root, sandbox=kind, confinement=confinement).run("How many?", keep_session=True, **inputs)


def _data_bytes(result: Any) -> int:
    """Bytes of data files in the kernel's transfer directory (manifests are JSON records, not data)."""
    directory = getattr(result.session.sandbox, "transfer_dir", None)
    if directory is None:
        return 0
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if not n.startswith("manifest"))


_QUERY = """
print(type(inputs['orders']).__name__)
n = sql('''SELECT count(*) AS n FROM orders JOIN big USING (id, region, amount) JOIN labels USING (region)
           JOIN flagged USING (id)''').n[0]
total = int(inputs['big'].aggregate('sum(amount)').fetchall()[0][0])
try:
    inputs['orders'].insert([1, 2, 3])
except Exception as e:
    print('refused:', type(e).__name__)
"""


def test_a_read_only_database_file_is_reopened_in_the_kernel_with_nothing_copied(kind: str, shop: Path) -> None:
    con = duckdb.connect(str(shop), read_only=True)
    inputs = {"orders": con.table("orders"), "big": con.sql("SELECT id, region, amount FROM orders WHERE amount > 100"),
              "labels": con.table("ref.regions"), "flagged": con.sql("SELECT id FROM flags WHERE flagged")}
    root = ScriptedLM([code(_QUERY), code("submit([int(n), total])")])
    result = _run(kind, root, **inputs)
    try:
        assert result.answer == [3317, sum(2 * i for i in range(51, 10000))], "\n".join(observations(root))
        assert "refused: " in observations(root)[0]
        summary = root.requests[0][1]["content"]
        assert "reads shop.duckdb: a kernel sandbox attaches it read-only and reruns the query" in summary
        assert "10,000 rows x 3 columns" in summary  # a table's count comes from its storage
        if kind == "kernel":
            started = next(e for e in result.trajectory.events if getattr(e, "confinement", None))
            assert started.confinement["active"] != "none"
            assert result.session.sandbox.bytes_shipped == 0 and _data_bytes(result) == 0
    finally:
        result.session.close()
        con.close()


def test_a_database_file_open_for_writing_crosses_once_as_arrow_and_says_why(kind: str, tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "live.duckdb"))
    con.execute("CREATE TABLE t AS SELECT range AS k FROM range(100)")
    root = ScriptedLM([code("n = sql('SELECT count(*) AS n FROM t WHERE k < 10').n[0]"), code("submit(int(n))")])
    result = _run(kind, root, t=con.table("t"))
    try:
        assert result.answer == 10, (result.reason, observations(root))
        summary = root.requests[0][1]["content"]
        assert "a kernel sandbox gets its result once as Arrow IPC: your connection has live.duckdb open for writing" \
               in summary and "read_only=True" in summary
        if kind == "kernel":
            assert 0 < result.session.sandbox.bytes_shipped == _data_bytes(result)
    finally:
        result.session.close()
    con.execute("INSERT INTO t VALUES (1000)")  # the user's connection still writes
    assert con.sql("SELECT count(*) FROM t").fetchall() == [(101,)]
    con.close()


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`<year>/<month>/part.parquet` folders (directory partitioning) and `<year>_part.parquet` files."""
    root = tmp_path_factory.mktemp("parts")
    for year in (2024, 2025):
        for month in (1, 2, 3):
            folder = root / "dirs" / str(year) / str(month)
            folder.mkdir(parents=True)
            duckdb.sql(f"COPY (SELECT range AS id, {month} * range AS amount FROM range(100)) TO '{folder}/part.parquet'")
        (root / "names").mkdir(exist_ok=True)
        duckdb.sql(f"COPY (SELECT range AS id FROM range(10)) TO '{root}/names/{year}_part.parquet'")
    return root


def _datasets(root: Path) -> dict[str, Any]:
    dirs = ds.dataset(root / "dirs", format="parquet",
                      partitioning=ds.partitioning(pa.schema([("year", pa.int16()), ("month", pa.int8())])))
    return {"dirs": dirs,
            "inferred": ds.dataset(root / "dirs", format="parquet", partitioning=["year", "month"]),
            "named": ds.dataset(root / "names", format="parquet",
                                partitioning=ds.partitioning(pa.schema([("year", pa.int32())]), flavor="filename")),
            "listed": ds.dataset([str(root / "dirs/2024/1/part.parquet"), str(root / "dirs/2025/3/part.parquet")],
                                 format="parquet"),
            "recent": dirs.filter(pc.field("year") == 2025),
            "twice": ds.dataset([dirs, dirs])}


_DATASETS = """
seen = {n: [int(v) for v in sql(f'SELECT count(*) AS n, sum(amount) AS s FROM {n}').iloc[0]] for n in ('dirs', 'inferred',
        'listed', 'recent', 'twice')}
seen['years'] = sql('SELECT DISTINCT year FROM named ORDER BY 1').year.tolist()
seen['march'] = int(inputs['dirs'].to_table(filter=pc.field('month') == 3).num_rows)
"""


def test_partitioned_listed_filtered_and_union_datasets_are_reopened_from_their_files(kind: str, parts: Path) -> None:
    root = ScriptedLM([code("import pyarrow.compute as pc\n" + _DATASETS), code("submit(seen)")])
    result = _run(kind, root, **_datasets(parts))
    per_dir = [sum(m * i for i in range(100)) for m in (1, 2, 3)]
    try:
        assert result.answer == {"dirs": [600, 2 * sum(per_dir)], "inferred": [600, 2 * sum(per_dir)],
                                 "listed": [200, per_dir[0] + per_dir[2]], "recent": [300, sum(per_dir)],
                                 "twice": [1200, 4 * sum(per_dir)], "years": [2024, 2025], "march": 200}, "\n".join(observations(root))
        summary = root.requests[0][1]["content"]
        assert "directory partitions: year, month" in summary and "filename partitions: year" in summary
        if kind == "kernel":
            assert result.session.sandbox.bytes_shipped == 0 and _data_bytes(result) == 0
    finally:
        result.session.close()


def test_a_view_with_a_relative_path_reads_from_the_directory_it_was_bound_in(kind: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect("notes.duckdb")
    con.execute("COPY (SELECT range AS id FROM range(42)) TO 'notes.parquet'")
    con.execute("CREATE VIEW notes AS SELECT * FROM read_parquet('notes.parquet')")
    con.close()
    con = duckdb.connect("notes.duckdb", read_only=True)
    root = ScriptedLM([code("n = sql('SELECT count(*) AS n FROM notes').n[0]"), code("submit(int(n))")])
    result = _run(kind, root, notes=con.table("notes"))
    try:
        assert result.answer == 42, "\n".join(observations(root))
        if kind == "kernel":
            assert result.session.sandbox.bytes_shipped == 0 and _data_bytes(result) == 0
    finally:
        result.session.close()
        con.close()
