"""The DuckDB relation family: a lazy query the user built with DuckDB, kept lazy.

A relation is a query bound to the user's connection. It reaches the sandbox one of three ways:

- its SQL runs on a fresh connection (it reads files or table functions): the sandbox re-creates it
  from that SQL on rlmnb's own DuckDB database (the kernel with the host's working directory as the
  file search path), so nothing is copied and model code never uses the user's connection;
- it reads tables of database files its connection has open read-only (`probe`, below): the kernel
  attaches those files read-only and runs the SQL there, nothing copied; the local sandbox (the same
  process, where DuckDB refuses a second instance of a file) runs the SQL on cursors of its own of the
  user's database instance, so sql() streams it and model code never holds the user's connection;
- otherwise (in-memory tables, Python objects, query parameters, a database file open for writing,
  which DuckDB locks against other processes): the local sandbox reads through a projection of the
  user's relation and a kernel sandbox receives its result once as Arrow IPC; the summary says why.

What model code gets is never a table relation, so `insert` and `update` (which DuckDB allows only on
table relations) are refused. Describing never runs the query over all rows: the row count is what
the plan knows (`plan_facts`, below: exact for a table or one Parquet file, an estimate for several files,
unknown after a filter or a join) and the sample is `LIMIT 5`, skipped when a step of the plan would
first consume more than SAMPLE_INPUT_ROWS rows or (on a cursor of ours) after SAMPLE_SECONDS.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb.inputs._filesystem import readable_root
from rlmnb.inputs._previews import SAMPLE_ROWS, human_count
from rlmnb.inputs._records import Field
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.lazytable import lazy_table_info

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig


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


_QUOTED = re.compile(r"'((?:[^']|'')+)'")


@dataclass(frozen=True)
class FileDatabases:
    """Whether a relation can be rebuilt from its database files: the plan, or the reason it cannot."""

    plan: dict[str, Any] | None
    reason: str
    read_paths: tuple[str, ...] = ()


_CONNECTION = """
SELECT (SELECT list([database_name, path, readonly::VARCHAR, type]) FROM duckdb_databases() WHERE NOT internal),
       current_database(), current_schema(),
       (SELECT list([database_name, view_name, sql, temporary::VARCHAR]) FROM duckdb_views() WHERE NOT internal)
"""  # one round trip; duckdb_views() is the slow part


def probe(rel: Any, facts: PlanFacts | None) -> FileDatabases | None:
    """How the kernel reopens `rel` over its connection's database files; None when it reads no such file."""
    try:
        dbs, current_db, current_schema, views = _rows(rel, _CONNECTION)[0]
        text = str(rel.sql_query())
    except Exception as exc:
        if not duck.is_error(exc):
            raise
        return None
    files = {str(n): (os.path.abspath(str(p)), ro == "true") for n, p, ro, kind in dbs or []
             if p and str(kind).lower() == "duckdb" and str(p) != ":memory:"}
    if not files:
        return None
    if facts is None:
        return FileDatabases(None, "DuckDB could not plan it without running it")
    outside = [t for t in facts.tables if _catalog(t) not in files]
    if facts.foreign or outside:
        what = facts.foreign[0] if facts.foreign else f"table {outside[0]}"
        return FileDatabases(None, f"it reads {what}, which exists only in this Python process")
    memory_views = [v for db, v, _sql, temp in views or [] if temp == "true" or db not in files]
    if memory_views:
        return FileDatabases(None, f"its connection also holds a view {memory_views[0]} outside the database files, "
                                   f"which another process cannot see")
    strange = _unportable(rel, text, set(files))
    if strange:
        return FileDatabases(None, strange)
    writable = [n for n, (_p, ro) in files.items() if not ro]
    if writable:
        path = files[writable[0]][0]
        return FileDatabases(None, f"your connection has {os.path.basename(path)} open for writing, which locks it "
                                   f"against other processes (open it with duckdb.connect(path, read_only=True) to "
                                   f"have it reopened with nothing copied)")
    plan = {"sql": text, "cwd": os.getcwd(), "attach": [[n, p] for n, (p, _ro) in files.items()],
            "use": [str(current_db), str(current_schema)]}
    reads = [p for _n, (p, _ro) in files.items()]
    reads += [p + ".wal" for p in reads if os.path.exists(p + ".wal")]
    return FileDatabases(plan, "", tuple(reads) + tuple(paths_in([text, *(str(sql) for _db, _v, sql, _t in views or [] if sql)])))


_builtin: frozenset[str] | None = None


