"""Tables in files: which files are one table, opening them in DuckDB, and describing them cheaply.

A file, a folder whose files all share one format (Parquet, CSV/TSV plain or gzip/zstd, JSON Lines,
Arrow IPC/Feather), or a glob of them is a `TableFiles`: its format, its files (absolute paths, taken
at bind time) and its Hive partition keys (`key=value/` folders). Anything else stays a file or a
folder mapping. `open_relation` opens it as a DuckDB relation, the same way on the host and in the
sandbox kernel, from this record alone.

`describe_table` never scans the table: Parquet rows, schemas and statistics come from the footers
(parquet.py); Arrow IPC rows and schema from the file's batch index; CSV / JSON Lines schemas from
DuckDB's sniffer, rows estimated from the bytes per row of the first megabyte (marked as an estimate).
Every format: a few rows read with `LIMIT`, which stops after the first row group or chunk.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb.inputs._filesystem import SNIFF_BYTES, sniff
from rlmnb.inputs._previews import SAMPLE_ROWS
from rlmnb.inputs._records import Field
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.duck import ident, literal
from rlmnb.inputs._tables.lazytable import lazy_table_info
from rlmnb.inputs._tables.parquet import parquet_meta, spread

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig


# extension -> format
_FORMATS = {".parquet": "parquet", ".parq": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv",
            ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".arrow": "ipc", ".feather": "ipc",
            ".ipc": "ipc"}
_COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_UNSUPPORTED = (".bz2", ".xz", ".lzma", ".zip", ".lz4", ".br", ".7z", ".snappy", ".z", ".lz")
_TEXT_FORMATS = ("csv", "tsv", "jsonl")
FORMAT_NAMES = {"parquet": "Parquet", "csv": "CSV", "tsv": "TSV", "jsonl": "JSON Lines", "ipc": "Arrow IPC"}
_IGNORED = re.compile(r"^(?:[._].*|.*\.crc)$")  # _SUCCESS, _metadata, .DS_Store, part-0.parquet.crc
_HIVE = re.compile(r"^([^=/]+)=([^/]*)$")


@dataclass(frozen=True)
class TableFiles:
    """Files that form one table. `root` is the file, the folder or the glob's fixed folder."""

    format: str
    files: tuple[str, ...]
    root: str
    compression: str | None = None
    hive: tuple[str, ...] = ()
    pattern: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "files": list(self.files), "root": self.root,
                "compression": self.compression, "hive": list(self.hive), "pattern": self.pattern}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TableFiles:
        return cls(str(d["format"]), tuple(d["files"]), str(d["root"]), d.get("compression"),
                   tuple(d.get("hive") or ()), d.get("pattern"))

    @property
    def label(self) -> str:
        """"Parquet", "CSV (gzip)"..."""
        name = FORMAT_NAMES[self.format]
        return f"{name} ({self.compression})" if self.compression else name


def file_format(name: str, path: str) -> tuple[str, str | None] | None:
    """(format, compression) of a table file by its name; None for other files.

    Raises InputError for a table file under a compression DuckDB cannot stream (bz2, xz, zip...).
    """
    base = os.path.basename(path).lower()
    stem, ext = os.path.splitext(base)
    if ext in _FORMATS:
        return _FORMATS[ext], None
    inner = os.path.splitext(stem)[1]
    if inner not in _FORMATS:
        return None
    fmt = _FORMATS[inner]
    if ext in _COMPRESSIONS and fmt in _TEXT_FORMATS:
        return fmt, _COMPRESSIONS[ext]
    if ext in _UNSUPPORTED or ext in _COMPRESSIONS:
        raise InputError(f"Input {name!r}: {os.path.basename(path)} is {FORMAT_NAMES[fmt]} compressed with "
                         f"{ext[1:]}, which cannot be read in place; decompress it, or recompress it with gzip "
                         f"or zstd (for CSV and JSON Lines).")
    return None


def for_file(name: str, path: str) -> TableFiles | None:
    found = file_format(name, path)
    if found is None:
        return None
    return TableFiles(found[0], (path,), path, found[1])


