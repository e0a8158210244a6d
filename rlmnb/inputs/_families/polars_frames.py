"""The Polars family: `DataFrame` (shipped to a kernel as Arrow IPC, like pandas) and `LazyFrame` (stays
lazy: described from its schema and a small `head`, crossed as its serialised plan).

Polars is imported only when the user's value is a Polars object (they have imported it already).
A plan is never collected whole to describe it: its optimised plan is read first, the row count is
asked for only when Polars takes it from file footers or memory, and the first rows only when no step
needs every row first (a sort, join, aggregate...; the summary says so). A filter reads until it has
found the preview's rows. (A time limit instead would need `collect(background=True)` and `.cancel()`,
which aborts the whole process in Polars 2.1: a panic in the user's kernel.)
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._filesystem import readable_root
from rlmnb.inputs._previews import SAMPLE_ROWS, sample_positions
from rlmnb.inputs._records import Field, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables.lazytable import arrow_tokens, lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

MAX_READ_PATHS = 16   # above this many scanned paths, their common parent is named instead

_ONE_LINE_ERROR = 300


def _describe_frame(name: str, df: Any, config: RLMConfig) -> Field:
    rows, ncols = df.shape
    info = lazy_table_info(name, "polars_frame", type_name(df), df.columns, [str(t) for t in df.dtypes],
                           _arrow(df.head(config.preview_rows)), config, rows=rows,
                           size_bytes=int(df.estimated_size()))
    if rows and ncols:  # in memory: tokens from rows spread over the frame, not its head
        sample = _arrow(df[[int(i) for i in sample_positions(rows, SAMPLE_ROWS)]])
        info = dataclasses.replace(info, est_tokens=arrow_tokens(sample, rows * ncols))
    return Field(name, df, info, df.clone)  # a clone shares buffers; writes to it copy, never reach df


def _describe_lazy(name: str, lf: Any, config: RLMConfig) -> Field:
    try:
        schema = lf.collect_schema()
    except Exception as exc:
        raise InputError(f"Input {name!r}: its Polars query fails before running ({_first_line(exc)}); "
                         f"fix the query, or check that the files it scans exist.") from None
    import polars as pl

    count_plan = lf.select(pl.len())
    count = int(_collect(name, count_plan).item()) if _counts_from_metadata(count_plan.explain()) else None
    head_plan = lf.head(max(config.preview_rows, 8))
    blocking = _blocking_step(head_plan.explain())
    notes = ["lazy Polars query, not collected: .head(n).collect() or .collect() in the sandbox runs it"]
    if blocking:
        notes.append(f"no preview: its first rows need the whole input ({blocking})")
        head = pl.DataFrame(schema=schema)
    else:
        head = _collect(name, head_plan)
    if count is None:
        notes.append("row count unknown (counting would scan the data)")
    info = lazy_table_info(name, "polars_lazy", type_name(lf), list(schema.names()),
                           [str(t) for t in schema.dtypes()], _arrow(head), config, rows=count,
                           detail="; ".join(notes))
    return Field(name, lf, info, lambda: lf, read_paths=scanned_paths(lf))  # plans are immutable


def _arrow(df: Any) -> Any:
    return df.to_arrow()


def _collect(name: str, lf: Any) -> Any:
    try:
        return lf.collect()
    except Exception as exc:
        raise InputError(f"Input {name!r}: its Polars query fails ({_first_line(exc)}); fix the query.") from None


def _counts_from_metadata(plan: str) -> bool:
    """True when Polars counts the rows of this plan from file footers or memory, without reading data."""
    for raw in plan.splitlines():
        line = raw.strip()
        if not line.startswith(_METADATA_COUNT_STEPS):
            return False
    return True


def _blocking_step(plan: str) -> str:
    """The first step of a `head` plan that must see every row before giving one ('' when there is none)."""
    for raw in plan.splitlines():
        line = raw.strip()
        for word, what in _BLOCKING_STEPS:
            if word in line:
                return what
    return ""


_METADATA_COUNT_STEPS = ("SELECT [len()]", "Parquet SCAN", "IPC SCAN", "PROJECT", "ESTIMATED ROWS", "DF [")
_BLOCKING_STEPS = (("SORT", "it sorts"), ("AGGREGATE", "it aggregates"), ("JOIN", "it joins"),
                   ("UNIQUE", "it removes duplicates"), ("PIVOT", "it pivots"), (".over(", "a window function"))


def scanned_paths(lf: Any) -> tuple[str, ...]:
    """What a confined kernel must read to run the plan: each scanned file, each scanned folder, and for
    a glob the longest folder before its first wildcard (Polars lists it again in the kernel: a Hive
    folder, `data/**/*.parquet`), never the folder around them."""
    roots: list[str] = []
    for path in _plan_paths(lf) or _sources(lf):
        root = readable_root(path)
        if root is not None and root not in roots:
            roots.append(root)
    if len(roots) > MAX_READ_PATHS:
        roots = [os.path.commonpath(roots)]
    return tuple(roots)


def _plan_paths(lf: Any) -> list[str]:
    """The paths and globs the plan's scans were given, as written (the JSON plan's "Paths"); [] when
    the plan cannot be written as JSON (then `explain`'s expanded file list is used)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = json.loads(lf.serialize(format="json"))
    except Exception:
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "Paths" and isinstance(value, list):
                    found.extend(e["inner"] for e in value if isinstance(e, dict) and isinstance(e.get("inner"), str))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan)
    return found


