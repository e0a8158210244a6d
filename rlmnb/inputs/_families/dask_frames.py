"""The Dask family: a Dask `DataFrame`, described without computing it and reconnected, not copied.

Summary: npartitions, dtypes (from the collection's meta), known divisions, the row count only when Dask
knows it without computing (from pandas or Parquet metadata), and the head of the first partition.

Crossing: when the user's session has a `distributed.Client`, the collection is published on its
scheduler under a private name and the sandbox kernel connects its own client to the same scheduler
(same security settings) and fetches it, so `.compute()` in the sandbox runs on the cluster's workers and
only results come back; `Field.endpoints` names the scheduler so a confined kernel may reach it. Without
a client the collection's graph crosses (cloudpickled) and runs on Dask's default scheduler in the
kernel. Sub-calls stay on the host: `llm_query` in the sandbox is a call to the host's broker, which
spends the run's one budget, whatever the cluster does.

sql() reads a Dask frame as an Arrow stream computing one partition at a time (`PartitionStream`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import os
import secrets
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._previews import cell
from rlmnb.inputs._records import Field, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables.lazytable import lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

CONNECT_SECONDS = 10.0   # the kernel's client waits this long for the scheduler
PROBE_SECONDS = 2.0      # the host checks the scheduler answers within this
MAX_READ_PATHS = 16      # above this many folders, their common parent is named instead
_kernel_clients: dict[str, Any] = {}   # in the kernel: one client per scheduler address
_published: dict[tuple[int, str], tuple[weakref.ref[Any], str]] = {}  # on the host: (id, address) -> dataset
_lock = threading.Lock()


def _describe(name: str, ddf: Any, config: RLMConfig) -> Field:
    client = user_client()
    address = str(client.scheduler.address or "") if client is not None and client.status == "running" else ""
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
    notes = [f"Dask DataFrame, {ddf.npartitions:,} partition{'s' if ddf.npartitions != 1 else ''}, not computed: "
             f"its methods build a graph and .compute() runs it" + (" on the cluster" if address else "")]
    if ddf.known_divisions:
        divisions = ddf.divisions
        notes.append(f"index divisions known: {cell(divisions[0], 30)} … {cell(divisions[-1], 30)}")
    if rows is None:
        notes.append("row count unknown (counting would compute every partition)")
    info = lazy_table_info(name, "dask_frame", type_name(ddf), [str(c) for c in meta.columns],
                           [str(t) for t in meta.dtypes], head, config,
                           rows=rows, detail="; ".join(notes))
    endpoints = (_host_port(address),) if address.startswith(("tcp://", "tls://")) else ()
    folders = sorted({os.path.dirname(f) for f in files})
    read_paths = tuple(folders) if len(folders) <= MAX_READ_PATHS else (os.path.commonpath(folders),)
    return Field(name, ddf, info, ddf.copy, endpoints=endpoints, read_paths=read_paths)  # a copy: `x["c"] = ...` never reaches ddf


def user_client() -> Any:
    """The session's default `distributed.Client`, or None (distributed is never imported here)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.Client.current(allow_global=True)  # the one `.compute()` would use
    except ValueError:
        return None


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
                         f"(distributed.Client(...)) or close it to run Dask inside the sandbox.")
    if not address.startswith(("tcp://", "tls://")):
        raise InputError(f"Input {name!r}: its Dask scheduler at {address} lives inside this Python process, "
                         f"where the sandbox kernel cannot reach it; start it with processes=True or "
                         f"protocol='tcp', or use sandbox='local'.")
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
def _crossing(field: Field) -> dict[str, Any]:
    ddf = field.source
    client = user_client()
    if client is None:
        import cloudpickle

        graph = cloudpickle.dumps(ddf)
        return {"how": "dask_graph", "path": f"dask-graph:{hashlib.sha256(graph).hexdigest()[:24]}",
                "graph": base64.b64encode(graph).decode("ascii")}
    address = _scheduler_address(field.name, client)
    dataset = _publish(ddf, client, address)
    return {"how": "dask_cluster", "path": f"{address}#{dataset}", "address": address, "dataset": dataset,
            "security": _security(client)}


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
    """The kernel's own client of the user's scheduler, the default for `.compute()` in the sandbox. It
    talks to the scheduler only (results come through it), so the scheduler is the one endpoint needed."""
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
                reopen=_reopen, tables=("dask_frame",), sql=PartitionStream)


__all__ = [
    "CONNECT_SECONDS", "FAMILY", "MAX_READ_PATHS", "PROBE_SECONDS", "PartitionStream", "known_length",
    "parquet_files", "user_client",
]
