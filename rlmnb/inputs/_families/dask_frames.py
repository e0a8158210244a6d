"""The Dask family: a Dask `DataFrame`, described without computing it and computed where model code may run.

Summary: npartitions, dtypes (from the collection's meta), known divisions, the row count only when Dask
knows it without computing (from pandas or Parquet metadata), and the head of the first partition.

Crossing into the kernel sandbox: model code never runs in the user's process nor on machines the user did
not hand it, so by default the sandbox computes the frame itself (`Field.plan["crossing"]`):
- "graph": the collection's graph crosses (cloudpickled) and runs on Dask's local threaded scheduler in the
  kernel; its source files are read there by Dask's own readers (`Field.read_paths` names them);
- "export": a frame holding data only its cluster has (persisted partitions, futures in its graph), one read
  from remote storage the sandbox cannot reach, or a graph too large to pickle into a message is computed
  by the HOST (the user's own graph on the user's own cluster, no model code) partition by partition and
  crosses as one Arrow IPC file (`_export`, at most `MAX_EXPORT_BYTES`); the kernel sees it as a Dask frame
  with the same partitions again;
- "cluster", only with `RLMConfig.allow_model_code_on_dask_cluster`: the collection is published on the
  user's scheduler and the kernel connects its own client to it (`Field.endpoints` names the scheduler), so
  model code runs on the cluster's workers and scheduler, outside rlmnb's confinement.
Sub-calls stay on the host: `llm_query` in the sandbox is a call to the host's broker, which spends the
run's one budget, whatever Dask does.

sql() reads a Dask frame as an Arrow stream computing one partition at a time (`PartitionStream`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import json
import os
import re
import secrets
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._filesystem import readable_root
from rlmnb.inputs._previews import cell
from rlmnb.inputs._records import Field, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables.lazytable import lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

CONNECT_SECONDS = 10.0   # the kernel's client waits this long for the scheduler (opt-in only)
PROBE_SECONDS = 2.0      # the host checks the scheduler answers within this (opt-in only)
MAX_READ_PATHS = 16      # above this many files, their folders are named instead (then their common parent)
MAX_EXPORT_BYTES = 2 * 2**30   # the most Arrow data the host computes and copies into the sandbox for one frame
MAX_GRAPH_BYTES = 64 * 2**20   # a larger pickled graph (in-memory pandas inside) is exported as Arrow instead
EXPORT_BATCH = 8         # partitions the host computes at once when exporting
MAX_WALK = 200_000       # graph objects looked at for source files and futures before giving up
OPT_IN = "allow_model_code_on_dask_cluster"   # the RLMConfig setting that lets model code reach a cluster
_META_KEY = b"rlmnb.dask"   # Arrow schema metadata of an exported frame: its partition lengths and divisions
_LOCAL_PROTOCOLS = frozenset({"file", "local"})
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_kernel_clients: dict[str, Any] = {}   # in the kernel: one client per scheduler address (opt-in only)
_published: dict[tuple[int, str], tuple[weakref.ref[Any], str]] = {}  # on the host: (id, address) -> dataset
_exported: dict[int, tuple[weakref.ref[Any], str]] = {}  # on the host: id(frame) -> (frame, input name)
_lock = threading.Lock()


def _describe(name: str, ddf: Any, config: RLMConfig) -> Field:
    client = user_client()
    address = str(client.scheduler.address or "") if client is not None and client.status == "running" else ""
    sources = graph_sources(ddf)
    mode = crossing_mode(ddf, config, sources)
    meta = ddf._meta
    rows = known_length(ddf)
    import pyarrow as pa

    k = max(config.preview_rows, 8)
    files = parquet_files(ddf)
    head = _first_rows(files[0], [str(c) for c in meta.columns], k) if files else None
    if head is None:
        try:
            with warnings.catch_warnings():  # "Insufficient elements for head": one partition is all we read
                warnings.simplefilter("ignore")
                head = pa.Table.from_pandas(ddf.head(k, npartitions=1, compute=True), preserve_index=False)
        except Exception as exc:
            raise InputError(f"Input {name!r}: the first partition of this Dask DataFrame cannot be computed "
                             f"({_first_line(exc)}); fix the collection, or check its cluster and files.") from None
    on_cluster = bool(address) and (config.sandbox == "local" or mode == "cluster")
    notes = [f"Dask DataFrame, {ddf.npartitions:,} partition{'s' if ddf.npartitions != 1 else ''}, not computed: "
             f"its methods build a graph and .compute() runs it" + (" on the cluster" if on_cluster else "")]
    if ddf.known_divisions:
        divisions = ddf.divisions
        notes.append(f"index divisions known: {cell(divisions[0], 30)} … {cell(divisions[-1], 30)}")
    if rows is None:
        notes.append("row count unknown (counting would compute every partition)")
    info = lazy_table_info(name, "dask_frame", type_name(ddf), [str(c) for c in meta.columns],
                           [str(t) for t in meta.dtypes], head, config,
                           rows=rows, detail="; ".join(notes))
    endpoints = (_host_port(address),) if mode == "cluster" and address.startswith(("tcp://", "tls://")) else ()
    if mode == "export":
        _remember_name(ddf, name)
    return Field(name, ddf, info, ddf.copy, endpoints=endpoints, read_paths=sources.read_paths(),
                 plan={"crossing": mode})  # a copy: `x["c"] = ...` never reaches ddf


def user_client() -> Any:
    """The session's default `distributed.Client`, or None (distributed is never imported here)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.Client.current(allow_global=True)  # the one `.compute()` would use
    except ValueError:
        return None


