"""Reading Parquet footers: the head of one footer (rows and schema, from every common writer, reading only
the end of the file) and a dataset of many files (an exact row count and a checked schema from every
footer's head, statistics from a bounded number of whole footers, and beyond the file cap or the time
budget a row count scaled up from a sample that says so)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb.inputs import bind_inputs, describe
from rlmnb.inputs._tables import parquet
from rlmnb.inputs._tables.parquet import FooterError, FooterHead, read_head


def _pyarrow_view(path: Path) -> tuple[int, tuple[tuple[str, str], ...], int]:
    meta = pq.read_metadata(path)
    schema = meta.schema
    leaves = tuple((schema.column(i).path, str(schema.column(i).physical_type)) for i in range(len(schema)))
    return meta.num_rows, leaves, meta.serialized_size


NESTED = pa.table({
    "a": [1, None, 3], "s": ["x", "y", None], "flag": [True, False, None],
    "st": [{"x": 1, "y": "q"}, None, {"x": 2, "y": "r"}], "l": [[1, 2], [], None],
    "m": pa.array([[("k", 1)], [], None], type=pa.map_(pa.string(), pa.int64())),
    "dec": pa.array([1, 2, 3], type=pa.decimal128(10, 2)),
    "ts": pa.array([1, 2, 3], type=pa.timestamp("us", tz="UTC")),
    "fixed": pa.array([b"ab", b"cd", b"ef"], type=pa.binary(2)),
})


@pytest.mark.parametrize("options", [{}, {"compression": "zstd"}, {"version": "1.0"}, {"row_group_size": 1},
                                     {"write_statistics": False}, {"use_dictionary": False}],
                         ids=["default", "zstd", "v1", "one-row-groups", "no-stats", "plain"])
def test_rows_and_leaf_columns_agree_with_pyarrow_for_nested_pyarrow_files(tmp_path: Path,
                                                                           options: dict[str, Any]) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(NESTED, path, **options)
    head = read_head(str(path))
    assert (head.num_rows, head.leaves, head.footer_bytes) == _pyarrow_view(path)
    assert ("st.x", "INT64") in head.leaves and ("l.list.element", "INT64") in head.leaves


def test_files_from_duckdb_pandas_and_polars_agree_with_pyarrow(tmp_path: Path) -> None:
    duckdb.sql(f"COPY (SELECT range AS a, range::VARCHAR AS b, DATE '2025-01-01' + range::INTEGER AS d "
               f"FROM range(50000)) TO '{tmp_path / 'duck.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 1000)")
    pd.DataFrame({"a": range(10), "b": [str(i) for i in range(10)]}).to_parquet(tmp_path / "pandas.parquet")
    paths = [tmp_path / "duck.parquet", tmp_path / "pandas.parquet"]
    polars = pytest.importorskip("polars")
    polars.DataFrame({"a": [1, 2], "b": ["x", "y"]}).write_parquet(tmp_path / "polars.parquet")
    paths.append(tmp_path / "polars.parquet")
    for path in paths:
        head = read_head(str(path))
        assert (head.num_rows, head.leaves, head.footer_bytes) == _pyarrow_view(path), path.name
    assert read_head(str(paths[0])).num_rows == 50_000


def test_a_large_footer_is_read_in_two_reads_and_a_wide_schema_in_three(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    real = os.pread
    monkeypatch.setattr(parquet.os, "pread", lambda fd, n, off: reads.append(n) or real(fd, n, off))
    monkeypatch.setattr(parquet, "TAIL_BYTES", 4096)
    monkeypatch.setattr(parquet, "HEAD_BYTES", 1024)
    long = tmp_path / "long.parquet"  # 100 row groups: a footer larger than TAIL_BYTES
    duckdb.sql(f"COPY (SELECT range AS a, range * 2 AS b FROM range(100000)) TO '{long}' "
               f"(FORMAT parquet, ROW_GROUP_SIZE 1000)")
    head = read_head(str(long))
    assert head.footer_bytes > parquet.TAIL_BYTES and head.num_rows == 100_000
    assert reads == [parquet.TAIL_BYTES, parquet.HEAD_BYTES]  # the end, then the footer's head
    wide = tmp_path / "wide.parquet"  # a schema longer than HEAD_BYTES: the whole footer is read once more
    pq.write_table(pa.table({f"column_{i:04d}_{'x' * 40}": [1] for i in range(100)}), wide)
    reads.clear()
    head = read_head(str(wide))
    assert (head.num_rows, head.leaves, head.footer_bytes) == _pyarrow_view(wide)
    assert reads == [parquet.TAIL_BYTES, parquet.HEAD_BYTES, head.footer_bytes]


def test_equal_schemas_have_equal_keys_and_different_ones_do_not(tmp_path: Path) -> None:
    for name, table in (("a", pa.table({"x": [1], "y": ["u"]})), ("b", pa.table({"x": [2, 3], "y": ["v", "w"]})),
                        ("c", pa.table({"x": [1], "y": [1.5]})), ("d", pa.table({"y": ["u"], "x": [1]}))):
        pq.write_table(table, tmp_path / f"{name}.parquet")
    a, b, c, d = (read_head(str(tmp_path / f"{n}.parquet")) for n in "abcd")
    assert a.schema == b.schema and a.num_rows == 1 and b.num_rows == 2
    assert c.schema != a.schema and d.schema != a.schema


def test_anything_but_a_plain_footer_is_a_footer_error(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"x": list(range(100))}), good)
    data = good.read_bytes()
    start = len(data) - 8 - pq.read_metadata(good).serialized_size
    cases = {"not.parquet": b"PAR1 this is not parquet", "tiny.parquet": b"PAR1",
             "cut.parquet": data[: len(data) // 2],  # truncated: no magic at the end
             "long.parquet": data[:4] + (10**6).to_bytes(4, "little") + b"PAR1",  # a footer longer than the file
             "garbage.parquet": data[:start] + b"\xff" * 40 + data[start + 40:],  # the footer's head scrambled
             "encrypted.parquet": data[:-4] + b"PARE"}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(FooterError):
            read_head(str(tmp_path / name))
    with pytest.raises(FooterError):
        read_head(str(tmp_path / "missing.parquet"))


def test_a_head_round_trips_through_its_dict(tmp_path: Path) -> None:
    pq.write_table(NESTED, tmp_path / "t.parquet")
    head = read_head(str(tmp_path / "t.parquet"))
    assert FooterHead.from_dict(head.to_dict()) == head


def test_a_like_head_is_reused_only_when_the_schema_bytes_are_the_same(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [1], "y": ["u"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": [2, 3], "y": ["v", "w"]}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"x": [1], "z": [1.5]}), tmp_path / "c.parquet")
    a = read_head(str(tmp_path / "a.parquet"))
    b = read_head(str(tmp_path / "b.parquet"), like=a)
    c = read_head(str(tmp_path / "c.parquet"), like=a)
    assert b == read_head(str(tmp_path / "b.parquet")) and b.leaves is a.leaves  # reused, not parsed again
    assert c == read_head(str(tmp_path / "c.parquet")) and c.leaves == (("x", "INT64"), ("z", "DOUBLE"))


CFG = RLMConfig()


def _dataset(root: Path, files: int, rows: int = 1_000) -> int:
    """`files` Parquet files of `rows` + i rows each (so a count from a sample differs from the truth)."""
    root.mkdir()
    con = duckdb.connect()
    for i in range(files):
        con.execute(f"COPY (SELECT range AS id, range % 7 AS k, 'v' || range AS label FROM range({i * 10_000}, "
                    f"{i * 10_000 + rows + i})) TO '{root / f'part-{i:03d}.parquet'}' (FORMAT parquet)")
    con.close()
    return files * rows + files * (files - 1) // 2


class _Counts:
    """Counts the footers parsed whole (pyarrow) and the heads read, by file name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full: list[str] = []
        self.heads: list[str] = []
        real_full, real_head = pq.read_metadata, parquet.read_head

        def full(path: Any, *a: Any, **k: Any) -> Any:
            self.full.append(Path(path).name)
            return real_full(path, *a, **k)

        def head(path: str, like: Any = None) -> Any:
            self.heads.append(Path(path).name)
            return real_head(path, like)

        monkeypatch.setattr(pq, "read_metadata", full)
        monkeypatch.setattr(parquet, "read_head", head)


