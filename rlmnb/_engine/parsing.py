"""Pull runnable code out of a model reply, in three layers.

1. Fenced blocks: ```python / ```py / ```python3 / ```repl / ```ipython, and bare fences whose body
   parses as Python. All such blocks of a reply run in order as one snippet.
2. Otherwise an indented block (4 spaces or a tab) that parses as Python.
3. Otherwise a bare `FINAL(...)` or `FINAL_VAR(...)` call written in prose.

Nothing here executes anything.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

PYTHON_TAGS = frozenset({"python", "py", "python3", "repl", "ipython", "pycon"})
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+.-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.MULTILINE | re.DOTALL)
_FINAL_START = re.compile(r"\b(FINAL_VAR|FINAL)\s*\(")


@dataclass(frozen=True)
class Extracted:
    """The code of a reply and the layer it came from ("fenced", "indented", "final" or "none")."""

    code: str | None
    layer: str
    blocks: int = 0


def extract_code(reply: str) -> Extracted:
    """Return the runnable code of a reply; `code` is None when there is none."""
    text = reply.replace("\r\n", "\n")
    blocks = []
    for match in _FENCE.finditer(text):
        tag = match.group("tag").lower()
        body = _strip_prompts(match.group("body"))
        if (tag in PYTHON_TAGS or (not tag and parses(body))) and body.strip():
            blocks.append(body.rstrip())
    if blocks:
        return Extracted("\n\n".join(blocks), "fenced", len(blocks))
    indented = _indented_block(text)
    if indented:
        return Extracted(indented, "indented", 1)
    final = final_call(text)
    if final:
        return Extracted(final, "final", 1)
    return Extracted(None, "none", 0)


def parses(code: str) -> bool:
    """True when `code` is Python worth running (not a lone name or constant, which is prose)."""
    if not code.strip():
        return False
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    # a lone name or constant ("Note", "42") is prose, not code
    return not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
                and isinstance(tree.body[0].value, ast.Name | ast.Constant))


def _strip_prompts(body: str) -> str:
    """Drop '>>> ' / '... ' console prompts when every code line carries them."""
    lines = body.split("\n")
    code_lines = [ln for ln in lines if ln.strip()]
    if code_lines and all(ln.startswith((">>> ", "... ", ">>>", "...")) for ln in code_lines):
        return "\n".join(ln[4:] if ln.startswith((">>> ", "... ")) else ln[3:] for ln in lines)
    return body


def _indented_block(text: str) -> str | None:
    """The longest run of indented lines (blank lines allowed inside) that parses as Python."""
    best: str | None = None
    run: list[str] = []
    for line in text.split("\n") + ["<end>"]:
        if line.startswith(("    ", "\t")) or (run and not line.strip()):
            run.append(line)
            continue
        if run:
            candidate = textwrap.dedent("\n".join(run)).strip("\n")
            if parses(candidate) and (best is None or len(candidate) > len(best)):
                best = candidate
            run = []
    return best


def final_call(text: str) -> str | None:
    """A FINAL(...) / FINAL_VAR(...) call in prose, with balanced parentheses and valid syntax."""
    for match in _FINAL_START.finditer(text):
        depth, quote, i = 0, "", match.end() - 1
        while i < len(text):
            ch = text[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif text.startswith(quote, i):
                    i += len(quote) - 1
                    quote = ""
            elif text.startswith(('"""', "'''"), i):
                quote = text[i:i + 3]
                i += 2
            elif ch in "\"'":
                quote = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    call = text[match.start(): i + 1]
                    if _is_call(call):
                        return call
                    break
            i += 1
    return None


def _is_call(code: str) -> bool:
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        return False
    return isinstance(tree.body, ast.Call)