def crossing_mode(ddf: Any, config: RLMConfig, sources: GraphSources | None = None) -> str:
    """How the frame reaches a kernel sandbox: "cluster" only with the opt-in and a running client,
    "export" when the sandbox cannot compute it alone (cluster data or remote storage), else "graph"."""
    client = user_client()
    if getattr(config, OPT_IN, False) and client is not None:
        return "cluster"
    found = sources if sources is not None else graph_sources(ddf)
    return "export" if found.futures or found.remote else "graph"


@dataclass
class GraphSources:
    """What a frame's expression reads: local files and folders, whether any source is remote (a URL the
    sandbox cannot reach), and whether it holds futures (data only a cluster has)."""

    paths: list[str] = field(default_factory=list)
    remote: bool = False
    futures: bool = False

    def read_paths(self) -> tuple[str, ...]:
        """What a confined kernel must read, sorted: the files and folders (a glob's folder) themselves, none
        under another; their folders above MAX_READ_PATHS; above that many folders their common parent,
        unless that is `/`."""
        found = {r for p in self.paths if (r := readable_root(p)) is not None}
        folders = {r for r in found if os.path.isdir(r)}
        roots = sorted(r for r in found if not any(r != f and r.startswith(f.rstrip(os.sep) + os.sep) for f in folders))
        if len(roots) > MAX_READ_PATHS:
            roots = sorted({r if os.path.isdir(r) else os.path.dirname(r) for r in roots})
        if len(roots) > MAX_READ_PATHS and os.path.commonpath(roots) != os.sep:
            roots = [os.path.commonpath(roots)]
        return tuple(roots)


def graph_sources(ddf: Any) -> GraphSources:
    """The sources of a frame, found by walking its expression's operands (paths given to readers,
    fsspec files of read_csv blocks, futures of persisted partitions); at most MAX_WALK objects."""
    found = GraphSources()
    expr = getattr(ddf, "expr", None)
    if expr is None:
        return found
    distributed = sys.modules.get("distributed")
    future_type = getattr(distributed, "Future", None) if distributed is not None else None
    seen: set[int] = set()
    stack: list[Any] = []
    with contextlib.suppress(Exception):
        for node in expr.walk():
            stack.extend(node.operand(p) for p in node._parameters)
    budget = MAX_WALK
    while stack and budget > 0:
        value = stack.pop()
        budget -= 1
        if isinstance(value, str):
            _note_path(value, found)
            continue
        if value is None or isinstance(value, int | float | bytes | bool) or id(value) in seen:
            continue
        seen.add(id(value))
        if future_type is not None and isinstance(value, future_type):
            found.futures = True
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend(value)
        elif hasattr(value, "fs") and isinstance(getattr(value, "path", None), str):  # an fsspec OpenFile
            protocols = getattr(value.fs, "protocol", ())
            protocols = {protocols} if isinstance(protocols, str) else set(protocols)
            if protocols & _LOCAL_PROTOCOLS:
                found.paths.append(value.path)
            else:
                found.remote = True
        elif type(value).__module__.startswith(("dask.", "functools")):  # tasks, partials: their arguments
            stack.extend(getattr(value, "args", ()) or ())
            stack.extend((getattr(value, "kwargs", None) or getattr(value, "keywords", None) or {}).values())
    return found