def test_every_files_footer_head_makes_an_exact_count_and_few_footers_are_parsed_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 30)
    monkeypatch.setattr(parquet, "STATS_FILES", 4)
    counts = _Counts(monkeypatch)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.rows == truth and not info.estimated
    assert "30 Parquet files; rows from Parquet metadata" in info.detail
    assert sorted(set(counts.heads)) == [f"part-{i:03d}.parquet" for i in range(30)]
    assert len(counts.full) == 4 and "part-000.parquet" in counts.full
    assert "part-029.parquet" in counts.full  # the first and the last file's statistics
    assert "statistics (from 4 row groups in 4 of 30 files): id 0..291028;" in info.detail  # first and last files


def test_statistics_stop_at_the_footer_byte_budget_but_always_have_the_first_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dataset(tmp_path / "d", 6)
    monkeypatch.setattr(parquet, "STATS_FOOTER_BYTES", 1)
    counts = _Counts(monkeypatch)
    info = describe("d", tmp_path / "d", CFG).info
    assert counts.full == ["part-000.parquet"] and not info.estimated
    assert "statistics (from 1 row group in 1 of 6 files): id 0..999;" in info.detail


def test_beyond_the_file_cap_the_count_is_an_estimate_that_says_from_how_many_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 12)
    monkeypatch.setattr(parquet, "MAX_COUNT_FILES", 5)
    counts = _Counts(monkeypatch)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.estimated and info.rows != truth and abs(info.rows - truth) / truth < 0.02  # type: ignore[operator]
    assert len(set(counts.heads) - set(counts.full)) <= 5 and "part-000.parquet" in counts.heads
    assert "rows estimated from the footers of 5 of the 12 files (scaled by their share of the bytes)" in info.detail
    assert describe("d", tmp_path / "d", CFG).info.rows == info.rows  # the same sample every time
    text = bind_inputs({"d": tmp_path / "d"}, CFG)[1].text
    assert "rows (estimated) x 3 columns" in text


