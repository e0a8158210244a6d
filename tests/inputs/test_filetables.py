"""Tables in files, DuckDB relations and Arrow datasets as inputs: what binding says about them (from
metadata and a bounded sample), what it refuses (one sentence, before any model call), and `sql()`
over every table input. The sandbox side (both sandboxes) is in test_lazy_sandbox.py.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import rlmnb.inputs._tables.filetables as tablemeta
from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb._ground.tokens import count_tokens
from rlmnb._sandbox.local import LazyInputs
from rlmnb.inputs import GlobFiles, bind_inputs, describe
from rlmnb.inputs._tables.duck import SQLEngine
from rlmnb.testing import ScriptedLM

CFG = RLMConfig()


def _sales(path: Path, rows: int = 10_000, *, partitioned: bool = True) -> Path:
    con = duckdb.connect()
    query = (f"SELECT range AS id, range % 4 AS region, 'item ' || (range % 97) AS item, "
             f"CASE WHEN range % 10 = 0 THEN NULL ELSE range * 0.5 END AS amount FROM range({rows})")
    if partitioned:
        con.execute(f"COPY ({query}) TO '{path}' (FORMAT parquet, PARTITION_BY (region), ROW_GROUP_SIZE 1000)")
    else:
        con.execute(f"COPY ({query}) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000)")
    con.close()
    return path


# ---- Parquet ---------------------------------------------------------------------------------------------
def test_a_partitioned_parquet_folder_is_one_table_described_from_its_footers(tmp_path: Path) -> None:
    root = _sales(tmp_path / "sales")
    field = describe("sales", root, CFG)
    info = field.info
    assert info.kind == "file_table" and info.python_type == "duckdb.DuckDBPyRelation"
    assert info.rows == 10_000 and not info.estimated and info.columns == 4
    assert dict(info.dtypes) == {"id": "BIGINT", "item": "VARCHAR", "amount": "DECIMAL(21,1)", "region": "BIGINT"}
    assert "4 Parquet files, Hive partitions: region; rows from Parquet metadata" in info.detail
    assert "files as of " in info.detail and " UTC (newest change)" in info.detail
    assert "id 0..9999" in info.detail and "amount 0.5..4999.5 1,000 nulls" in info.detail
    assert info.preview.splitlines()[0] == "id | item | amount | region"
    assert field.read_paths == (str(root),) and field.plan is not None
    rel = field.load()
    assert type(rel).__name__ == "DuckDBPyRelation"
    assert rel.aggregate("count(*), count(DISTINCT region)").fetchall() == [(10_000, 4)]


def test_describing_reads_the_footer_and_one_row_group_never_the_whole_file(tmp_path: Path) -> None:
    path = _sales(tmp_path / "big.parquet", rows=50_000, partitioned=False)
    meta = pq.ParquetFile(path).metadata
    groups = meta.num_row_groups
    assert groups >= 20
    chunk = meta.row_group(groups // 2).column(0)
    first_late = min(x for x in (chunk.dictionary_page_offset, chunk.data_page_offset) if x)
    footer = path.stat().st_size - meta.serialized_size - 8
    data = bytearray(path.read_bytes())
    data[first_late:footer] = b"\0" * (footer - first_late)  # row groups 25.. unreadable, footer intact
    path.write_bytes(bytes(data))
    info = describe("big", path, CFG).info
    assert info.rows == 50_000 and "id 0..49999" in info.detail  # from the footer's statistics
    with pytest.raises(duckdb.Error):
        describe("big", path, CFG).load().aggregate("sum(amount)").fetchall()  # a full scan does fail


def test_the_summary_costs_the_same_tokens_for_a_thousand_or_a_million_rows(tmp_path: Path) -> None:
    small = describe("t", _sales(tmp_path / "small", rows=1_000), CFG).info
    large = describe("t", _sales(tmp_path / "large", rows=1_000_000), CFG).info
    cfg = RLMConfig(summary_max_tokens=2_000)
    a, b = (count_tokens(bind_inputs({"t": p}, cfg)[1].text) for p in (tmp_path / "small", tmp_path / "large"))
    assert large.rows == 1_000_000 and small.rows == 1_000
    assert b <= 1.1 * a, (a, b)  # only the statistics' numbers grow a few digits


# ---- CSV, JSON Lines, Arrow IPC, globs ----------------------------------------------------------------------
def test_csv_tsv_jsonl_and_feather_files_are_tables(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        frame.to_csv(f, index=False)
    frame.to_csv(tmp_path / "t.tsv", index=False, sep="\t")
    frame.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    duckdb.sql(f"COPY (SELECT * FROM range(3) t(a)) TO '{tmp_path / 'z.ndjson.zst'}' (FORMAT json, COMPRESSION zstd)")
    feather.write_feather(pa.Table.from_pandas(frame), tmp_path / "t.feather")
    for fname, label in (("t.csv", "CSV"), ("t.csv.gz", "CSV (gzip)"), ("t.tsv", "TSV"), ("t.jsonl", "JSON Lines"),
                         ("z.ndjson.zst", "JSON Lines (zstd)"), ("t.feather", "Arrow IPC")):
        field = describe("t", tmp_path / fname, CFG)
        assert field.info.kind == "file_table", fname
        assert f"1 {label} file;" in field.info.detail, field.info.detail
        assert field.info.rows == 3 and not field.info.estimated, fname
        assert field.load().aggregate("count(*)").fetchall() == [(3,)], fname


def test_a_big_csv_gets_an_estimated_row_count_marked_as_one(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    duckdb.sql(f"COPY (SELECT range AS id, 'row number ' || range AS label FROM range(300000)) TO '{path}' (HEADER)")
    assert path.stat().st_size > tablemeta.COUNT_BELOW_BYTES
    info = describe("big", path, CFG).info
    assert info.estimated and abs(info.rows - 300_000) / 300_000 < 0.1  # type: ignore[operator]
    assert "estimated from the bytes per row" in info.detail
    text = bind_inputs({"big": path}, CFG)[1].text
    assert "rows (estimated) x 2 columns" in text


def test_a_glob_of_table_files_is_one_table_and_a_mixed_folder_stays_a_mapping(tmp_path: Path) -> None:
    for month in (1, 2, 3):
        pd.DataFrame({"m": [month] * 2, "v": [1.0, 2.0]}).to_parquet(tmp_path / f"2025-0{month}.parquet")
    (tmp_path / "notes.txt").write_text("not a table", encoding="utf-8")
    matches = sorted(str(p) for p in tmp_path.glob("2025-0[12].parquet"))
    globbed = describe("s", GlobFiles(str(tmp_path / "2025-0[12].parquet"), matches), CFG)
    assert globbed.info.kind == "file_table" and globbed.info.rows == 4
    assert globbed.read_paths == tuple(matches)
    as_path = describe("s", tmp_path / "2025-*.parquet", CFG)  # a Path holding a glob works too
    assert as_path.info.kind == "file_table" and as_path.info.rows == 6
    assert describe("d", tmp_path, CFG).info.kind == "directory"


# ---- relations and datasets --------------------------------------------------------------------------------------
def test_a_relation_over_files_is_reopenable_and_one_over_memory_is_not(tmp_path: Path) -> None:
    root = _sales(tmp_path / "sales")
    over_files = duckdb.read_parquet(f"{root}/**/*.parquet", hive_partitioning=True).filter("amount > 100")
    expected = over_files.aggregate("count(*)").fetchall()[0][0]
    field = describe("r", over_files, CFG)
    assert field.info.kind == "relation" and field.plan is not None
    assert field.info.rows is None  # filtered: only a guess, never a count at bind time
    assert "rows unknown until counted (DuckDB's planner guesses ~" in field.info.detail
    assert "reopened from its SQL" in field.info.detail
    assert field.load().aggregate("count(*)").fetchall() == [(expected,)]
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS k FROM range(5)")
    in_memory = describe("m", con.table("t"), CFG)
    assert in_memory.plan is None and in_memory.info.rows == 5 and not in_memory.info.estimated  # the table's count
    assert "gets its result once as Arrow IPC" in in_memory.info.detail
    assert "5 rows x 1 column" in bind_inputs({"m": con.table("t")}, CFG)[1].text


def test_arrow_datasets_stay_lazy(tmp_path: Path) -> None:
    root = _sales(tmp_path / "sales")
    dataset = ds.dataset(root, format="parquet", partitioning="hive")
    field = describe("d", dataset, CFG)
    assert field.info.kind == "dataset" and field.info.rows == 10_000 and field.plan is not None
    assert field.load() is dataset
    memory = describe("m", ds.dataset(pa.table({"a": [1, 2]})), CFG)
    assert memory.plan is None and "one Arrow IPC copy" in memory.info.detail


# ---- sql() ---------------------------------------------------------------------------------------------------------
def _engine(values: dict[str, Any]) -> SQLEngine:
    fields, _ = bind_inputs(values, CFG)
    return SQLEngine({"inputs": LazyInputs(fields)})


def test_sql_joins_pandas_arrow_files_relations_and_datasets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _sales(tmp_path / "sales")
    regions = pd.DataFrame({"region": [0, 1, 2, 3], "name": ["north", "east", "south", "west"]})
    con = duckdb.connect()
    con.execute("CREATE TABLE goals AS SELECT range AS region, 100 * range AS goal FROM range(4)")
    sql = _engine({"sales": root, "regions": regions, "codes": pa.table({"region": [0, 1, 2, 3]}),
                   "goals": con.table("goals"), "ds": ds.dataset(root, format="parquet", partitioning="hive")})
    out = sql("SELECT name, count(*) AS n, max(goal) AS goal FROM sales JOIN regions USING (region) "
              "JOIN codes USING (region) JOIN goals USING (region) GROUP BY name ORDER BY name")
    assert isinstance(out, pd.DataFrame)
    assert out.to_dict("list") == {"name": ["east", "north", "south", "west"], "n": [2500] * 4,
                                   "goal": [100, 0, 200, 300]}
    assert sql("SELECT count(*) AS n FROM ds").iloc[0, 0] == 10_000
    cut = sql("SELECT * FROM sales", max_rows=7)
    assert len(cut) == 7 and cut.attrs["sql_total_rows"] == 10_000
    assert "the result has 10,000 rows; returned the first 7" in capsys.readouterr().out
    with pytest.raises(ValueError, match="max_rows"):
        sql("SELECT 1", max_rows=-1)
    with pytest.raises(duckdb.CatalogException):
        sql("SELECT * FROM nowhere")


def test_a_file_changed_after_binding_is_read_as_it_is_then(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"v": [1, 2]}).to_parquet(path)
    sql = _engine({"t": path})
    pd.DataFrame({"v": [1, 2, 3]}).to_parquet(path)
    assert sql("SELECT sum(v) AS s FROM t").iloc[0, 0] == 6


# ---- bad input: one sentence, before any model call ----------------------------------------------------------------
def _refused(value: Any, tmp_path: Path) -> str:
    root = ScriptedLM(["```python\nsubmit(1)\n```"])
    with pytest.raises(InputError) as err:
        RLM(root, sandbox="local").run("q", data=value)
    assert root.requests == []
    message = str(err.value)
    assert message.startswith("Input 'data': ") and message.count("\n") == 0
    return message


def test_bad_table_files_fail_with_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")
    assert "cannot read corrupt.parquet as Parquet" in _refused(tmp_path / "corrupt.parquet", tmp_path)
    good = _sales(tmp_path / "cut.parquet", rows=2_000, partitioned=False)
    good.write_bytes(good.read_bytes()[:-100])
    assert "cannot read cut.parquet as Parquet" in _refused(good, tmp_path)
    (tmp_path / "binary.csv").write_bytes(b"a,b\n\x00\x01\x02\xff\xfe\n")
    assert "binary.csv is not text" in _refused(tmp_path / "binary.csv", tmp_path)
    (tmp_path / "z.csv.bz2").write_bytes(b"BZh91AY")
    assert "compressed with bz2, which cannot be read in place" in _refused(tmp_path / "z.csv.bz2", tmp_path)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pd.DataFrame({"a": [1], "b": ["x"]}).to_parquet(mixed / "one.parquet")
    pd.DataFrame({"a": [1], "b": [2.5]}).to_parquet(mixed / "two.parquet")
    message = _refused(mixed, tmp_path)
    assert "one.parquet and two.parquet do not share a schema (column 'b' is large_string in one and double" in message
    (tmp_path / "locked.parquet").write_bytes((tmp_path / "mixed" / "one.parquet").read_bytes())
    real_access = os.access
    monkeypatch.setattr(tablemeta.os, "access", lambda p, mode: not str(p).endswith("locked.parquet")
                        and real_access(p, mode))
    assert "cannot read " in _refused(tmp_path / "locked.parquet", tmp_path)


def test_an_unparseable_csv_fails_with_one_sentence(tmp_path: Path) -> None:
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b,c\n1,2,3\n4,5,6,7,8\n9\n", encoding="utf-8")
    assert "ragged.csv cannot be parsed as CSV (its rows do not split" in _refused(ragged, tmp_path)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    assert "latin.csv is not UTF-8 text" in _refused(latin, tmp_path)
