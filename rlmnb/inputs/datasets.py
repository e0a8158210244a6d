"""The Arrow dataset family: a `pyarrow.dataset.Dataset`, kept lazy.

A dataset over local files (Parquet, Arrow IPC, CSV, JSON; no partitioning or Hive partitioning) is
reopened in the kernel sandbox from its file list, format and schema, so nothing is copied. An
in-memory dataset, or one the kernel cannot rebuild exactly (another filesystem, directory-style
partitioning), is copied once as Arrow IPC into a kernel sandbox, and the summary says so. DuckDB
scans a dataset lazily with projection and filter pushdown, so sql() sees it without loading it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import duck
from .brief import SAMPLE_ROWS, _clip_end
from .lazytable import lazy_table_info
from .records import Field
from .registry import Family

if TYPE_CHECKING:
    from ..config import RLMConfig

_FORMATS = {"ParquetFileFormat": "parquet", "IpcFileFormat": "ipc", "FeatherFileFormat": "ipc",
            "CsvFileFormat": "csv", "JsonFileFormat": "json"}
_COUNTED = ("parquet", "ipc")  # formats whose row count comes from metadata, not a scan


def _plan(dataset: Any) -> dict[str, Any] | None:
    """How the kernel rebuilds the dataset from its files, or None when it cannot do so exactly."""
    if type(dataset).__name__ != "FileSystemDataset" or type(dataset.filesystem).__name__ != "LocalFileSystem":
        return None
    fmt = _FORMATS.get(type(dataset.format).__name__)
    partitioning = getattr(dataset, "partitioning", None)
    if partitioning is not None and len(partitioning.schema) == 0:
        partitioning = None  # the default when none was given: an empty directory partitioning
    flavor = {None: None, "HivePartitioning": "hive"}.get(type(partitioning).__name__ if partitioning else None, "?")
    if fmt is None or flavor == "?":
        return None
    schema = base64.b64encode(dataset.schema.serialize().to_pybytes()).decode("ascii")
    part = (base64.b64encode(partitioning.schema.serialize().to_pybytes()).decode("ascii")
            if flavor == "hive" and partitioning is not None else None)
    return {"files": [os.path.abspath(f) for f in dataset.files], "format": fmt, "schema": schema,
            "hive": part}


def _reopen_plan(plan: Mapping[str, Any]) -> Any:
    import pyarrow as pa
    import pyarrow.dataset as ds

    def schema_of(text: str) -> Any:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))

    partitioning = ds.HivePartitioning(schema_of(plan["hive"])) if plan.get("hive") else None
    return ds.dataset(list(plan["files"]), schema=schema_of(plan["schema"]), format=plan["format"],
                      partitioning=partitioning)


def _head(dataset: Any) -> Any:
    """The first batch of the first fragment, with its partition values. (`Dataset.head` and `Fragment.head`
    read far ahead: minutes on a 10^8-row dataset here; a streaming reader stops after one batch.)"""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = dataset.schema
    fragment = next(iter(dataset.get_fragments()), None)
    if fragment is None:
        return schema.empty_table()
    kind = type(fragment).__name__
    if kind == "ParquetFileFragment":  # pyarrow's scanners read the whole file first; DuckDB stops early
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


def _describe(name: str, dataset: Any, config: RLMConfig) -> Field:
    schema = dataset.schema
    columns, types = list(schema.names), [str(t) for t in schema.types]
    plan = _plan(dataset)
    files = list(getattr(dataset, "files", None) or [])
    try:
        head = _head(dataset)
        fmt = plan["format"] if plan else ("memory" if type(dataset).__name__ == "InMemoryDataset" else None)
        rows = int(dataset.count_rows()) if fmt in _COUNTED or fmt == "memory" else None
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "pyarrow" and not isinstance(exc, OSError):
            raise
        raise InputError(f"Input {name!r}: the Arrow dataset cannot be read ({_clip_end(str(exc), 300)}); check its "
                         f"files.") from None
    size = sum(os.path.getsize(f) for f in files if os.path.isfile(f)) if plan else None
    root = os.path.commonpath(files) if plan and files else None
    where = f"{len(files):,} {plan['format']} file{'' if len(files) == 1 else 's'}" if plan else ""
    if plan is not None:
        how = f"lazy Arrow dataset over {where}; reopened from its files in the sandbox (nothing copied)"
    else:
        how = "Arrow dataset that cannot be reopened from files: a kernel sandbox gets one Arrow IPC copy of it"
    if rows is None:
        how += "; rows unknown without a scan"
    info = lazy_table_info(name, "dataset", "pyarrow.dataset." + type(dataset).__name__, columns, types, head,
                           config, rows=rows, size_bytes=size, path=root, detail=how)
    return Field(name, dataset, info, lambda: dataset, read_paths=tuple(os.path.abspath(f) for f in files)
                 if plan else (), plan=plan)


def _crossing(field: Field) -> dict[str, Any] | None:
    if field.plan is None:
        return None
    return {"how": "reopen", "path": field.info.path or "dataset", "plan": dict(field.plan)}


def _view(_name: str, table: Any) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(table)


FAMILY = Family("arrow_dataset", ("dataset",), _describe, classes=("pyarrow:Dataset",), crossing=_crossing,
                reopen=lambda _name, spec: _reopen_plan(spec["plan"]), view=_view, tables=("dataset",),
                sql=lambda dataset: dataset, export=lambda dataset: dataset.to_table())