def test_when_the_time_budget_runs_out_the_files_read_so_far_make_the_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 8)
    monkeypatch.setattr(parquet, "COUNT_SECONDS", 0.0)
    monkeypatch.setattr(parquet, "MIN_COUNT_FILES", 3)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.estimated and "rows estimated from the footers of 3 of the 8 files" in info.detail
    assert abs(info.rows - truth) / truth < 0.02  # type: ignore[operator]
    monkeypatch.setattr(parquet, "MIN_COUNT_FILES", 8)
    assert describe("d", tmp_path / "d", CFG).info.rows == truth


def test_a_schema_clash_in_any_file_is_found_by_its_footer_head(tmp_path: Path) -> None:
    truth = _dataset(tmp_path / "d", 10)
    assert describe("d", tmp_path / "d", CFG).info.rows == truth
    duckdb.sql(f"COPY (SELECT 1::BIGINT AS id, 2::BIGINT AS k, 3.5 AS label) TO "
               f"'{tmp_path / 'd' / 'part-006.parquet'}' (FORMAT parquet)")
    with pytest.raises(InputError, match=r"part-000.parquet and part-006.parquet do not share a schema \(column "
                                         r"'label' is string in one and decimal128\(2, 1\) in the other\)"):
        describe("d", tmp_path / "d", CFG)


def test_schemas_written_differently_but_equal_are_one_table(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    polars = pytest.importorskip("polars")
    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), root / "one.parquet")  # root element "schema"
    polars.DataFrame({"a": [3], "b": ["z"]}).write_parquet(root / "two.parquet")     # root element "root"
    counts = _Counts(monkeypatch)
    info = describe("d", root, CFG).info
    assert info.rows == 3 and not info.estimated
    assert counts.full.count("two.parquet") == 2  # compared in full once (and read for statistics)
    assert sorted(describe("d", root, CFG).load().fetchall()) == [(1, "x"), (2, "y"), (3, "z")]


