"""Describing a table in files from metadata and a bounded sample: never a full scan.

Parquet: exact rows, schemas and per-column statistics from the footers (see parquetmeta.py). Arrow IPC: rows and schema from the file's batch index. CSV / JSON Lines: schema from
DuckDB's sniffer, rows estimated from the bytes per row of the first megabyte (marked as an estimate).
Every kind: a few rows read with `LIMIT`, which stops after the first row group or chunk.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._brief import SAMPLE_ROWS, _clip_end
from rlmnb.inputs._disk import SNIFF_BYTES, _sniff
from rlmnb.inputs._records import Field
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.lazytable import lazy_table_info
from rlmnb.inputs._tables.parquetmeta import parquet_meta, spread
from rlmnb.inputs._tables.tablefiles import TableFiles, file_format, open_relation, reader_sql

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

MAX_META_FILES = 1024        # Arrow IPC files whose batch index is read (beyond: rows estimated)
MAX_SNIFF_FILES = 8          # CSV / JSON files whose columns are sniffed to check they agree
ROW_SAMPLE_BYTES = 1 << 20   # bytes of a text table read to estimate its bytes per row
COUNT_BELOW_BYTES = 4 << 20  # text tables this small are counted exactly
PYTHON_TYPE = "duckdb.DuckDBPyRelation"


def describe_table(name: str, tf: TableFiles, config: RLMConfig, source: Any) -> Field:
    """A `file_table` Field: a DuckDB relation over the files, described without scanning them."""
    sizes, newest = _stat_files(name, tf)
    total = sum(sizes)
    cur = duck.cursor()
    where = os.path.basename(tf.root.rstrip("/")) or tf.root
    rows: int | None
    try:
        if tf.format == "parquet":
            rows, estimated, how, stats, _ = parquet_meta(name, tf.files, sizes)
        elif tf.format == "ipc":
            (rows, estimated, how), stats = _ipc_meta(name, tf), ""
        else:
            (rows, estimated, how), stats = _text_meta(name, tf, cur, total), ""
        columns, types, sample = _shape(tf, cur)
    except InputError:
        raise
    except Exception as exc:
        if not duck.is_error(exc) and type(exc).__module__.split(".")[0] != "pyarrow":
            raise
        raise InputError(f"Input {name!r}: cannot read {where} as {tf.label} ({_clip_end(duck.message(exc), 300)}); "
                         f"fix or remove the file, or bind it as plain bytes with open(path, 'rb').read().") from None
    files = f"{len(tf.files):,} {tf.label} file{'' if len(tf.files) == 1 else 's'}"
    hive = f", Hive partitions: {', '.join(tf.hive)}" if tf.hive else ""
    stamp = datetime.datetime.fromtimestamp(newest, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    detail = f"{files}{hive}; rows {how}; files as of {stamp} (newest change), read when queried"
    if stats:
        detail += "\n  " + stats
    info = lazy_table_info(name, "file_table", PYTHON_TYPE, columns, types, sample, config, rows=rows,
                           estimated=estimated, size_bytes=total, path=tf.root, detail=detail)
    read_paths = (tf.root,) if os.path.isdir(tf.root) and tf.pattern is None else tf.files
    return Field(name, source, info, lambda: open_relation(tf, duck.cursor()), read_paths=read_paths,
                 plan=tf.to_dict())


def _shape(tf: TableFiles, cur: Any) -> tuple[list[str], list[str], Any]:
    """Column names, DuckDB types and the first rows (Arrow) of the table, as its relation has them.

    DuckDB's cost to open and sample a relation grows with its number of files (~0.1-0.2 ms a file
    here), while the shape of a Parquet dataset is its first file's: parquet_meta has checked that the
    files share a schema, and DuckDB reads a list of files with the first one's schema. So a Parquet
    dataset is sampled from its first file; only the types of Hive keys need all the paths (DuckDB
    infers them from every value), and they are given to that one-file reader.
    """
    if tf.format != "parquet" or len(tf.files) == 1:
        rel = open_relation(tf, cur)
        return list(rel.columns), [str(t) for t in rel.types], rel.limit(SAMPLE_ROWS).to_arrow_table()
    if tf.hive:
        whole = open_relation(tf, cur)
        columns, types = list(whole.columns), [str(t) for t in whole.types]
        hive_types = {c: t for c, t in zip(columns, types, strict=True) if c in tf.hive}
    else:
        hive_types = {}
    first = TableFiles(tf.format, tf.files[:1], tf.files[0], tf.compression, tf.hive)
    rel = cur.sql(f"SELECT * FROM {reader_sql(first, hive_types)}")
    if not tf.hive:
        columns, types = list(rel.columns), [str(t) for t in rel.types]
    return columns, types, rel.limit(SAMPLE_ROWS).to_arrow_table()


def _stat_files(name: str, tf: TableFiles) -> tuple[list[int], float]:
    """Each file's size and the newest change; InputError for one that is missing or unreadable."""
    sizes, newest = [], 0.0
    for path in tf.files:
        try:
            st = os.stat(path)
            if not os.access(path, os.R_OK):
                raise PermissionError(13, "Permission denied")
        except OSError as e:
            raise InputError(f"Input {name!r}: cannot read {path} ({e.strerror or e}); check that it exists and "
                             f"that you may read it.") from None
        sizes.append(st.st_size)
        newest = max(newest, st.st_mtime)
    return sizes, newest