def _note_path(text: str, found: GraphSources) -> None:
    url = _URL.match(text)
    if url is not None:
        if url.group(1).lower() in _LOCAL_PROTOCOLS:
            found.paths.append(text[url.end():])
        else:
            found.remote = True
    elif os.path.isabs(text) and len(text) < 4096:
        found.paths.append(text)


def parquet_files(ddf: Any) -> list[str]:
    """The local Parquet files a frame is a plain `read_parquet` of (columns chosen, no filters), else []."""
    expr = getattr(ddf, "expr", None)
    if expr is None or not type(expr).__name__.startswith("ReadParquet"):
        return []
    try:
        if expr.operand("filters") or expr.operand("storage_options"):
            return []
        paths = [str(p) for p in expr._dataset_info["ds"].files]
    except Exception:
        return []
    return paths if paths and all(os.path.isabs(p) for p in paths) and os.path.isfile(paths[0]) else []


def _first_rows(path: str, columns: list[str], k: int) -> Any:
    """The first k rows of one Parquet file (its first row group is read), or None when it has none of
    them or lacks a column (Hive keys live in folder names): the caller then computes a partition."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=k, columns=columns), None)
    except Exception:
        return None
    if batch is None or batch.num_rows == 0 or batch.schema.names != columns:
        return None
    return pa.Table.from_batches([batch])


def known_length(ddf: Any) -> int | None:
    """The number of rows when Dask knows it without computing (pandas lengths, Parquet metadata)."""
    try:
        from dask.dataframe.dask_expr._expr import Literal
        from dask.dataframe.dask_expr._reductions import Len

        expr = Len(ddf.expr).optimize()  # type: ignore[no-untyped-call,unused-ignore]
    except Exception:
        return None
    return int(expr.value) if isinstance(expr, Literal) else None


def _scheduler_address(name: str, client: Any) -> str:
    address = str(client.scheduler.address or "")
    if client.status != "running" or not address:
        raise InputError(f"Input {name!r}: the session's Dask client is {client.status}; reconnect it "
                         f"(distributed.Client(...)), or set {OPT_IN}=False to compute the frame in the sandbox.")
    if not address.startswith(("tcp://", "tls://")):
        raise InputError(f"Input {name!r}: its Dask scheduler at {address} lives inside this Python process, "
                         f"where the sandbox kernel cannot reach it; start it with processes=True or "
                         f"protocol='tcp', set {OPT_IN}=False, or use sandbox='local'.")
    try:  # one round trip through the client itself (a raw probe would upset a TLS scheduler)
        client.list_datasets(callback_timeout=PROBE_SECONDS)
    except Exception as exc:
        raise InputError(f"Input {name!r}: the Dask scheduler at {address} does not answer ({_first_line(exc)}); "
                         f"restart the cluster and its client, or use sandbox='local'.") from None
    return address


def _host_port(address: str) -> str:
    return address.split("://", 1)[-1]


def _first_line(exc: BaseException) -> str:
    lines = [t.strip() for t in str(exc).splitlines() if t.strip()]
    line = lines[0] if lines else type(exc).__name__
    return line if len(line) <= 300 else line[:299] + "…"


# ---- crossing into the kernel sandbox -----------------------------------------------------------------------
def _crossing(field: Field) -> dict[str, Any] | None:
    """The kernel's spec: the pickled graph, the published dataset (opt-in), or None to ship `_export`."""
    ddf = field.source
    mode = (field.plan or {}).get("crossing", "graph")
    if mode == "cluster":
        client = user_client()
        if client is None:
            raise InputError(f"Input {field.name!r}: the session's Dask client is gone; reconnect it "
                             f"(distributed.Client(...)) or set {OPT_IN}=False.")
        address = _scheduler_address(field.name, client)
        dataset = _publish(ddf, client, address)
        return {"how": "dask_cluster", "path": f"{address}#{dataset}", "address": address, "dataset": dataset,
                "security": _security(client)}
    if mode == "export":
        return None
    import cloudpickle

    graph = cloudpickle.dumps(ddf)
    if len(graph) > MAX_GRAPH_BYTES:  # in-memory data inside: one Arrow file is cheaper than a message
        _remember_name(ddf, field.name)
        return None
    return {"how": "dask_graph", "path": f"dask-graph:{hashlib.sha256(graph).hexdigest()[:24]}",
            "graph": base64.b64encode(graph).decode("ascii")}


