"""Running one snippet in a namespace: compile, echo the last expression, trim the traceback.

Shared by the local sandbox and the kernel side of the kernel sandbox, so both report errors and
submissions the same way. Standard library only.

Tables: while a snippet runs, `print` (in the namespace's builtins) and the echo of its last expression note
each pandas DataFrame or Series they write, as a bounded table record beside the exact text written
(`table_record`). The text goes to stdout as before, for the model; the views show the record as a table
where they find its text in the output.
"""

from __future__ import annotations

import ast
import builtins
import collections
import itertools
import json
import linecache
import sys
import traceback
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import SubmitSignal

_counter = itertools.count(1)


class SnippetInterrupted(BaseException):  # noqa: N818 - a signal injected into the snippet's thread
    """Raised inside a snippet to stop it (timeout or user interrupt); BaseException so model code can't catch it."""


@dataclass
class SnippetOutcome:
    error: str | None = None
    error_type: str | None = None
    submit: SubmitSignal | None = None
    interrupted: bool = False


class BoundedBuffer:
    """A text sink that keeps the first and last `limit` characters and counts the rest.

    Printing 100 MB costs memory for 2 x limit characters only.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._head: list[str] = []
        self._head_len = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_len = 0
        self.total = 0

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            text = str(text)
        written = len(text)
        self.total += written
        room = self.limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if text:
            if len(text) > self.limit:
                self._tail.clear()
                self._tail_len = 0
                text = text[-self.limit:]
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail_len - len(self._tail[0]) >= self.limit:
                self._tail_len -= len(self._tail.popleft())
        return written

    def getvalue(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)[-self.limit:]
        if self.total == len(head) + len(tail):
            return head + tail
        from rlmnb._ground.prompts import render

        omitted = self.total - len(head) - len(tail)
        return head + render("truncated", omitted=f"{omitted:,}", total=f"{self.total:,}") + tail


TABLE_ROWS = 50          # rows of a printed table kept for the views (pandas prints 60 at most by default)
TABLE_COLUMNS = 30       # columns kept
TABLE_CELL_CHARS = 200   # characters kept per cell
TABLE_TEXT_CHARS = 20_000  # a text longer than this is not matched to a table
TABLES_KEPT = 20         # tables noted per snippet
TABLE_RECORD_BYTES = 100_000  # a record's JSON (ASCII-escaped) at most: all of a snippet's stay under 2 MB


def _cell(value: Any) -> str:
    text = str(value)
    return text if len(text) <= TABLE_CELL_CHARS else text[:TABLE_CELL_CHARS - 1] + "…"


def table_record(value: Any, text: str) -> dict[str, Any] | None:
    """`value` as a table the views can draw, if it is a pandas DataFrame or Series (recognised by its class,
    never importing pandas), else None. `text` is what was written for it; the record keeps its first rows and
    columns as strings, and the whole shape. A record over TABLE_RECORD_BYTES is not made (the table stays text,
    which the model reads as before), so a snippet's tables stay small in the reply whatever the frames hold."""
    cls = type(value)
    if cls.__module__.split(".", 1)[0] != "pandas" or cls.__name__ not in ("DataFrame", "Series"):
        return None
    if len(text) > TABLE_TEXT_CHARS or not text.strip():
        return None
    try:
        frame = value.to_frame() if cls.__name__ == "Series" else value
        head = frame.iloc[:TABLE_ROWS, :TABLE_COLUMNS]
        record = {"text": text, "shape": [int(frame.shape[0]), int(frame.shape[1])],
                  "columns": [_cell(c) for c in head.columns], "index": [_cell(i) for i in head.index],
                  "rows": [[_cell(v) for v in row] for row in head.itertuples(index=False, name=None)],
                  "series": cls.__name__ == "Series"}
    except Exception:  # an odd frame (a subclass, a failing __str__): it stays text
        return None
    return record if len(json.dumps(record, ensure_ascii=True)) <= TABLE_RECORD_BYTES else None


def _noting_print(tables: list[dict[str, Any]]) -> Any:
    """A `print` that writes as print does and notes each DataFrame or Series it writes."""
    real = builtins.print

    def print(*args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False) -> None:  # noqa: A001
        if file is None and len(tables) < TABLES_KEPT:
            for value in args:
                if type(value).__module__.startswith("pandas"):
                    record = table_record(value, str(value))
                    if record is not None:
                        tables.append(record)
        real(*args, sep=sep, end=end, file=file, flush=flush)

    return print


def snippet_filename(turn: int) -> str:
    return f"<turn {turn}.{next(_counter)}>"


