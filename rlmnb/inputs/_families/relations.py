"""The DuckDB relation family: a lazy query the user built with DuckDB, kept lazy.

A relation is a query bound to the user's connection. It reaches the sandbox one of three ways:

- its SQL runs on a fresh connection (it reads files or table functions): the sandbox re-creates it
  from that SQL on rlmnb's own DuckDB database (the kernel with the host's working directory as the
  file search path), so nothing is copied and model code never uses the user's connection;
- it reads tables of database files its connection has open read-only (duckfiles.py): the kernel
  attaches those files read-only and runs the SQL there, nothing copied; the local sandbox (the same
  process, where DuckDB refuses a second instance of a file) runs the SQL on cursors of its own of the
  user's database instance, so sql() streams it and model code never holds the user's connection;
- otherwise (in-memory tables, Python objects, query parameters, a database file open for writing,
  which DuckDB locks against other processes): the local sandbox reads through a projection of the
  user's relation and a kernel sandbox receives its result once as Arrow IPC; the summary says why.

What model code gets is never a table relation, so `insert` and `update` (which DuckDB allows only on
table relations) are refused. Describing never runs the query over all rows: the row count is what
the plan knows (duckplan.py: exact for a table or one Parquet file, an estimate for several files,
unknown after a filter or a join) and the sample is `LIMIT 5`, skipped when a step of the plan would
first consume more than SAMPLE_INPUT_ROWS rows or (on a cursor of ours) after SAMPLE_SECONDS.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._brief import SAMPLE_ROWS, _clip_end, _human_count
from rlmnb.inputs._records import Field
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.duckfiles import open_attached, open_local, paths_in, probe, scan_files
from rlmnb.inputs._tables.duckplan import PlanFacts, plan_facts, sql_facts
from rlmnb.inputs._tables.lazytable import lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

PYTHON_TYPE = "duckdb.DuckDBPyRelation"
SAMPLE_INPUT_ROWS = 1_000_000  # a sample that needs a GROUP BY / ORDER BY / join over more rows is skipped
SAMPLE_SECONDS = 0.25         # ... or that takes longer than this to find its first rows


def portable_sql(rel: Any) -> tuple[str, PlanFacts | None] | None:
    """(SQL, its plan's facts) when the relation's SQL runs on rlmnb's own database (it reads only files
    and table functions), else None. Planning it there is the test: one bind, no rows read."""
    try:
        text = str(rel.sql_query())
    except Exception:
        return None
    cur = duck.cursor()
    try:
        cur.execute("SET python_enable_replacements = false")  # a pandas frame found by name is not portable
        cur.execute(f"SET file_search_path = {duck.literal(os.getcwd())}")
        return text, sql_facts(cur, text)
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        return None
    finally:
        cur.close()


def _open(plan: Mapping[str, Any]) -> Any:
    if plan.get("attach"):
        return open_attached(plan).sql(str(plan["sql"]))
    cur = duck.cursor()
    if plan.get("cwd"):
        cur.execute(f"SET file_search_path = {duck.literal(str(plan['cwd']))}")
    return cur.sql(str(plan["sql"]))


def _sample(name: str, rel: Any, facts: PlanFacts | None, cur: Any = None, text: str = "") -> Any:
    """`LIMIT 5` of the relation, or None when it would cost more than a glance: the plan must consume
    over SAMPLE_INPUT_ROWS rows first, or (run on a cursor of ours, which can be interrupted) the first
    rows take longer than SAMPLE_SECONDS to find, e.g. behind a filter that few rows pass."""
    if facts is not None and facts.blocked is not None and facts.blocked > SAMPLE_INPUT_ROWS:
        return None
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        cur.interrupt()

    timer = threading.Timer(SAMPLE_SECONDS, stop) if cur is not None else None
    try:
        if timer is None:
            return rel.limit(SAMPLE_ROWS).to_arrow_table()
        timer.start()
        return cur.sql(f"SELECT * FROM ({text}) AS _rlmnb_sample LIMIT {SAMPLE_ROWS}").to_arrow_table()
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        if fired.is_set():
            return None
        raise InputError(f"Input {name!r}: the DuckDB relation fails when run ({_clip_end(duck.message(exc), 300)}); "
                         f"fix its query before binding it.") from None
    finally:
        if timer is not None:
            timer.cancel()


def _exact_if_one_file(text: str, estimate: int | None) -> tuple[int | None, bool]:
    """(rows, estimated) of a bare Parquet scan. DuckDB's plan takes the first file's footer count times the
    number of files: exact for one file, an estimate (marked) for more, whose footers are not read, so
    describing costs the same for one file or 4,000 (a file table, `Path(folder)`, sums every footer)."""
    return (estimate, False) if scan_files(text) == 1 else (estimate, True)


def _rows_note(facts: PlanFacts | None) -> str:
    if facts is None or facts.rows is not None:
        return ""
    guess = f" (DuckDB's planner guesses ~{_human_count(facts.guess)})" if facts.guess is not None else ""
    return f"rows unknown until counted{guess}; "


def _describe(name: str, rel: Any, config: RLMConfig) -> Field:
    import pyarrow as pa

    columns, types = list(rel.columns), [str(t) for t in rel.types]
    portable = portable_sql(rel)
    text, facts = portable if portable is not None else (None, plan_facts(rel))
    plan: dict[str, Any] | None = None
    reads: tuple[str, ...] = ()
    runner: Any = None
    if text is not None:
        plan, reads = {"sql": text, "cwd": os.getcwd()}, paths_in([text])
        how = "reopened from its SQL in the sandbox (nothing copied)"
        runner = duck.cursor()
        runner.execute(f"SET file_search_path = {duck.literal(os.getcwd())}")
    else:
        files = probe(rel, facts)
        if files is not None and files.plan is not None:
            plan, reads = files.plan, files.read_paths
            names = ", ".join(os.path.basename(p) for _a, p in files.plan["attach"])
            how = f"reads {names}: a kernel sandbox attaches it read-only and reruns the query (nothing copied)"
            fresh = open_local(plan)
            runner = fresh() if fresh is not None else None
        elif files is not None:
            how = f"a kernel sandbox gets its result once as Arrow IPC: {files.reason}"
        else:
            how = ("it reads tables of your DuckDB connection: the local sandbox uses it as is, a kernel sandbox "
                   "gets its result once as Arrow IPC")
    try:
        head = _sample(name, rel, facts, runner, str(plan["sql"]) if plan is not None else "")
    finally:
        if runner is not None:
            runner.close()
    sample_note = "" if head is not None else "no sample (its first rows cost more than a glance to find); "
    if head is None:
        head = pa.schema([pa.field(c, pa.null()) for c in columns]).empty_table()
    rows, estimated = (facts.rows, facts.estimated) if facts is not None else (None, False)
    if estimated and text is not None:  # a bare Parquet scan
        rows, estimated = _exact_if_one_file(text, rows)
    detail = f"lazy DuckDB query; {_rows_note(facts)}{sample_note}{how}"
    info = lazy_table_info(name, "relation", PYTHON_TYPE, columns, types, head, config, rows=rows,
                           estimated=estimated, detail=detail)
    if plan is not None and text is not None:
        frozen = plan
        return Field(name, rel, info, lambda: _open(frozen), read_paths=reads, plan=plan)
    if plan is not None:
        frozen = plan
        return Field(name, rel, info, lambda: _open_local(rel, frozen), read_paths=reads, plan=plan)
    return Field(name, rel, info, lambda: rel.project("*"))


_streams: dict[int, tuple[weakref.ref[Any], Callable[[], Any]]] = {}
_streams_lock = threading.Lock()


def _open_local(rel: Any, plan: Mapping[str, Any]) -> Any:
    """The local sandbox's view of a relation over database files: the same SQL on a cursor of its own."""
    fresh = open_local(plan)
    if fresh is None:
        return rel.project("*")
    text = str(plan["sql"])
    view = fresh().sql(text)
    key = id(view)
    with _streams_lock:
        for k in [k for k, (ref, _f) in _streams.items() if ref() is None]:
            del _streams[k]
        _streams[key] = (weakref.ref(view), lambda: fresh().sql(text))
    return view


