"""Relations over file-backed DuckDB databases: can the kernel reopen them, and reopening them there.

A relation such as `duckdb.connect("shop.duckdb").table("orders").filter(...)` reads tables of a
database file. The kernel sandbox (another process) can attach that file READ_ONLY and run the
relation's SQL there, so nothing is copied. DuckDB locks a database file per process: while the
user's connection has it open for writing no other process may open it, not even read-only (an
"IO Error: Could not set lock on file"), and within one process a second database instance cannot
attach it at all ("Unique file handle conflict"). So a relation is reopened only when every database
file its connection uses is attached read-only there (`duckdb.connect(path, read_only=True)`);
otherwise it is exported once as Arrow and the summary says why and what to change.

The relation's plan (duckplan.py) must read only tables of those files, files, or computed rows: a
table of an in-memory database, a temporary table or a Python object (a pandas frame found by
DuckDB's replacement scan) exists only in the user's process.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._disk import readable_root
from rlmnb.inputs._tables import duck
from rlmnb.inputs._tables.duckplan import PlanFacts

_PROBE = "_rlmnb_probe"
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
"""  # one round trip; duckdb_views() is the slow part (~20-50 ms on a connection that just opened its file)


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
    list (slow: ~50 ms) is read only when the SQL calls a name DuckDB does not ship."""
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