def _unportable(rel: Any, text: str, files: set[str]) -> str:
    """Why the SQL text alone cannot rebuild the relation elsewhere, or '': it has query parameters (their
    values are not in the text), or calls a function that is neither DuckDB's own nor a macro stored in
    one of `files` (a temporary macro, a Python UDF). DuckDB's own parser lists both; the user's function
    list (slow) is read only when the SQL calls a name DuckDB does not ship."""
    global _builtin
    cur = duck.cursor()
    try:
        if _builtin is None:
            _builtin = frozenset(str(r[0]).lower() for r in cur.sql(
                "SELECT DISTINCT function_name FROM duckdb_functions()").fetchall())
        tree = json.loads(cur.sql(f"SELECT json_serialize_sql({duck.literal(text)})").fetchall()[0][0])
    finally:
        cur.close()
    called: list[str] = []
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("function_name"), str):
                called.append(node["function_name"].lower())
            if node.get("class") == "PARAMETER":
                return "its query has parameters, whose values its SQL text does not carry"
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    unknown = sorted({c for c in called if c not in _builtin})
    if not unknown:
        return ""
    names = ", ".join(duck.literal(n) for n in unknown)
    stored = {str(n).lower() for n, in _rows(rel, f"SELECT function_name FROM duckdb_functions() WHERE "
                                                  f"lower(function_name) IN ({names}) AND database_name IN "
                                                  f"({', '.join(duck.literal(f) for f in files)})")}
    missing = next((n for n in unknown if n not in stored), "")
    return f"it calls {missing}(), which exists only in this Python process" if missing else ""


def open_attached(plan: Mapping[str, Any]) -> Any:
    """A cursor of rlmnb's database with the plan's files attached read-only and its schema in use."""
    cur = duck.cursor()
    for alias, path in plan.get("attach", ()):
        known = cur.sql(f"SELECT path FROM duckdb_databases() WHERE database_name = {duck.literal(alias)}").fetchall()
        if known and os.path.abspath(str(known[0][0] or "")) == os.path.abspath(path):
            continue
        if known:
            raise InputError(f"the DuckDB database {path} cannot be attached as {alias!r}: another input's database "
                             f"already uses that name; bind relations of databases with different file names.")
        try:
            cur.execute(f"ATTACH {duck.literal(path)} AS {duck.ident(alias)} (READ_ONLY)")
        except Exception as exc:
            if not duck.is_error(exc):
                raise
            raise InputError(f"the DuckDB database {path} cannot be opened read-only here "
                             f"({duck.message(exc)}); close other connections that write to it, or use "
                             f"sandbox='local'.") from None
    if plan.get("cwd"):
        cur.execute(f"SET file_search_path = {duck.literal(str(plan['cwd']))}")
    use = plan.get("use")
    if use:
        cur.execute(f"USE {duck.ident(str(use[0]))}.{duck.ident(str(use[1]))}")
    return cur


def open_local(plan: Mapping[str, Any]) -> Callable[[], Any] | None:
    """In the user's own process: a maker of fresh cursors on the user's database instance, with the
    plan's schema in use; None when no such instance can be reached.

    DuckDB refuses a second instance of a file in one process, but `duckdb.connect(path, read_only=True)`
    returns the instance the user already opened it with; each cursor of it runs its own query, so
    sql() can stream several relations of one database at once, and model code never holds the
    user's connection.
    """
    import duckdb

    for _alias, path in plan.get("attach", ()):
        try:
            con = duckdb.connect(str(path), read_only=True)
        except Exception as exc:
            if not duck.is_error(exc):
                raise
            continue

        def fresh(con: Any = con) -> Any:
            cur = con.cursor()
            cur.execute(f"SET file_search_path = {duck.literal(str(plan.get('cwd') or os.getcwd()))}")
            use = plan.get("use")
            if use:
                cur.execute(f"USE {duck.ident(str(use[0]))}.{duck.ident(str(use[1]))}")
            return cur

        return fresh
    return None


def paths_in(texts: Sequence[str]) -> tuple[str, ...]:
    """Existing files and folders named by string literals in SQL texts (what a confined kernel must read)."""
    found: list[str] = []
    for text in texts:
        for m in _QUOTED.finditer(text):
            root = readable_root(m.group(1).replace("''", "'"))
            if root is not None:
                found.append(root)
    return tuple(dict.fromkeys(found))


def scan_files(text: str) -> int | None:
    """How many files the paths and globs named in SQL text match (None: it names none that exist)."""
    import glob

    total, named = 0, False
    for m in _QUOTED.finditer(text):
        path = os.path.abspath(m.group(1).replace("''", "'"))
        if any(c in path for c in "*?["):
            found = glob.glob(path, recursive=True)
            named, total = named or bool(found), total + len(found)
        elif os.path.isfile(path):
            named, total = True, total + 1
    return total if named else None


def _catalog(qualified: str) -> str:
    """The catalog of 'catalog.schema.table' as EXPLAIN writes it (a keyword or odd name is double-quoted)."""
    if qualified.startswith('"'):
        end = qualified.find('"', 1)
        while end != -1 and qualified[end + 1:end + 2] == '"':
            end = qualified.find('"', end + 2)
        return qualified[1:end].replace('""', '"') if end != -1 else qualified
    return qualified.split(".")[0]


def _rows(rel: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in rel.query(_PROBE, sql).fetchall()]


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
        raise InputError(f"Input {name!r}: the DuckDB relation fails when run ({clip(duck.message(exc), 300)}); "
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
    guess = f" (DuckDB's planner guesses ~{human_count(facts.guess)})" if facts.guess is not None else ""
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


__all__ = []