def _crossing(field: Field) -> dict[str, Any] | None:
    if field.plan is None:
        return None  # shipped once as Arrow IPC (see `export`)
    digest = hashlib.sha1(str(field.plan["sql"]).encode("utf-8")).hexdigest()[:16]
    return {"how": "reopen", "path": f"sql:{digest}", "plan": dict(field.plan)}


class RelationStream:
    """A relation of the user's database instance as an Arrow stream for sql(): DuckDB asks for a fresh
    stream at every scan (the Arrow PyCapsule protocol) and each one runs the relation's SQL on a new
    cursor, so a query may read several relations of one database at once, and nothing is copied."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._schema = make().limit(0).to_arrow_table().schema

    def __arrow_c_schema__(self) -> Any:
        return self._schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._make().to_arrow_reader().__arrow_c_stream__(requested_schema)


def _sql(relation: Any) -> Any:
    """What sql() registers: a relation over database files as a stream; others as they are (rlmnb's own
    database scans its relations directly; the engine copies a relation of another database once)."""
    with _streams_lock:
        found = _streams.get(id(relation))
    if found is not None and found[0]() is relation:
        return RelationStream(found[1])
    return relation


FAMILY = Family("duckdb", ("relation",), _describe, classes=("duckdb:DuckDBPyRelation", "_duckdb:DuckDBPyRelation"),
                crossing=_crossing, reopen=lambda _name, spec: _open(spec["plan"]),
                view=lambda _name, table: duck.cursor().from_arrow(table), tables=("relation",),
                sql=_sql, export=lambda rel: rel.to_arrow_table())
