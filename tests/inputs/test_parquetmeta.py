"""Describing a Parquet dataset of many files: an exact row count and a checked schema from the head of
every footer, whole footers (statistics) from a bounded number of files, and beyond the file cap or
the time budget a row count that is scaled up from a sample and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rlmnb.inputs._tables.parquet as parquetmeta
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb.inputs import bind_inputs, describe
from rlmnb.inputs._tables.parquet import FooterError

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
        real_full, real_head = pq.read_metadata, parquetmeta.read_head

        def full(path: Any, *a: Any, **k: Any) -> Any:
            self.full.append(Path(path).name)
            return real_full(path, *a, **k)

        def head(path: str, like: Any = None) -> Any:
            self.heads.append(Path(path).name)
            return real_head(path, like)

        monkeypatch.setattr(pq, "read_metadata", full)
        monkeypatch.setattr(parquetmeta, "read_head", head)


def test_every_files_footer_head_makes_an_exact_count_and_few_footers_are_parsed_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 30)
    monkeypatch.setattr(parquetmeta, "STATS_FILES", 4)
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
    monkeypatch.setattr(parquetmeta, "STATS_FOOTER_BYTES", 1)
    counts = _Counts(monkeypatch)
    info = describe("d", tmp_path / "d", CFG).info
    assert counts.full == ["part-000.parquet"] and not info.estimated
    assert "statistics (from 1 row group in 1 of 6 files): id 0..999;" in info.detail


def test_beyond_the_file_cap_the_count_is_an_estimate_that_says_from_how_many_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = _dataset(tmp_path / "d", 12)
    monkeypatch.setattr(parquetmeta, "MAX_COUNT_FILES", 5)
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
    monkeypatch.setattr(parquetmeta, "COUNT_SECONDS", 0.0)
    monkeypatch.setattr(parquetmeta, "MIN_COUNT_FILES", 3)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.estimated and "rows estimated from the footers of 3 of the 8 files" in info.detail
    assert abs(info.rows - truth) / truth < 0.02  # type: ignore[operator]
    monkeypatch.setattr(parquetmeta, "MIN_COUNT_FILES", 8)
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
    real = parquetmeta.read_head

    def picky(path: str, like: Any = None) -> Any:
        if path.endswith("part-002.parquet"):
            raise FooterError("written by an unusual writer")
        return real(path, like)

    monkeypatch.setattr(parquetmeta, "read_head", picky)
    info = describe("d", tmp_path / "d", CFG).info
    assert info.rows == truth and not info.estimated
    monkeypatch.setattr(parquetmeta, "read_head", lambda path, like=None: (_ for _ in ()).throw(FooterError("no")))
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

    from rlmnb.inputs._tables import parquet as parquetfooter

    root = tmp_path / "d"
    root.mkdir()
    for i in range(3):  # ~1 MB files: a full read would show
        duckdb.sql(f"COPY (SELECT range AS id, md5(range::VARCHAR) AS h FROM range({i * 40_000}, {(i + 1) * 40_000})) "
                   f"TO '{root / f'part-{i}.parquet'}' (FORMAT parquet)")
    sizes = [p.stat().st_size for p in sorted(root.iterdir())]
    assert min(sizes) > 20 * parquetfooter.TAIL_BYTES
    read: list[int] = []
    real = os.pread
    monkeypatch.setattr(parquetfooter.os, "pread", lambda fd, n, off: read.append(n) or real(fd, n, off))
    assert parquetmeta.parquet_meta("d", [str(p) for p in sorted(root.iterdir())])[0] == 120_000
    assert len(read) <= 6 and sum(read) <= 3 * (parquetfooter.TAIL_BYTES + parquetfooter.HEAD_BYTES)