def _remember_name(ddf: Any, name: str) -> None:
    """Which input an exported frame is, so `_export` (given only the frame) can name it in its errors."""
    with _lock:
        _exported[id(ddf)] = (weakref.ref(ddf), name)


def _name_of(ddf: Any) -> str:
    with _lock:
        known = _exported.get(id(ddf))
    return known[1] if known is not None and known[0]() is ddf else "?"


def _export(ddf: Any) -> Any:
    """The frame computed by the host (its own scheduler: the user's client when there is one) as one Arrow
    table, partition by partition, its partition lengths and divisions in the schema's metadata.

    Raises InputError, naming the input, when its computation fails or its data passes MAX_EXPORT_BYTES
    (checked after every batch of EXPORT_BATCH partitions, so the host holds at most one batch more).
    """
    import pyarrow as pa

    dask: Any = importlib.import_module("dask")  # untyped
    name = _name_of(ddf)
    parts = ddf.to_delayed()
    tables: list[Any] = []
    lengths: list[int] = []
    size = 0
    schema = None
    for start in range(0, len(parts), EXPORT_BATCH):
        try:
            frames = dask.compute(*parts[start:start + EXPORT_BATCH])
        except Exception as exc:
            raise InputError(f"Input {name!r}: its Dask frame could not be computed to copy into the sandbox "
                             f"({_first_line(exc)}); fix the collection or its cluster, or use "
                             f"sandbox='local'.") from None
        for frame in frames:
            table = pa.Table.from_pandas(frame, schema=schema, preserve_index=True)
            schema = schema or table.schema
            size += table.nbytes
            tables.append(table)
            lengths.append(len(frame))
        if size > MAX_EXPORT_BYTES:
            raise InputError(
                f"Input {name!r}: this Dask frame holds data only its cluster has, and computing it for the "
                f"sandbox passed {MAX_EXPORT_BYTES / 2**30:.0f} GiB; bind a smaller result (filter, select "
                f"columns or aggregate first), write it to Parquet and bind dd.read_parquet(...) so the sandbox "
                f"reads the files itself, or set {OPT_IN}=True to let model code run on that cluster.")
    table = pa.concat_tables(tables) if tables else pa.Table.from_pandas(ddf._meta, preserve_index=True)
    layout = {"lengths": lengths or [0], "divisions": _plain_divisions(ddf)}
    return table.replace_schema_metadata({**(table.schema.metadata or {}), _META_KEY: json.dumps(layout).encode()})


def _plain_divisions(ddf: Any) -> list[Any] | None:
    """The frame's divisions when known and JSON-able as they are (numbers, strings), else None."""
    if not ddf.known_divisions:
        return None
    divisions = [d.item() if hasattr(d, "item") else d for d in ddf.divisions]
    return divisions if all(isinstance(d, int | float | str) and not isinstance(d, bool) for d in divisions) else None


def _view(name: str, table: Any) -> Any:
    """In the kernel: the exported Arrow table as a Dask frame with the host's partitions, each partition
    converted to pandas only when Dask computes it (the table stays memory-mapped)."""
    dd: Any = importlib.import_module("dask.dataframe")  # untyped

    layout = json.loads((table.schema.metadata or {}).get(_META_KEY, b"{}"))
    lengths = [int(n) for n in layout.get("lengths") or [table.num_rows]]
    offsets = [sum(lengths[:i]) for i in range(len(lengths))]
    part = _ArrowPart(table, offsets, lengths, f"rlmnb-{name}-{secrets.token_hex(6)}")
    return dd.from_map(part, range(len(lengths)), meta=table.slice(0, 0).to_pandas(),
                       divisions=layout.get("divisions"), label="rlmnb-input", enforce_metadata=False)


class _ArrowPart:
    """One partition of an exported frame: a zero-copy slice of the table, as pandas."""

    def __init__(self, table: Any, offsets: list[int], lengths: list[int], token: str) -> None:
        self.table, self.offsets, self.lengths, self.token = table, offsets, lengths, token

    def __call__(self, i: int) -> Any:
        return self.table.slice(self.offsets[i], self.lengths[i]).to_pandas()

    def __dask_tokenize__(self) -> str:  # never hash the data
        return self.token


