"""The one registry of input families: which family a value belongs to, and binding through it.

A value is recognised by its type's module and class name (and those of its bases), so a library the
user has not imported is never imported here; stdlib values (str, Path, Mapping...) by a predicate.
See the package docstring for the `Family` protocol and how to add one.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from rlmnb._ground.errors import InputError
from rlmnb.inputs._records import SUPPORTED, Field, type_name

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

# One line per family, in the order predicates are tried (class-name matches are tried first).
FAMILY_MODULES = (
    "files",        # pathlib.Path, DirectoryView, GlobFiles: files, folders, globs (tables in files first)
    "text",         # str, bytes, bytearray, memoryview
    "frames",       # pandas DataFrame, Series
    "arrow",        # pyarrow Table, RecordBatch
    "datasets",     # pyarrow.dataset.Dataset
    "relations",    # duckdb relations
    "arrays",       # numpy ndarray
    "containers",   # scalars, Mappings, Sequences
    "polars_frames",  # polars DataFrame, LazyFrame
    "dask_frames",  # dask DataFrame (a distributed cluster's collections too)
    "documents",    # PDF, Office, HTML, Markdown and mail files, folders and globs (reached through files)
    "image_folders",  # folders and globs of PNG, JPEG, GIF, WebP images (reached through files)
)


@dataclass(frozen=True)
class Family:
    """How one family of values is bound, seen, moved to a kernel and queried with sql().

    describe:  (name, value, config) -> Field, from metadata and a bounded sample, never a full scan;
               the Field's loader is the local sandbox's read-only view.
    classes:   "module:Class" names recognised on the value's type or its bases (module = top package).
    accepts:   a predicate for values without a class match (stdlib types); tried in registry order.
    crossing:  Field -> a JSON-able spec the kernel reopens the input from (a path, SQL, a plan, an
               address), or None to ship the data itself as a file (Arrow IPC, .npy, text, pickle).
    reopen:    (name, spec) -> the kernel's view of a crossed input (runs inside the sandbox kernel).
    view:      (name, shipped value) -> the kernel's read-only view of shipped data (default: as is).
    export:    (source) -> a pyarrow Table to ship when `crossing` gives None and the value is not one the
               transfer module writes itself (a relation over in-memory tables, an in-memory dataset).
    tables:    the kinds of this family that sql() registers as tables.
    sql:       (loaded value) -> something DuckDB can scan (a relation, Arrow, pandas) for those kinds.
    relations: (loaded value) -> more relations than the one under the input's name, name -> a function
               giving what DuckDB scans; sql() makes and registers one only when a query names it (the
               sheets of a workbook).
    """

    name: str
    kinds: tuple[str, ...]
    describe: Callable[[str, Any, RLMConfig], Field]
    classes: tuple[str, ...] = ()
    accepts: Callable[[Any], bool] | None = None
    crossing: Callable[[Field], dict[str, Any] | None] | None = None
    reopen: Callable[[str, Mapping[str, Any]], Any] | None = None
    view: Callable[[str, Any], Any] | None = None
    export: Callable[[Any], Any] | None = None
    tables: tuple[str, ...] = ()
    sql: Callable[[Any], Any] | None = None
    relations: Callable[[Any], Mapping[str, Callable[[], Any]]] | None = None


_lock = threading.Lock()
_families: tuple[Family, ...] | None = None
_by_class: dict[tuple[str, str], Family] = {}
_by_kind: dict[str, Family] = {}
_class_cache: dict[type, Family | None] = {}


def families() -> tuple[Family, ...]:
    """Every registered family, imported on first use (family modules import no optional library)."""
    global _families
    if _families is None:
        with _lock:
            if _families is None:
                found = tuple(importlib.import_module(f"rlmnb.inputs._families.{m}").FAMILY for m in FAMILY_MODULES)
                for fam in found:
                    for spec in fam.classes:
                        module, cls = spec.split(":")
                        _by_class[(module, cls)] = fam
                    for kind in fam.kinds:
                        _by_kind[kind] = fam
                _families = found
    return _families


def family_of_kind(kind: str) -> Family | None:
    families()
    return _by_kind.get(kind)


def sql_kinds() -> frozenset[str]:
    """The kinds whose inputs sql() registers as tables."""
    return frozenset(k for fam in families() for k in fam.tables)


def recognise(value: Any) -> Family | None:
    """The family of `value`, or None when no family takes it."""
    fams = families()
    t = type(value)
    if t not in _class_cache:
        _class_cache[t] = next((f for c in t.__mro__ if (f := _by_class.get((c.__module__.split(".")[0],
                                                                              c.__name__))) is not None), None)
    found = _class_cache[t]
    if found is not None:
        return found
    for fam in fams:
        if fam.accepts is not None and fam.accepts(value):
            return fam
    return None


def describe(name: str, value: Any, config: RLMConfig) -> Field:
    """One input as a Field. Raises InputError for a bad name, a missing path or an unsupported kind."""
    if not isinstance(name, str) or not name.isidentifier():
        raise InputError(f"Input name {name!r} is not a valid Python identifier; use letters, digits and "
                         "underscores, not starting with a digit.")
    fam = recognise(value)
    if fam is None:
        unsupported(name, value)
    return fam.describe(name, value, config)


def unsupported(name: str, value: Any, where: str = "") -> NoReturn:
    hint = " (pass pathlib.Path(...) for a file)" if hasattr(value, "read") and hasattr(value, "seek") else ""
    if isinstance(value, set):
        hint = " (pass sorted(x) or list(x) for a set)"
    what = f"{where} is {type_name(value)}" if where else type_name(value)
    raise InputError(f"Input {name!r}: {what} is not a supported kind of input{hint}; supported: {SUPPORTED}.")


# ---- crossing into the kernel sandbox ------------------------------------------------------------------
def crossing_spec(field: Field) -> dict[str, Any] | None:
    """How the kernel reopens `field` without its data (a path, SQL...), or None to ship the data."""
    fam = family_of_kind(field.info.kind)
    if fam is None or fam.crossing is None:
        return None
    return fam.crossing(field)


def exporter(kind: str) -> Callable[[Any], Any] | None:
    """How a kind that cannot be reopened becomes one Arrow table for the kernel, or None."""
    fam = family_of_kind(kind)
    return fam.export if fam is not None else None


def kernel_loader(spec: Mapping[str, Any], load_shipped: Callable[[Mapping[str, Any]], Any]) -> Callable[[], Any]:
    """Inside the kernel: how inputs[name] is made from its spec, with the same view as on the host.

    `load_shipped` reads shipped data back (`sandbox.transfer.load_spec`); reopened inputs never use it.
    """
    name, kind = spec["name"], spec["kind"]
    fam = family_of_kind(kind)
    if fam is not None and fam.reopen is not None and spec.get("how") not in _SHIPPED:
        reopen = fam.reopen
        return lambda: reopen(name, spec)
    view = fam.view if fam is not None else None

    def load() -> Any:
        raw = load_shipped(spec)
        return view(name, raw) if view is not None else raw

    return load


_SHIPPED = frozenset({"text", "bytes", "arrow", "npy", "pickle"})


__all__ = [
    "FAMILY_MODULES", "Family", "crossing_spec", "describe", "exporter", "families", "family_of_kind",
    "kernel_loader", "recognise", "sql_kinds", "unsupported",
]
