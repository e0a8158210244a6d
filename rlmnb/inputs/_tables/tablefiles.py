"""Which files are one table: Parquet, CSV/TSV (plain, gzip, zstd), JSON Lines and Arrow IPC/Feather.

A file, a folder whose files all share one such format, or a glob of them is a `TableFiles`: its
format, its files (absolute paths, taken at bind time) and its Hive partition keys (`key=value/`
folders). Anything else stays a file or a folder mapping. `open_relation` opens it as a DuckDB
relation, the same way on the host and in the sandbox kernel, from this record alone.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._tables.duck import ident, literal

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
