"""What DuckDB's optimiser knows about a relation before running it: rows, scans, blocking steps.

Describing a relation must cost the same for ten rows or a billion, so it never counts by running
the query. `EXPLAIN (FORMAT json)` only binds and plans (a few ms): its root cardinality is exact for
a plain scan of a DuckDB table (the storage keeps the row count) and an estimate otherwise (a Parquet
scan extrapolates from its first file's footer; a filter or a join is a guess). Its leaves say what
the query reads (fully qualified tables, file readers, Python objects), which is how relations.py
decides whether the kernel can rebuild the relation, and its operators say whether a `LIMIT` stops
early (a scan, a filter) or must first consume everything (a GROUP BY, an ORDER BY, a join's build).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlmnb.inputs._tables import duck

# Operators that pass rows on as they come, so `LIMIT k` over them stops after k rows.
_STREAMING = frozenset({"PROJECTION", "FILTER", "STREAMING_LIMIT", "LIMIT", "UNION", "UNNEST",
                        "CROSS_PRODUCT", "TABLE_SCAN", "SEQ_SCAN", "INDEX_SCAN", "COLUMN_DATA_SCAN",
                        "DUMMY_SCAN", "EMPTY_RESULT", "EXPRESSION_SCAN", "RESULT_COLLECTOR"})
# Leaves that read only files or compute rows from nothing: the same SQL gives the same rows elsewhere.
_PORTABLE = frozenset({"PARQUET_SCAN", "RANGE", "GENERATE_SERIES", "UNNEST", "COLUMN_DATA_SCAN", "DUMMY_SCAN",
                       "EMPTY_RESULT", "CTE_SCAN", "DELIM_SCAN", "CHUNK_SCAN", "EXPRESSION_SCAN",
                       "RECURSIVE_CTE_SCAN", "GLOB"})
_TABLE_SCANS = frozenset({"SEQ_SCAN", "TABLE_SCAN", "INDEX_SCAN"})
_PROBE = "_rlmnb_probe"


@dataclass(frozen=True)
class PlanFacts:
    """What a relation's optimised plan says, without running it.

    rows:      the result's row count when the plan knows it exactly or estimates it from metadata
               (None: only a guess is possible, e.g. after a filter or a join)
    estimated: `rows` is an estimate (a multi-file Parquet scan)
    guess:     the planner's estimate of the result's rows (after filters and joins: a guess)
    scanned:   the largest estimated row count of any scan in the plan
    tables:    base tables read, as "catalog.schema.table"
    foreign:   leaves that read something other than files or tables (a Python object, another
               database system): the relation cannot be rebuilt from its SQL in another process
    blocked:   the most rows a step must consume before the first result row (under a GROUP BY, an
               ORDER BY, a join's build side), None when every step streams: `LIMIT` stops early
    """

    rows: int | None
    estimated: bool
    guess: int | None
    scanned: int | None
    tables: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()
    blocked: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tables"], out["foreign"] = list(self.tables), list(self.foreign)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlanFacts:
        return cls(d.get("rows"), bool(d.get("estimated")), d.get("guess"), d.get("scanned"), tuple(d.get("tables", ())),
                   tuple(d.get("foreign", ())), d.get("blocked"))


def plan_facts(rel: Any) -> PlanFacts | None:
    """The facts of `rel`'s plan on its own connection, or None when DuckDB cannot explain it."""
    try:
        rows = rel.query(_PROBE, f"EXPLAIN (FORMAT json) SELECT * FROM {_PROBE}").fetchall()
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        return None
    return _read(rows)


def sql_facts(cur: Any, text: str) -> PlanFacts | None:
    """The facts of query `text` planned on cursor `cur`; DuckDB's errors (it does not bind there) propagate."""
    return _read(cur.sql(f"EXPLAIN (FORMAT json) SELECT * FROM ({text}) AS {_PROBE}").fetchall())


def _read(rows: Any) -> PlanFacts | None:
    try:
        tree = json.loads(rows[0][1])
    except (ValueError, IndexError, TypeError):
        return None
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], dict):
        return None
    return facts_of(tree[0])


def facts_of(root: Mapping[str, Any]) -> PlanFacts:
    """PlanFacts of one EXPLAIN (FORMAT json) tree."""
    tables: list[str] = []
    foreign: list[str] = []
    scanned: list[int] = []
    blocked: list[int] = []
    stack: list[tuple[Mapping[str, Any], bool]] = [(root, False)]
    while stack:
        node, held = stack.pop()  # held: the rows of this subtree are consumed whole before any result
        name = str(node.get("name", "")).strip().upper()
        extra = node.get("extra_info") or {}
        children = node.get("children") or []
        if children:
            if name in _STREAMING:
                stack.extend((c, held) for c in children)
            elif "JOIN" in name:  # the probe side (first child) streams, the build side is read whole
                stack.append((children[0], held))
                stack.extend((c, True) for c in children[1:])
            else:
                stack.extend((c, True) for c in children)
            continue
        table = extra.get("Table") if isinstance(extra, dict) else None
        card = _cardinality(node)
        if card is not None:
            scanned.append(card)
            if held:
                blocked.append(card)
        if name in _TABLE_SCANS and table:
            tables.append(str(table))
        elif not (name in _PORTABLE or name.startswith("READ_")):
            foreign.append(name)
    top = root
    while str(top.get("name", "")).strip().upper() == "PROJECTION" and len(top.get("children") or []) == 1:
        top = top["children"][0]  # projections keep the row count: look at what they project
    bare = not (top.get("children") or []) and not _filtered(top)
    top_name = str(top.get("name", "")).strip().upper()
    rows, estimated = None, False
    if bare and (top_name in _TABLE_SCANS or top_name in ("PARQUET_SCAN", "READ_PARQUET")):
        rows = _cardinality(top)
        estimated = top_name not in _TABLE_SCANS  # a table keeps its count; Parquet extrapolates one footer
    return PlanFacts(rows, estimated, _cardinality(root), max(scanned) if scanned else None, tuple(dict.fromkeys(tables)),
                     tuple(dict.fromkeys(foreign)), max(blocked) if blocked else None)


def _cardinality(node: Mapping[str, Any]) -> int | None:
    extra = node.get("extra_info") or {}
    value = extra.get("Estimated Cardinality") if isinstance(extra, dict) else None
    try:
        return int(str(value).lstrip("~").replace(",", "")) if value is not None else None
    except ValueError:
        return None


def _filtered(node: Mapping[str, Any]) -> bool:
    extra = node.get("extra_info") or {}
    return isinstance(extra, dict) and any(k in extra for k in ("Filters", "File Filters", "Dynamic Filters"))
