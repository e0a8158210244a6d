"""Tables in files, DuckDB relations and Arrow datasets inside both sandboxes, through RLM.run with
scripted models: what model code sees, sql() over every table, and that file-backed inputs reach the
kernel sandbox with zero data bytes written to its transfer directory (in-memory ones once, as Arrow).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")


@pytest.fixture(scope="module")
def sales(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data") / "sales"
    duckdb.sql(f"COPY (SELECT range AS id, range % 4 AS region, range * 0.5 AS amount FROM range(20000)) "
               f"TO '{root}' (FORMAT parquet, PARTITION_BY (region))")
    return root


def _data_bytes(result: Any) -> int:
    """Bytes of data files in the kernel's transfer directory (manifests are JSON records, not data)."""
    sandbox = result.session.sandbox
    directory = getattr(sandbox, "transfer_dir", None)
    if directory is None:
        return 0
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if not n.startswith("manifest"))


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


_LOOK = """
seen = {n: type(inputs[n]).__name__ for n in inputs}
print(seen)
by_region = sql('''SELECT region, count(*) AS n, sum(amount) AS total FROM sales
                   JOIN names USING (region) JOIN r USING (region) GROUP BY region ORDER BY region''')
from_files = inputs['sales'].aggregate('count(*)').fetchall()[0][0]
via_dataset = sql('SELECT count(*) AS n FROM d').iloc[0, 0]
print(by_region)
"""


def test_sql_joins_every_kind_of_table_in_both_sandboxes(kind: str, sales: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE goals AS SELECT range AS region, 10 * range AS goal FROM range(4)")
    names = pd.DataFrame({"region": [0, 1, 2, 3], "name": ["n", "e", "s", "w"]})
    rel = duckdb.read_parquet(f"{sales}/**/*.parquet", hive_partitioning=True).project("region").distinct()
    root = ScriptedLM([code(_LOOK + "goals = sql('SELECT sum(goal) AS g FROM goals').iloc[0, 0]\n"
                                    "tiny = sql('SELECT * FROM arrow_t').a.tolist()"),
                       code("submit({'seen': seen, 'rows': by_region['n'].tolist(), 'files': int(from_files), "
                            "'dataset': int(via_dataset), 'goals': int(goals), 'tiny': tiny})")])
    rlm = RLM(root, ScriptedLM(lambda m: "x"), sandbox=kind)
    result = rlm.run("Rows per region?", sales=sales, names=names, r=rel, goals=con.table("goals"),
                     d=ds.dataset(sales, format="parquet", partitioning="hive"), arrow_t=pa.table({"a": [1, 2]}),
                     keep_session=True)
    try:
        assert result.status == "submitted", result.reason
        assert result.answer == {
            "seen": {"sales": "DuckDBPyRelation", "names": "DataFrame", "r": "DuckDBPyRelation",
                     "goals": "DuckDBPyRelation", "d": "FileSystemDataset",
                     "arrow_t": "Table"},
            "rows": [5000] * 4, "files": 20000, "dataset": 20000, "goals": 60, "tiny": [1, 2]}
        summary = root.requests[0][1]["content"]
        assert "`sql(query)` runs DuckDB SQL over the tables `sales`, `names`, `r`, `goals`, `d`, `arrow_t`" in summary
        if kind == "kernel":
            shipped = result.session.sandbox.bytes_shipped
            assert shipped > 0 and shipped == _data_bytes(result)  # the frame, the Arrow table, the goals copy
    finally:
        result.session.close()


def test_only_file_backed_inputs_means_nothing_is_shipped(kind: str, sales: Path, tmp_path: Path) -> None:
    csv = tmp_path / "extra.csv.gz"
    duckdb.sql(f"COPY (SELECT range AS region, 'r' || range AS label FROM range(4)) TO '{csv}' (HEADER)")
    rel = duckdb.read_parquet(f"{sales}/**/*.parquet", hive_partitioning=True)
    before = _digest(sales)
    root = ScriptedLM([code("n = sql('SELECT count(*) AS n FROM sales JOIN extra USING (region) JOIN r USING (id)')"
                            ".n[0]\nprint(n)\ntry:\n    inputs['sales'].insert([1, 2, 3])\nexcept Exception as e:\n"
                            "    print('refused:', type(e).__name__)"), code("submit(int(n))")])
    result = RLM(root, sandbox=kind).run("How many?", sales=sales, extra=csv, r=rel,
                                         d=ds.dataset(sales, format="parquet", partitioning="hive"),
                                         keep_session=True)
    try:
        assert result.answer == 20000, result.reason
        assert "refused: " in observations(root)[0]
        if kind == "kernel":
            assert result.session.sandbox.bytes_shipped == 0
            assert _data_bytes(result) == 0
    finally:
        result.session.close()
    assert _digest(sales) == before


def test_in_memory_relations_and_datasets_cross_once_as_arrow(kind: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS k, 'v' || range AS v FROM range(1000)")
    root = ScriptedLM([code("print(type(inputs['m']).__name__, type(inputs['d']).__name__)\n"
                            "n = sql('SELECT count(*) AS n FROM m JOIN d USING (k)').n[0]"),
                       code("submit(int(n))")])
    result = RLM(root, sandbox=kind).run("How many?", m=con.table("t"), d=ds.dataset(pa.table({"k": [1, 2, 3]})),
                                         keep_session=True)
    try:
        assert result.answer == 3, result.reason
        assert "DuckDBPyRelation InMemoryDataset" in observations(root)[0]
        summary = root.requests[0][1]["content"]
        assert "a kernel sandbox gets its result once as Arrow IPC" in summary
        assert "a kernel sandbox gets one Arrow IPC copy of it" in summary
        if kind == "kernel":
            assert 0 < result.session.sandbox.bytes_shipped == _data_bytes(result)
    finally:
        result.session.close()