def _sources(lf: Any) -> list[str]:
    """The files (or globs) the plan's scans name, as `explain` lists them."""
    try:
        plan = lf.explain(optimized=False)
    except Exception:
        return []
    found: list[str] = []
    for line in plan.splitlines():
        if " SCAN [" in line:
            inside = line.split(" SCAN [", 1)[1].rsplit("]", 1)[0]
            found += [p.strip() for p in inside.split(", ") if p.strip() and " other " not in p]
    return found


def _absolute(lf: Any) -> Any:
    """The plan with relative file paths made absolute: the sandbox kernel runs in a directory of its own.
    Polars' JSON plan is the one form whose paths can be rewritten; it is used only when needed."""
    if all(os.path.isabs(p) or "://" in p for p in _sources(lf)):
        return lf
    import polars as pl

    def absolute(entry: Any) -> Any:  # one scan source: {"inner": "data/x.parquet"}
        path = entry.get("inner") if isinstance(entry, dict) else None
        return {**entry, "inner": os.path.abspath(path)} if isinstance(path, str) and "://" not in path else entry

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: [absolute(e) for e in v] if k == "Paths" and isinstance(v, list) else fix(v)
                    for k, v in node.items()}
        return [fix(v) for v in node] if isinstance(node, list) else node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = json.loads(lf.serialize(format="json"))
        return pl.LazyFrame.deserialize(io.StringIO(json.dumps(fix(plan))), format="json")


def _first_line(exc: BaseException) -> str:
    """The error on one line (Polars puts the cause on a later line: "serialization failed ... error: ...")."""
    line = ": ".join(t.strip() for t in str(exc).splitlines() if t.strip()) or type(exc).__name__
    return line if len(line) <= _ONE_LINE_ERROR else line[: _ONE_LINE_ERROR - 1] + "…"


# ---- crossing into the kernel sandbox -----------------------------------------------------------------------
def _crossing(field: Field) -> dict[str, Any] | None:
    if field.info.kind != "polars_lazy":
        return None  # a DataFrame's data is shipped as Arrow IPC (sandbox/transfer.py)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = _absolute(field.source).serialize()
    except Exception as exc:
        raise InputError(f"Input {field.name!r}: its Polars query cannot be sent to the kernel sandbox "
                         f"({_first_line(exc)}); pass {field.name}.collect() instead, or use sandbox='local'.") from None
    digest = hashlib.sha256(plan).hexdigest()[:24]  # the kernel binds an unchanged plan only once
    return {"how": "polars_plan", "path": f"polars-plan:{digest}", "plan": base64.b64encode(plan).decode("ascii")}


def _reopen(name: str, spec: Mapping[str, Any]) -> Any:
    import polars as pl

    try:
        return pl.LazyFrame.deserialize(io.BytesIO(base64.b64decode(spec["plan"])))
    except Exception as exc:
        raise InputError(f"Input {name!r}: the sandbox kernel cannot rebuild its Polars query "
                         f"({_first_line(exc)}); pass {name}.collect() instead.") from None


def _view(name: str, raw: Any) -> Any:
    import polars as pl

    return pl.from_arrow(raw)


def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    if any(c.__name__ == "LazyFrame" for c in type(value).__mro__):
        return _describe_lazy(name, value, config)
    return _describe_frame(name, value, config)


FAMILY = Family("polars", ("polars_frame", "polars_lazy"), _describe,
                classes=("polars:DataFrame", "polars:LazyFrame"), crossing=_crossing, reopen=_reopen, view=_view,
                tables=("polars_frame", "polars_lazy"), sql=lambda value: value)


__all__ = ["FAMILY", "MAX_READ_PATHS", "scanned_paths"]