def _publish(ddf: Any, client: Any, address: str) -> str:
    """The private name `ddf` is published under on the scheduler: once per collection and scheduler, and
    unpublished when the user's collection is garbage collected (so it pins nothing on the cluster)."""
    key = (id(ddf), address)
    with _lock:
        known = _published.get(key)
        if known is not None and known[0]() is ddf:
            return known[1]
        dataset = f"rlmnb-{secrets.token_hex(8)}"
        client.publish_dataset(ddf, name=dataset)
        _published[key] = (weakref.ref(ddf), dataset)
        weakref.finalize(ddf, _unpublish, client, dataset, key)
    return dataset


def _unpublish(client: Any, dataset: str, key: tuple[int, str]) -> None:
    with _lock:
        if _published.get(key, (None, ""))[1] == dataset:
            del _published[key]
    with contextlib.suppress(Exception):
        if client.status == "running":
            client.unpublish_dataset(dataset)


def _security(client: Any) -> dict[str, Any] | None:
    """The client's TLS settings (file paths or PEM text), to pass on to the kernel's client."""
    sec = getattr(client, "security", None)
    if sec is None or not (getattr(sec, "require_encryption", False) or getattr(sec, "tls_ca_file", None)):
        return None
    keys = ("require_encryption", "tls_ca_file", "tls_ciphers", "tls_min_version", "tls_max_version",
            "tls_client_key", "tls_client_cert")
    return {k: getattr(sec, k) for k in keys if getattr(sec, k, None) is not None}


def _reopen(name: str, spec: Mapping[str, Any]) -> Any:
    if spec.get("how") == "dask_graph":
        import cloudpickle

        return cloudpickle.loads(base64.b64decode(spec["graph"])).copy()
    address = str(spec["address"])
    client = _kernel_clients.get(address)
    if client is None or client.status != "running":
        client = _connect(name, address, spec)
        _kernel_clients[address] = client
    return client.get_dataset(spec["dataset"]).copy()


def _connect(name: str, address: str, spec: Mapping[str, Any]) -> Any:
    """The kernel's own client of the user's scheduler (opt-in only), the default for `.compute()` in the
    sandbox. It talks to the scheduler only (results come through it), so the scheduler is the one endpoint."""
    distributed: Any = importlib.import_module("distributed")  # untyped; only ever imported in the kernel
    options = {"timeout": spec.get("connect_timeout", CONNECT_SECONDS), "set_as_default": True,
               "direct_to_workers": False}
    if spec.get("security"):
        options["security"] = distributed.security.Security(**spec["security"])
    try:
        return distributed.Client(address, **options)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"Input {name!r}: the sandbox kernel cannot reach the Dask scheduler at {address} "
                         f"({_first_line(exc)}); let the kernel reach it, or use sandbox='local'.") from None


class PartitionStream:
    """The frame as an Arrow stream for sql(), one computed partition at a time, so DuckDB reads it out of
    core and the sandbox holds one partition at once. DuckDB asks for a fresh stream for every scan (the
    Arrow PyCapsule protocol), so the same registration serves every query. Every query reads every
    partition: aggregate with Dask itself when only a few columns or rows matter."""

    def __init__(self, ddf: Any) -> None:
        import pyarrow as pa

        self._ddf = ddf
        self.schema = pa.Schema.from_pandas(ddf._meta, preserve_index=False)

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.reader().__arrow_c_stream__(requested_schema)

    def reader(self) -> Any:
        import pyarrow as pa

        ddf, schema = self._ddf, self.schema

        def batches() -> Iterator[Any]:
            for i in range(ddf.npartitions):
                part = ddf.get_partition(i).compute()
                yield from pa.Table.from_pandas(part, schema=schema, preserve_index=False).to_batches()

        return pa.RecordBatchReader.from_batches(schema, batches())


FAMILY = Family("dask", ("dask_frame",), _describe, classes=("dask:DataFrame",), crossing=_crossing,
                reopen=_reopen, view=_view, export=_export, tables=("dask_frame",), sql=PartitionStream)


__all__ = [
    "CONNECT_SECONDS", "EXPORT_BATCH", "FAMILY", "MAX_EXPORT_BYTES", "MAX_GRAPH_BYTES", "MAX_READ_PATHS", "MAX_WALK",
    "OPT_IN", "PROBE_SECONDS", "GraphSources", "PartitionStream", "crossing_mode", "graph_sources", "known_length",
    "parquet_files", "user_client",
]