def assigned_names(tree: ast.AST, names: Collection[str]) -> list[tuple[str, int]]:
    """Which of `names` the code binds or deletes, anywhere (assignment, loop or `with` target, `def`, `class`,
    `import ... as`, `global`), with the line of the first place; a function's own parameters are left alone."""
    found: dict[str, int] = {}

    def note(name: str, node: ast.AST) -> None:
        if name in names and name not in found:
            found[name] = getattr(node, "lineno", 0)

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            note(node.id, node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            note(node.name, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                note(alias.asname or alias.name.split(".")[0], node)
        elif isinstance(node, ast.Global):
            for name in node.names:
                note(name, node)
    return sorted(found.items(), key=lambda item: item[1])


def _protected_outcome(assigned: list[tuple[str, int]]) -> SnippetOutcome:
    from rlmnb._ground.prompts import render

    names = ", ".join(f"`{name}`" for name, _ in assigned)
    return SnippetOutcome(error=render("protected_names", names=names, line=assigned[0][1]),
                          error_type="ProtectedName")


_ENDING = frozenset({"submit", "FINAL", "FINAL_VAR"})


def top_level_submits(tree: ast.Module) -> list[int]:
    """The lines of the calls that end a run (`submit`, `FINAL`, `FINAL_VAR`) standing as statements of their own
    at the top of a snippet: more than one cannot all count (the first ends the run), so the rest would be lost.
    Calls inside a branch, a loop or a function are the model's control flow and are not counted."""
    return [stmt.lineno for stmt in tree.body if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in _ENDING]


def _submits_outcome(lines: list[int]) -> SnippetOutcome:
    from rlmnb._ground.prompts import render

    return SnippetOutcome(error=render("several_submits", count=len(lines), lines=", ".join(map(str, lines))),
                          error_type="SeveralSubmits")


def _restore(namespace: dict[str, Any], originals: dict[str, Any], outcome: SnippetOutcome) -> SnippetOutcome:
    """Put back any protected name the snippet rebound by other means (`globals()[...]`, `exec`) and say so."""
    changed = sorted(name for name, value in originals.items() if namespace.get(name, _MISSING) is not value)
    if not changed:
        return outcome
    namespace.update({name: originals[name] for name in changed})
    from rlmnb._ground.prompts import render

    note = render("protected_restored", names=", ".join(f"`{name}`" for name in changed))
    outcome.error = f"{outcome.error}\n{note}" if outcome.error else note
    outcome.error_type = outcome.error_type or "ProtectedName"
    return outcome


_MISSING = object()


def run_snippet(code: str, namespace: dict[str, Any], filename: str, echo: Any,
                tables: list[dict[str, Any]] | None = None, protected: Collection[str] = ()) -> SnippetOutcome:
    """Execute `code` in `namespace`; print the value of a trailing expression through `echo` (which writes
    its repr). With `tables`, the DataFrames and Series printed or echoed are noted there (`table_record`).

    `protected` names (`inputs`, the primitives, the user's tools) keep their values: code that assigns one is
    refused before anything runs (a model that rebinds `inputs` computes from data it made up, not the user's),
    and one rebound by other means is put back after the snippet, with an error saying so.
    """
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    if tables is not None and isinstance(namespace.get("__builtins__"), dict):
        namespace["__builtins__"]["print"] = _noting_print(tables)
    originals = {name: namespace[name] for name in protected if name in namespace}
    return _restore(namespace, originals, _run(code, namespace, filename, echo, tables, originals))


def _run(code: str, namespace: dict[str, Any], filename: str, echo: Any, tables: list[dict[str, Any]] | None,
         protected: Collection[str]) -> SnippetOutcome:
    try:
        tree = ast.parse(code, filename=filename)
        assigned = assigned_names(tree, protected)
        if assigned:
            return _protected_outcome(assigned)
        submits = top_level_submits(tree)
        if len(submits) > 1:
            return _submits_outcome(submits)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
        exec(compile(body, filename, "exec"), namespace)  # noqa: S102 - running model code is the product
        if last is not None:
            value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307
            if value is not None:
                echo(value)
                if tables is not None and len(tables) < TABLES_KEPT:
                    record = table_record(value, repr(value))
                    if record is not None:
                        tables.append(record)
        return SnippetOutcome()
    except SubmitSignal as signal:
        return SnippetOutcome(submit=signal)
    except SnippetInterrupted:
        return SnippetOutcome(interrupted=True)
    except SyntaxError as exc:
        text = "".join(traceback.format_exception_only(type(exc), exc))
        return SnippetOutcome(error=text.rstrip(), error_type="SyntaxError")
    except BaseException as exc:  # model code may raise anything, SystemExit included
        return SnippetOutcome(error=trimmed_traceback(exc, filename), error_type=type(exc).__name__)


def trimmed_traceback(exc: BaseException, filename: str) -> str:
    """The traceback with only the snippet's own frames, and the exception line; a NameError for a standard
    library module says to import it, as Python 3.12 and later do (a model often uses a module it did not import,
    and a bare "not defined" does not tell it why), and an AttributeError for a name a module lacks says where the
    standard library has it (`_elsewhere`)."""
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == filename])
    te.__cause__ = te.__context__ = None
    text = "".join(te.format()).rstrip()
    name = getattr(exc, "name", None)
    if (isinstance(exc, NameError) and isinstance(name, str) and name in sys.stdlib_module_names
            and "import" not in text.rsplit("\n", 1)[-1]):
        text += f". Did you forget to import '{name}'?"
    elif isinstance(exc, AttributeError) and isinstance(name, str):
        home = _elsewhere(getattr(exc, "obj", None), name)
        if home is not None:
            text += f". '{name}' is in the standard library: from {home} import {name}"
    return text


_HOMES = ("io", "re", "json", "collections", "itertools", "functools", "math", "statistics", "string", "datetime",
          "csv", "textwrap", "operator", "os", "pathlib")
"""Standard modules whose public names a snippet is told of when it asks another module for them."""


def _elsewhere(obj: object, name: str) -> str | None:
    """The standard module in `_HOMES` that has public `name`, when `obj` is a module without it; else None.

    A model trained on older library versions reaches for names that moved; an error that names only what is
    missing gets the same call again, one that names where the name lives gets it fixed. Only modules already
    loaded are looked in, so the hint imports nothing.
    """
    if not isinstance(obj, type(sys)) or name.startswith("_"):
        return None
    for home in _HOMES:
        module = sys.modules.get(home)
        if module is not None and module is not obj and hasattr(module, name):
            return home
    return None


__all__ = [
    "BoundedBuffer", "SnippetInterrupted", "SnippetOutcome", "assigned_names", "run_snippet", "snippet_filename",
    "table_record", "trimmed_traceback",
]
