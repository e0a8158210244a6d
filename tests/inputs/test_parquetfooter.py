"""The fast footer-head reader: the same row counts and leaf columns as pyarrow's full parse, for files
from every common writer, while reading only the end of the file; anything it cannot read is a
FooterError (never a wrong answer)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlmnb.inputs._tables import parquet as parquetfooter
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
    monkeypatch.setattr(parquetfooter.os, "pread", lambda fd, n, off: reads.append(n) or real(fd, n, off))
    monkeypatch.setattr(parquetfooter, "TAIL_BYTES", 4096)
    monkeypatch.setattr(parquetfooter, "HEAD_BYTES", 1024)
    long = tmp_path / "long.parquet"  # 100 row groups: a footer larger than TAIL_BYTES
    duckdb.sql(f"COPY (SELECT range AS a, range * 2 AS b FROM range(100000)) TO '{long}' "
               f"(FORMAT parquet, ROW_GROUP_SIZE 1000)")
    head = read_head(str(long))
    assert head.footer_bytes > parquetfooter.TAIL_BYTES and head.num_rows == 100_000
    assert reads == [parquetfooter.TAIL_BYTES, parquetfooter.HEAD_BYTES]  # the end, then the footer's head
    wide = tmp_path / "wide.parquet"  # a schema longer than HEAD_BYTES: the whole footer is read once more
    pq.write_table(pa.table({f"column_{i:04d}_{'x' * 40}": [1] for i in range(100)}), wide)
    reads.clear()
    head = read_head(str(wide))
    assert (head.num_rows, head.leaves, head.footer_bytes) == _pyarrow_view(wide)
    assert reads == [parquetfooter.TAIL_BYTES, parquetfooter.HEAD_BYTES, head.footer_bytes]


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