def test_a_file_the_head_reader_cannot_read_is_read_by_pyarrow_instead(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 4)
    real = parquet.read_head

    def picky(path: str, like: Any = None) -> Any:
        if path.endswith("part-002.parquet"):
            raise FooterError("written by an unusual writer")
        return real(path, like)

    monkeypatch.setattr(parquet, "read_head", picky)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.rows == truth and not info.estimated
    monkeypatch.setattr(parquet, "read_head", lambda path, like=None: (_ for _ in ()).throw(FooterError("no")))
    assert describe("d", tmp_path / "d", CFG).info.rows == truth  # every file through pyarrow: still exact


def test_a_corrupt_file_among_many_names_the_file(tmp_path: Path) -> None:
    _dataset(tmp_path / "d", 5)
    (tmp_path / "d" / "part-003.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"cannot read part-003.parquet as Parquet \(.*\); fix or remove the file"):
        describe("d", tmp_path / "d", CFG)


def test_a_dataset_is_sampled_from_its_first_file_with_hive_key_types_from_every_path(tmp_path: Path) -> None:
    root = tmp_path / "d"
    for code, x in (("007", 1), ("abc", 2)):  # "007" alone would be read as the number 7
        (root / f"code={code}").mkdir(parents=True)
        duckdb.sql(f"COPY (SELECT {x} AS x) TO '{root / f'code={code}' / 'a.parquet'}' (FORMAT parquet)")
    field = describe("d", root, CFG)
    assert dict(field.info.dtypes) == {"x": "INTEGER", "code": "VARCHAR"}
    assert field.info.preview.splitlines()[:2] == ["x | code", "1 | 007"]
    assert [str(t) for t in field.load().types] == ["INTEGER", "VARCHAR"]
    plain = tmp_path / "plain"
    _dataset(plain, 3)
    info = describe("p", plain, CFG).info
    assert dict(info.dtypes) == {"id": "BIGINT", "k": "BIGINT", "label": "VARCHAR"}
    assert info.preview.splitlines()[1] == "0 | 0 | v0"


def test_more_partition_folders_than_a_folder_walk_looks_at_are_still_one_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rlmnb.inputs._families.files as files

    root = tmp_path / "d"
    duckdb.sql(f"COPY (SELECT range AS id, range % 12 AS part FROM range(120)) TO '{root}' "
               f"(FORMAT parquet, PARTITION_BY (part))")
    monkeypatch.setattr(files, "MAX_DIR_ENTRIES", 10)  # the first 10 entries are all folders
    info = describe("d", root, CFG).info
    assert info.kind == "file_table" and info.rows == 120 and not info.estimated
    assert "12 Parquet files, Hive partitions: part" in info.detail


def test_a_small_dataset_has_statistics_from_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dataset(tmp_path / "d", 12)
    counts = _Counts(monkeypatch)
    info = describe("d", tmp_path / "d", CFG).info
    assert sorted(counts.full) == [f"part-{i:03d}.parquet" for i in range(12)]  # small footers: all within budget
    assert "\n  statistics: id 0..111010; k 0..6;" in info.detail  # no scope: every row group of every file


def test_counting_rows_reads_only_the_ends_of_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from rlmnb.inputs._tables import parquet

    root = tmp_path / "d"
    root.mkdir()
    for i in range(3):  # ~1 MB files: a full read would show
        duckdb.sql(f"COPY (SELECT range AS id, md5(range::VARCHAR) AS h FROM range({i * 40_000}, {(i + 1) * 40_000})) "
                   f"TO '{root / f'part-{i}.parquet'}' (FORMAT parquet)")
    sizes = [p.stat().st_size for p in sorted(root.iterdir())]
    assert min(sizes) > 20 * parquet.TAIL_BYTES
    read: list[int] = []
    real = os.pread
    monkeypatch.setattr(parquet.os, "pread", lambda fd, n, off: read.append(n) or real(fd, n, off))
    assert parquet.parquet_meta("d", [str(p) for p in sorted(root.iterdir())])[0] == 120_000
    assert len(read) <= 6 and sum(read) <= 3 * (parquet.TAIL_BYTES + parquet.HEAD_BYTES)


__all__ = []
