"""The Arrow dataset family: a `pyarrow.dataset.Dataset`, kept lazy.

A dataset over local files (Parquet, Arrow IPC, CSV, JSON; any partitioning: Hive, directory or
filename, inferred or given; one made from a list of files; a filtered one; a union of such) is
reopened in the kernel sandbox exactly as the user built it: its fragments (each file with its
partition expression), schema, format with its options and filter travel in the crossing spec
(Arrow's own pickling, host to kernel only), so nothing is copied and no directory is rediscovered.
An in-memory dataset, or one over another filesystem, is copied once as Arrow IPC into a kernel
sandbox, and the summary says so. DuckDB scans a dataset lazily with projection and filter pushdown,
so sql() sees it without loading it.

Rows come from the footers of at most COUNT_FILES files (Parquet, Arrow IPC), extrapolated by file
size beyond them and marked as an estimate, so describing costs the same for 4 files or 4,000.
"""

from __future__ import annotations

import base64
import os
import pickle
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb.inputs._previews import SAMPLE_ROWS
from rlmnb.inputs._records import Field
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.lazytable import lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

_FORMATS = {"ParquetFileFormat": "parquet", "IpcFileFormat": "ipc", "FeatherFileFormat": "ipc",
            "CsvFileFormat": "csv", "JsonFileFormat": "json"}
_COUNTED = ("parquet", "ipc")  # formats whose row count comes from metadata, not a scan
COUNT_FILES = 16               # files whose footers give the row count (beyond: extrapolated by size)
HEAD_BATCHES = 64              # batches a filtered dataset's sample may read before it gives up


def _parts(dataset: Any) -> list[Any] | None:
    """The local file datasets `dataset` is made of, or None when one of them cannot be rebuilt from files."""
    kind = type(dataset).__name__
    if kind == "UnionDataset":
        found = [_parts(child) for child in dataset.children]
        return None if any(f is None for f in found) else [d for f in found for d in f or []]
    if kind != "FileSystemDataset" or type(dataset.filesystem).__name__ != "LocalFileSystem":
        return None
    if type(dataset.format).__name__ not in _FORMATS:
        return None
    return [dataset]


def _fragments(dataset: Any) -> list[Any]:
    """Every fragment, also of a filtered dataset (whose public `get_fragments` refuses)."""
    if getattr(dataset, "_scan_options", None) and hasattr(dataset, "_get_fragments"):
        return list(dataset._get_fragments(None))
    return list(dataset.get_fragments())


def _blob(dataset: Any) -> str:
    """The dataset as the kernel rebuilds it: fragments, schema, format, root partition, filter."""
    parts = []
    for part in _parts(dataset) or []:
        options = getattr(part, "_scan_options", None) or {}
        parts.append((_fragments(part), part.schema, part.format, part.partition_expression, options.get("filter")))
    union = type(dataset).__name__ == "UnionDataset"
    return base64.b64encode(pickle.dumps((parts, dataset.schema if union else None), protocol=5)).decode("ascii")


