"""The DuckDB relation family: a lazy query the user built with DuckDB, kept lazy.

A relation is a query bound to the user's connection. When its SQL runs on a fresh connection (it
reads files or table functions, not tables of the user's database) it is *reopenable*: the sandbox
re-creates it from that SQL on rlmnb's own DuckDB database (the kernel sandbox too, with the host's
working directory as the file search path), so nothing is copied and the user's connection is never
used by model code. Otherwise (a relation over the user's in-memory tables) the local sandbox uses the
relation as is, and a kernel sandbox receives its result once as Arrow IPC; the summary says so.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import duck
from .brief import SAMPLE_ROWS, _clip_end
from .lazytable import bounded_count, lazy_table_info
from .records import Field
from .registry import Family

if TYPE_CHECKING:
    from ..config import RLMConfig

PYTHON_TYPE = "duckdb.DuckDBPyRelation"
_QUOTED = re.compile(r"'((?:[^']|'')+)'")


def replayable_sql(rel: Any) -> str | None:
    """The relation's SQL when it runs on rlmnb's own database (reads only files/table functions)."""
    try:
        text = rel.sql_query()
    except Exception:
        return None
    cur = duck.cursor()
    try:
        cur.sql(f"SELECT * FROM ({text}) LIMIT 0").fetchall()
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        return None
    finally:
        cur.close()
    return str(text)


def _open(plan: Mapping[str, Any]) -> Any:
    cur = duck.cursor()
    if plan.get("cwd"):
        cur.execute(f"SET file_search_path = {duck.literal(str(plan['cwd']))}")
    return cur.sql(str(plan["sql"]))


def _paths_in(sql: str) -> tuple[str, ...]:
    """Existing files and folders named by string literals in the SQL (what a confined kernel must read)."""
    found = []
    for m in _QUOTED.finditer(sql):
        path = os.path.abspath(m.group(1).replace("''", "'"))
        if os.path.exists(path) and path not in found:
            found.append(path)
        elif any(c in path for c in "*?[") and os.path.isdir(os.path.dirname(path.split("*")[0])):
            found.append(os.path.dirname(path.split("*")[0]))
    return tuple(found)


def _describe(name: str, rel: Any, config: RLMConfig) -> Field:
    columns, types = list(rel.columns), [str(t) for t in rel.types]
    text = replayable_sql(rel)
    try:
        head = rel.limit(SAMPLE_ROWS).to_arrow_table()
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        raise InputError(f"Input {name!r}: the DuckDB relation fails when run ({_clip_end(duck.message(exc), 300)}); "
                         f"fix its query before binding it.") from None
    if text is not None:
        cur = duck.cursor()
        cur.execute(f"SET file_search_path = {duck.literal(os.getcwd())}")
        rows = bounded_count(cur, text)
        cur.close()
        plan: dict[str, Any] | None = {"sql": text, "cwd": os.getcwd()}
        how = "reopened from its SQL in the sandbox (nothing copied)"
    else:
        rows, plan = None, None
        how = ("it reads tables of your DuckDB connection: the local sandbox uses it as is, a kernel sandbox "
               "gets its result once as Arrow IPC")
    count = "" if rows is not None else "rows unknown until counted (the count took too long at bind time); "
    detail = f"lazy DuckDB query; {count}{how}" if text is not None else f"lazy DuckDB query; {how}"
    info = lazy_table_info(name, "relation", PYTHON_TYPE, columns, types, head, config, rows=rows, detail=detail)
    if plan is not None:
        frozen = plan
        return Field(name, rel, info, lambda: _open(frozen), read_paths=_paths_in(str(plan["sql"])), plan=plan)
    return Field(name, rel, info, lambda: rel)


def _crossing(field: Field) -> dict[str, Any] | None:
    if field.plan is None:
        return None  # shipped once as Arrow IPC (see `export`)
    digest = hashlib.sha1(str(field.plan["sql"]).encode("utf-8")).hexdigest()[:16]
    return {"how": "reopen", "path": f"sql:{digest}", "plan": dict(field.plan)}


FAMILY = Family("duckdb", ("relation",), _describe, classes=("duckdb:DuckDBPyRelation", "_duckdb:DuckDBPyRelation"),
                crossing=_crossing, reopen=lambda _name, spec: _open(spec["plan"]),
                view=lambda _name, table: duck.cursor().from_arrow(table), tables=("relation",),
                sql=lambda relation: relation, export=lambda rel: rel.to_arrow_table())