def for_folder(name: str, root: str, files: Sequence[str]) -> TableFiles | None:
    """The folder's files (relative posix paths) as one table, or None when they are not all one format."""
    kept = [rel for rel in files if not any(_IGNORED.match(part) for part in rel.split("/"))]
    return _common(name, root, [os.path.join(root, *rel.split("/")) for rel in kept], kept, None)


def for_glob(name: str, root: str, pattern: str, paths: Sequence[str]) -> TableFiles | None:
    rels = [os.path.relpath(p, root).replace(os.sep, "/") for p in paths]
    return _common(name, root, list(paths), rels, pattern)


def _common(name: str, root: str, paths: list[str], rels: list[str], pattern: str | None) -> TableFiles | None:
    if not paths:
        return None
    formats = set()
    for path in paths:
        found = file_format(name, path)
        if found is None:
            return None
        formats.add(found)
        if len(formats) > 1:
            return None
    fmt, compression = formats.pop()
    return TableFiles(fmt, tuple(paths), root, compression, _hive_keys(rels), pattern)


def _hive_keys(rels: Sequence[str]) -> tuple[str, ...]:
    """The partition keys when every file sits under the same `key=value/` folders, else ()."""
    keys: tuple[str, ...] | None = None
    for rel in rels:
        folders = posixpath.dirname(rel).split("/") if "/" in rel else []
        found = tuple(m.group(1) for part in folders if (m := _HIVE.match(part)))
        if not found or len(found) != len(folders) or (keys is not None and found != keys):
            return ()
        keys = found
    return keys or ()


# ---- opening ------------------------------------------------------------------------------------------
def reader_sql(tf: TableFiles, hive_types: Mapping[str, str] | None = None) -> str:
    """The DuckDB table function call that reads these files (not for Arrow IPC).

    `hive_types`: DuckDB types of Hive keys ({"year": "BIGINT"}), instead of inferring them from these paths.
    """
    files = "[" + ", ".join(literal(p) for p in tf.files) + "]"
    hive = ", hive_partitioning = true" if tf.hive else ", hive_partitioning = false"
    if tf.hive and hive_types:
        hive += ", hive_types = {" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in hive_types.items()) + "}"
    if tf.format == "parquet":
        return f"read_parquet({files}{hive})"
    compression = f", compression = {literal(tf.compression)}" if tf.compression else ""
    if tf.format == "jsonl":
        return f"read_json({files}, format = 'newline_delimited'{compression}{hive})"
    delim = ", delim = '\t'" if tf.format == "tsv" else ""
    return f"read_csv({files}{delim}{compression}{hive})"


def arrow_dataset(tf: TableFiles) -> Any:
    """A lazy pyarrow dataset over Arrow IPC files (DuckDB has no built-in IPC reader)."""
    import pyarrow.dataset as ds

    partitioning = ds.partitioning(flavor="hive") if tf.hive else None
    base = tf.root if os.path.isdir(tf.root) else None
    return ds.dataset(list(tf.files), format="ipc", partitioning=partitioning, partition_base_dir=base)


def open_relation(tf: TableFiles, cur: Any) -> Any:
    """The table as a lazy DuckDB relation on cursor `cur`."""
    if tf.format == "ipc":
        return cur.from_arrow(arrow_dataset(tf))
    return cur.sql(f"SELECT * FROM {reader_sql(tf)}")


def view_sql(tf: TableFiles, name: str) -> str | None:
    """`CREATE TEMP VIEW name AS ...` for sql(), or None when the table is not SQL-readable (IPC)."""
    if tf.format == "ipc":
        return None
    return f"CREATE OR REPLACE TEMP VIEW {ident(name)} AS SELECT * FROM {reader_sql(tf)}"


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
        raise InputError(f"Input {name!r}: cannot read {where} as {tf.label} ({clip(duck.message(exc), 300)}); "
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

    DuckDB's cost to open and sample a relation grows with its number of files, while the shape of a Parquet dataset is its first file's: parquet_meta has checked that the
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
            rows += reader.count_rows()  # each batch's message header, no bodies
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
        why = sniff(head, complete=len(head) < SNIFF_BYTES)
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
                             f"({clip(duck.message(exc), 300)}); fix the file or check its format.") from None
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


__all__ = []
