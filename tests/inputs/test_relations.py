"""What binding says about DuckDB relations and Arrow datasets without running them: rows from the plan
or the footers (exact, estimated or unknown, never counted by a scan), a bounded sample, and whether
the kernel sandbox can reopen them (and why not). The sandboxes' side is in test_relations_sandbox.py.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import rlmnb.inputs._families.datasets as datasets
from rlmnb._ground.config import RLMConfig
from rlmnb.inputs import describe
from rlmnb.inputs._families.relations import FileDatabases, PlanFacts, facts_of, plan_facts, probe

CFG = RLMConfig()
frame_in_this_module = pd.DataFrame({"k": [1, 2, 3]})


def _parquet_folder(root: Path, files: int, rows: int) -> Path:
    root.mkdir()
    for i in range(files):
        duckdb.sql(f"COPY (SELECT range + {i * rows} AS id FROM range({rows})) TO '{root}/p{i}.parquet'")
    return root


def test_rows_come_from_the_plan_exact_for_a_table_estimated_for_parquet_unknown_after_a_filter(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS k FROM range(12345)")
    table = plan_facts(con.table("t").project("k"))
    assert table is not None and (table.rows, table.estimated, table.tables) == (12345, False, ("memory.main.t",))
    folder = _parquet_folder(tmp_path / "p", files=3, rows=1000)
    files = plan_facts(duckdb.read_parquet(f"{folder}/*.parquet"))
    assert files is not None and files.rows == 3000 and files.estimated and not files.tables and not files.foreign
    filtered = plan_facts(con.table("t").filter("k > 5"))
    assert filtered is not None and filtered.rows is None and filtered.guess is not None
    field = describe("f", con.table("t").filter("k > 5"), CFG)
    assert field.info.rows is None and "rows unknown until counted (DuckDB's planner guesses ~" in field.info.detail


def test_one_parquet_file_is_counted_exactly_and_several_are_estimated_from_the_first(tmp_path: Path) -> None:
    one = _parquet_folder(tmp_path / "one", files=1, rows=1234)
    info = describe("p", duckdb.read_parquet(f"{one}/p0.parquet"), CFG).info
    assert info.rows == 1234 and not info.estimated
    uneven = tmp_path / "uneven"
    uneven.mkdir()
    for i, rows in enumerate((1000, 10)):
        duckdb.sql(f"COPY (SELECT range AS id FROM range({rows})) TO '{uneven}/p{i}.parquet'")
    info = describe("p", duckdb.read_parquet(f"{uneven}/*.parquet"), CFG).info
    assert info.estimated and info.rows == 2000  # the first footer x 2 files, marked; never a scan


def test_a_query_that_must_consume_millions_of_rows_first_gets_no_sample() -> None:
    grouped = duckdb.sql("SELECT k % 7 AS g, count(*) AS n FROM range(5000000) t(k) GROUP BY 1")
    facts = plan_facts(grouped)
    assert facts is not None and facts.blocked is not None and facts.blocked >= 5_000_000
    field = describe("g", grouped, CFG)
    assert "no sample (its first rows cost more than a glance to find)" in field.info.detail
    assert field.info.rows is None and field.info.columns == 2
    streaming = plan_facts(duckdb.sql("SELECT k FROM range(5000000) t(k) WHERE k % 3 = 0"))
    assert streaming is not None and streaming.blocked is None  # LIMIT stops early: sampled
    needle = describe("n", duckdb.sql("SELECT k FROM range(10000000000) t(k) WHERE k < 0"), CFG)  # 10^10 rows
    assert "no sample" in needle.info.detail  # its first row would need a full scan: given up
    join = facts_of({"name": "HASH_JOIN", "children": [
        {"name": "SEQ_SCAN", "extra_info": {"Table": "m.main.big", "Estimated Cardinality": "9000000"}},
        {"name": "SEQ_SCAN", "extra_info": {"Table": "m.main.dim", "Estimated Cardinality": "40"}}]})
    assert join.blocked == 40 and join.scanned == 9_000_000  # only the build side is read whole


def test_a_python_object_found_by_name_is_never_taken_for_a_portable_query() -> None:
    rel = duckdb.sql("SELECT k FROM frame_in_this_module")  # DuckDB's replacement scan finds the module global
    field = describe("r", rel, CFG)
    assert field.plan is None and "gets its result once as Arrow IPC" in field.info.detail
    facts = plan_facts(rel)
    assert facts is not None and facts.foreign == ("PANDAS_SCAN",)


def _database(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS k FROM range(100)")
    con.close()
    return path


def test_what_keeps_a_database_file_relation_from_being_reopened(tmp_path: Path) -> None:
    path = _database(tmp_path / "db.duckdb")
    con = duckdb.connect()
    con.execute(f"ATTACH '{path}' AS db (READ_ONLY)")
    ok = probe(con.sql("SELECT * FROM db.t"), plan_facts(con.sql("SELECT * FROM db.t")))
    assert ok is not None and ok.plan is not None and ok.plan["attach"] == [["db", str(path)]]
    assert ok.plan["use"] == ["memory", "main"] and str(path) in ok.read_paths
    con.execute("CREATE TEMP TABLE local_only AS SELECT 1 AS k")
    mixed = con.sql("SELECT * FROM db.t JOIN local_only USING (k)")
    found = probe(mixed, plan_facts(mixed))
    assert found is not None and found.plan is None
    assert found.reason == 'it reads table "temp".main.local_only, which exists only in this Python process'
    con.execute("CREATE TEMP MACRO twice(a) AS a * 2")
    called = con.sql("SELECT twice(k) AS k2 FROM db.t")
    found = probe(called, plan_facts(called))
    assert found is not None and found.plan is None
    assert found.reason == "it calls twice(), which exists only in this Python process"
    asked = con.sql("SELECT * FROM db.t WHERE k > ?", params=[5])
    found = probe(asked, plan_facts(asked))
    assert found is not None and found.plan is None and "parameters" in found.reason
    con.execute("CREATE VIEW shortcut AS SELECT * FROM db.t")
    viewed = con.sql("SELECT * FROM shortcut")
    found = probe(viewed, plan_facts(viewed))
    assert found is not None and found.plan is None and "holds a view shortcut" in found.reason
    con.close()
    writer = duckdb.connect(str(path))
    found = probe(writer.table("t"), plan_facts(writer.table("t")))
    assert found is not None and found.plan is None and "open for writing" in found.reason
    assert "gets its result once as Arrow IPC: your connection has db.duckdb open for writing" in \
        describe("t", writer.table("t"), CFG).info.detail
    writer.close()
    assert FileDatabases(None, "x").reason == "x"


def test_a_database_with_a_keyword_for_a_name_is_still_its_own(tmp_path: Path) -> None:
    path = _database(tmp_path / "select.duckdb")
    con = duckdb.connect(str(path), read_only=True)
    rel = con.table("t")
    found = probe(rel, plan_facts(rel))
    assert found is not None and found.plan is not None and found.plan["attach"] == [["select", str(path)]]
    con.close()


def test_plan_facts_round_trip() -> None:
    facts = PlanFacts(10, True, 12, 100, ("a.b.c",), ("PANDAS_SCAN",), 7)
    assert PlanFacts.from_dict(facts.to_dict()) == facts


def test_dataset_rows_beyond_a_few_footers_are_extrapolated_and_marked(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _parquet_folder(tmp_path / "p", files=5, rows=1000)
    assert describe("d", ds.dataset(folder, format="parquet"), CFG).info.rows == 5000
    monkeypatch.setattr(datasets, "COUNT_FILES", 2)
    info = describe("d", ds.dataset(folder, format="parquet"), CFG).info
    assert info.estimated and abs((info.rows or 0) - 5000) < 500  # by file size


def test_a_filtered_dataset_samples_through_its_filter_and_does_not_count(tmp_path: Path) -> None:
    folder = _parquet_folder(tmp_path / "p", files=2, rows=1000)
    field = describe("d", ds.dataset(folder, format="parquet").filter(pc.field("id") >= 1500), CFG)
    assert field.info.rows is None and field.plan is not None
    assert "1500" in field.info.preview and "\n    0" not in field.info.preview
    union = describe("u", ds.dataset([ds.dataset(folder, format="parquet"), ds.dataset(pa.table({"id": [1]}))]), CFG)
    assert union.plan is None and "one Arrow IPC copy" in union.info.detail  # a part lives in memory


def test_the_kernel_side_attach_says_what_went_wrong(tmp_path: Path) -> None:
    from rlmnb._ground.errors import InputError
    from rlmnb.inputs._families.relations import open_attached
    from rlmnb.inputs._tables import duck

    first, second = _database(tmp_path / "a.duckdb"), _database(tmp_path / "b.duckdb")
    plan = {"sql": "SELECT * FROM t", "attach": [["same", str(first)]], "use": ["same", "main"]}
    try:
        assert open_attached(plan).sql("SELECT count(*) FROM t").fetchall() == [(100,)]
        assert open_attached(plan).sql("SELECT count(*) FROM t").fetchall() == [(100,)]  # attached once, reused
        with pytest.raises(InputError, match="another input's database already uses that name"):
            open_attached({**plan, "attach": [["same", str(second)]]})
    finally:
        duck.cursor().execute("DETACH DATABASE IF EXISTS same")
    writer = duckdb.connect(str(second))  # holds the file: no other instance may open it
    with pytest.raises(InputError, match=r"b\.duckdb cannot be opened read-only here .*close other connections"):
        open_attached({**plan, "attach": [["other", str(second)]], "use": ["other", "main"]})
    writer.close()


def test_a_dataset_over_another_filesystem_is_copied_once(tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    folder = _parquet_folder(tmp_path / "p", files=2, rows=10)
    subtree = pafs.SubTreeFileSystem(str(folder), pafs.LocalFileSystem())
    field = describe("d", ds.dataset("", filesystem=subtree, format="parquet"), CFG)
    assert field.plan is None and "one Arrow IPC copy" in field.info.detail and "rows unknown" in field.info.detail
    assert field.info.preview.count("\n") >= 3  # a sample all the same, read through its filesystem