def _rebuild(blob: str) -> Any:
    """Inside the kernel: the dataset from `_blob` (written by this host for this kernel)."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    parts, union_schema = pickle.loads(base64.b64decode(blob))  # noqa: S301 - host -> kernel only
    built = []
    for fragments, schema, fmt, root, flt in parts:
        one = ds.FileSystemDataset(fragments, schema, fmt, pafs.LocalFileSystem(), root_partition=root)
        built.append(one.filter(flt) if flt is not None else one)
    return ds.UnionDataset(union_schema, built) if union_schema is not None else built[0]


def _files(dataset: Any) -> list[str]:
    return [os.path.abspath(f) for part in _parts(dataset) or [] for f in part.files]


def _filtered(dataset: Any) -> bool:
    parts = _parts(dataset) or [dataset]
    return any(getattr(p, "_scan_options", None) for p in parts)


def _head(dataset: Any) -> Any:
    """A few rows with their partition values. (`Dataset.head` and `Fragment.head` read far ahead: minutes on a
    10^8-row dataset here; a streaming reader stops after one batch, DuckDB after a few rows of Parquet.)"""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = dataset.schema
    if _filtered(dataset) or type(dataset).__name__ == "UnionDataset":
        reader = ds.Scanner.from_dataset(dataset, batch_size=SAMPLE_ROWS, batch_readahead=0, fragment_readahead=0,
                                         use_threads=False).to_reader()
        try:
            for _, batch in zip(range(HEAD_BATCHES), reader, strict=False):
                if batch.num_rows:
                    return pa.Table.from_batches([batch]).slice(0, SAMPLE_ROWS)
            return schema.empty_table()
        finally:
            reader.close()
    fragment = next(iter(dataset.get_fragments()), None)
    if fragment is None:
        return schema.empty_table()
    local = type(getattr(dataset, "filesystem", None)).__name__ == "LocalFileSystem"
    if local and type(fragment).__name__ == "ParquetFileFragment":  # pyarrow's scanners read the whole file first
        head = duck.cursor().sql(f"SELECT * FROM read_parquet({duck.literal(fragment.path)}) "
                                 f"LIMIT {SAMPLE_ROWS}").to_arrow_table()
    else:
        reader = ds.Scanner.from_fragment(fragment, schema=fragment.physical_schema, batch_size=SAMPLE_ROWS,
                                          batch_readahead=0, fragment_readahead=0, use_threads=False).to_reader()
        try:
            head = pa.Table.from_batches([reader.read_next_batch()]).slice(0, SAMPLE_ROWS)
        except StopIteration:
            return schema.empty_table()
        finally:
            reader.close()
    keys = ds.get_partition_keys(fragment.partition_expression)
    for field in schema:
        if field.name not in head.column_names:
            value = keys.get(field.name)
            head = head.append_column(field, pa.array([value] * head.num_rows, type=field.type))
    head = head.select(schema.names)
    try:
        return head.cast(schema)
    except (ValueError, TypeError, NotImplementedError):  # a preview does not need the exact types
        return head


def _count(dataset: Any, fmt: str | None) -> tuple[int | None, bool]:
    """(rows, estimated): exact from the footers of up to COUNT_FILES files, extrapolated by size beyond."""
    if fmt == "memory":
        return int(dataset.count_rows()), False
    if fmt not in _COUNTED or _filtered(dataset):
        return None, False
    fragments = [f for part in _parts(dataset) or [] for f in part.get_fragments()]
    counted = fragments[:COUNT_FILES]
    rows = sum(int(f.count_rows()) for f in counted)
    if len(counted) == len(fragments):
        return rows, False
    seen = sum(os.path.getsize(f.path) for f in counted)
    return round(rows * sum(os.path.getsize(f.path) for f in fragments) / max(1, seen)), True


def _describe(name: str, dataset: Any, config: RLMConfig) -> Field:
    schema = dataset.schema
    columns, types = list(schema.names), [str(t) for t in schema.types]
    parts = _parts(dataset)
    files = _files(dataset) if parts else []
    fmt = _FORMATS[type(parts[0].format).__name__] if parts else None
    try:
        head = _head(dataset)
        rows, estimated = _count(dataset, fmt or ("memory" if type(dataset).__name__ == "InMemoryDataset" else None))
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "pyarrow" and not isinstance(exc, (OSError, ValueError)):
            raise
        raise InputError(f"Input {name!r}: the Arrow dataset cannot be read ({clip(str(exc), 300)}); check its "
                         f"files.") from None
    size = sum(os.path.getsize(f) for f in files if os.path.isfile(f)) if parts else None
    root = os.path.commonpath(files) if parts and files else None
    if parts is not None:
        where = f"{len(files):,} {fmt} file{'' if len(files) == 1 else 's'}"
        flavour = _partitioning(parts)
        how = f"lazy Arrow dataset over {where}{flavour}; reopened from its files in the sandbox (nothing copied)"
    else:
        how = "Arrow dataset that cannot be reopened from files: a kernel sandbox gets one Arrow IPC copy of it"
    if rows is None:
        how += "; rows unknown without a scan"
    info = lazy_table_info(name, "dataset", "pyarrow.dataset." + type(dataset).__name__, columns, types, head,
                           config, rows=rows, estimated=estimated, size_bytes=size, path=root, detail=how)
    plan = {"format": fmt, "files": len(files)} if parts is not None else None
    return Field(name, dataset, info, lambda: dataset, read_paths=tuple(files), plan=plan)


def _partitioning(parts: list[Any]) -> str:
    """', Hive partitions: y, m' (or directory / filename), from the first part's partitioning."""
    partitioning = getattr(parts[0], "partitioning", None)
    if partitioning is None or not len(partitioning.schema):
        return ""
    flavour = {"HivePartitioning": "Hive", "DirectoryPartitioning": "directory",
               "FilenamePartitioning": "filename"}.get(type(partitioning).__name__, "")
    return f", {flavour} partitions: {', '.join(partitioning.schema.names)}".replace(",  partitions", ", partitions")


def _crossing(field: Field) -> dict[str, Any] | None:
    if field.plan is None:
        return None
    return {"how": "reopen", "path": field.info.path or "dataset", "plan": {**field.plan, "blob": _blob(field.source)}}


def _reopen(_name: str, spec: Mapping[str, Any]) -> Any:
    return _rebuild(str(spec["plan"]["blob"]))


def _view(_name: str, table: Any) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(table)


FAMILY = Family("arrow_dataset", ("dataset",), _describe, classes=("pyarrow:Dataset",), crossing=_crossing,
                reopen=_reopen, view=_view, tables=("dataset",), sql=lambda dataset: dataset,
                export=lambda dataset: dataset.to_table())


__all__ = ["COUNT_FILES", "FAMILY", "HEAD_BATCHES"]