def _list(paths: Sequence[str]) -> str:
    return "[" + ", ".join(duck.literal(p) for p in paths) + "]"


def _schema_clash(name: str, first: str, other: str, a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]],
                  types: bool = True) -> InputError:
    da, db = dict(a), dict(b)
    missing = [c for c in da if c not in db] + [c for c in db if c not in da]
    if missing:
        what = f"column {missing[0]!r} is in only one of them"
    else:
        col = next((c for c in da if types and da[c] != db[c]), None)
        what = f"column {col!r} is {da[col]} in one and {db[col]} in the other" if col else "their columns differ in order"
    return InputError(f"Input {name!r}: {os.path.basename(first)} and {os.path.basename(other)} do not share a "
                      f"schema ({what}); bind them as separate inputs or make their columns agree.")


# ---- Arrow IPC -------------------------------------------------------------------------------------------
def _ipc_meta(name: str, tf: TableFiles) -> tuple[int, bool, str]:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    rows = 0
    first_schema = None
    for path in tf.files[:MAX_META_FILES]:
        with pa.memory_map(path, "r") as source:
            reader = ipc.open_file(source)
            schema = reader.schema
            rows += reader.count_rows()  # each batch's message header, no bodies (~2 us a batch)
        if first_schema is None:
            first_schema = schema
        elif not schema.equals(first_schema):
            a = [(f.name, str(f.type)) for f in first_schema]
            raise _schema_clash(name, tf.files[0], path, a, [(f.name, str(f.type)) for f in schema])
    if len(tf.files) > MAX_META_FILES:
        return round(rows * len(tf.files) / MAX_META_FILES), True, f"estimated from the first {MAX_META_FILES:,} files"
    return rows, False, "from the Arrow IPC batch index"


# ---- CSV / TSV / JSON Lines --------------------------------------------------------------------------------
def _text_meta(name: str, tf: TableFiles, cur: Any, total: int) -> tuple[int | None, bool, str]:
    first = tf.files[0]
    if tf.compression is None:
        with open(first, "rb") as f:
            head = f.read(SNIFF_BYTES)
        why = _sniff(head, complete=len(head) < SNIFF_BYTES)
        if why is not None and b"\0" not in head:
            raise InputError(f"Input {name!r}: {os.path.basename(first)} is not UTF-8 text ({why}), so it cannot be "
                             f"parsed as {tf.label}; re-save it as UTF-8.")
        if why is not None:
            raise InputError(f"Input {name!r}: {os.path.basename(first)} is not text ({why}), so it cannot be "
                             f"parsed as {tf.label}; check the file.")
    picks = spread(tf.files, MAX_SNIFF_FILES)
    base: list[tuple[str, str]] = []
    for path in picks:
        one = TableFiles(tf.format, (path,), path, tf.compression)
        try:
            cols = [(r[0], r[1]) for r in cur.sql(f"DESCRIBE SELECT * FROM {reader_sql(one)}").fetchall()]
        except Exception as exc:
            if not duck.is_error(exc):
                raise
            raise InputError(f"Input {name!r}: {os.path.basename(path)} cannot be parsed as {tf.label} "
                             f"({_clip_end(duck.message(exc), 300)}); fix the file or check its format.") from None
        delim = {"csv": ",", "tsv": "\t"}.get(tf.format)
        if delim and len(cols) == 1 and cols[0][1] == "VARCHAR" and delim in cols[0][0]:
            raise InputError(f"Input {name!r}: {os.path.basename(path)} cannot be parsed as {tf.label} (its rows do "
                             f"not split into the same number of fields, so each line would be one text column); "
                             f"fix the file or check its delimiter.")
        if path == picks[0]:
            base = cols
        elif [c for c, _ in cols] != [c for c, _ in base]:
            raise _schema_clash(name, picks[0], path, base, cols, types=False)
    if total <= COUNT_BELOW_BYTES:
        (count,) = cur.sql(f"SELECT count(*) FROM {reader_sql(tf)}").fetchall()[0]
        return int(count), False, "counted"
    per_byte = _rows_per_byte(first, tf)
    if per_byte is None:
        return None, True, f"unknown without a full read ({tf.compression}-compressed)"
    return max(1, round(per_byte * total)), True, "estimated from the bytes per row of the first MB"


def _rows_per_byte(path: str, tf: TableFiles) -> float | None:
    """Lines per on-disk byte in the first megabyte (gzip: per compressed byte consumed); None for zstd."""
    if tf.compression == "zstd":
        return None
    import gzip

    with open(path, "rb") as raw:
        if tf.compression == "gzip":
            with gzip.GzipFile(fileobj=raw) as g:
                data = g.read(ROW_SAMPLE_BYTES)
                consumed = raw.tell()
        else:
            data = raw.read(ROW_SAMPLE_BYTES)
            consumed = len(data)
    lines = data.count(b"\n") - (1 if tf.format != "jsonl" else 0)
    return max(1, lines) / max(1, consumed)


def is_table_file(name: str, path: str) -> bool:
    return file_format(name, path) is not None
