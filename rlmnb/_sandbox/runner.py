"""Running one snippet in a namespace: compile, echo the last expression, trim the traceback.

Shared by the local sandbox and the kernel side of the kernel sandbox, so both report errors and
submissions the same way. Standard library only.
"""

from __future__ import annotations

import ast
import collections
import itertools
import linecache
import traceback
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


def snippet_filename(turn: int) -> str:
    return f"<turn {turn}.{next(_counter)}>"


def run_snippet(code: str, namespace: dict[str, Any], filename: str, echo: Any) -> SnippetOutcome:
    """Execute `code` in `namespace`; print the value of a trailing expression through `echo`."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename=filename)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
        exec(compile(body, filename, "exec"), namespace)  # noqa: S102 - running model code is the product
        if last is not None:
            value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307
            if value is not None:
                echo(value)
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
    """The traceback with only the snippet's own frames, and the exception line."""
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == filename])
    te.__cause__ = te.__context__ = None
    return "".join(te.format()).rstrip()


__all__ = [
    "BoundedBuffer", "SnippetInterrupted", "SnippetOutcome", "run_snippet", "snippet_filename",
    "trimmed_traceback",
]
