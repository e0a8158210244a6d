"""One root reply read as one step: `read_step(text, finish_reason=...) -> Step`.

Entry points: `read_step` (what runs, what the history keeps), `extract_code` (the runnable code of a
text, also used by the views), `final_call` (a FINAL(...) call in prose) and `Repeats.check` (the
earlier turn a step repeats). Nothing here executes anything.

Real models do not stop where a step ends. Small ones write a code block, then an output block of
their own invention, then more code built on it; reasoning models put `<think>...</think>` in the
content; any model can be cut at `max_tokens` in the middle of a block. The rule, one step per reply:

- Reasoning (`<think>...</think>`, or everything before a lone `</think>`) is split off: it is not
  searched for code and not kept in the conversation (the trajectory records it).
- The reply ends where the model starts writing output of its own: at the first output block
  (```output, ```text, ```stdout, ..., or a bare fence that is not Python) after a code block. The
  code blocks before it run, as one snippet; that block and everything after it are removed from the
  stored reply, replaced by a one-line note, and the model is told that none of it ran.
- A reply cut at the token limit inside a code block does not run that block; the complete blocks
  before it do. An unclosed last block of a reply that was not cut is taken as complete.
- Prose after the last code block describes a result the model has not seen yet: it is left out of
  the history (silently: small models copy every note they are shown), and the trajectory says so.
- A reply with no visible text (empty, or reasoning only) is `empty`: the loop asks again once. So is a
  reply that is only the placeholder the history keeps for an empty reply (`EMPTY_KEPT`: a small model copies
  what its history shows as its own earlier reply), and a reply without code that only copies the message it
  answers (`echoes`).

Code is pulled out of a text in three layers: fenced blocks (```python / ```py / ```python3 / ```repl
/ ```ipython, and bare fences whose body parses as Python; all such blocks run in order as one
snippet), otherwise an indented block (4 spaces or a tab) that parses as Python, otherwise a bare
`FINAL(...)` or `FINAL_VAR(...)` call written in prose, or a reply that is only one `submit(...)` call.

A small model stuck in a loop runs the same code turn after turn and reads the same output each time;
`Repeats` remembers each turn's code (comments and layout aside) and output so the observation can
name the earlier turn a new one repeats, and `Repeats.ran` says, before a step runs, which turn already
ran its code (the loop then asks once for a different step); `Repeats.same_error` names the line that raised
the same error at an earlier turn when the code around it changed. `without_copied_head` leaves out of the history
the lines a reply opens with that copy the system prompt or the opening (a small model then copies its own reply).
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import textwrap
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rlmnb._ground.prompts import load

__all__ = ["EMPTY_KEPT", "OUTPUT_TAGS", "PYTHON_TAGS", "STOP_SEQUENCES", "Extracted", "Repeats", "Step", "echoes", "extract_code",
           "final_call", "normal_code", "parses", "read_step", "split_reasoning", "without_code",
           "without_copied_head"]

# ---- code in a text ------------------------------------------------------------------------------
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
    final = final_call(text) or _lone_submit(text)
    if final:
        return Extracted(final, "final", 1)
    return Extracted(None, "none", 0)


def _lone_submit(text: str) -> str | None:
    """A reply that is nothing but one `submit(...)` call (in `backticks` or not, a full stop after it allowed):
    the model's step, not prose: models often send their last call bare, and read as prose it would never run."""
    match = _LONE_SUBMIT.fullmatch(text)
    return match.group(1) if match and _is_call(match.group(1)) else None


_LONE_SUBMIT = re.compile(r"[\s`]*(submit\(.*\))[\s`.;]*", re.S)


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


# ---- one reply, one step --------------------------------------------------------------------------
OUTPUT_TAGS = frozenset({"output", "out", "text", "txt", "stdout", "stderr", "console", "result", "results",
                         "plaintext", "shell-session", "log"})
STOP_SEQUENCES = ("```output", "```stdout")
"""Where generation should end: the model has started writing a step's output itself (not ```text, which a
model may also use to quote the data before any code)."""
_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+.-]*)")
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    """One reply read as one step."""

    code: str | None
    """What runs (None: nothing to run)."""
    kept: str
    """The reply as the conversation keeps it: no reasoning, no invented output, a note where text was cut."""
    reasoning: str = ""
    invented_outputs: int = 0
    """Output blocks the model wrote itself, removed."""
    blocks_not_run: int = 0
    """Code blocks after the first invented output, removed and not run."""
    unfinished: bool = False
    """The reply was cut inside a code block, which did not run."""
    cut: bool = False
    """The provider stopped the reply at the token limit."""
    empty: bool = False
    echoed: bool = False
    """The reply only copied the request's text back (`echoes`); it counts as empty."""
    trailing_removed: bool = False
    """Prose after the last code block (about a result not yet seen) was left out of the history."""
    head_removed: int = 0
    """Lines at the reply's start that copied the system prompt or the opening, left out of the history."""

    @property
    def notes(self) -> list[str]:
        """Short machine-readable notes for the ModelReply event."""
        out = []
        if self.reasoning:
            out.append("reasoning_removed")
        if self.invented_outputs:
            out.append(f"outputs_removed:{self.invented_outputs}")
        if self.blocks_not_run:
            out.append(f"blocks_not_run:{self.blocks_not_run}")
        if self.cut:
            out.append("cut")
        if self.unfinished:
            out.append("unfinished_block")
        if self.empty:
            out.append("empty")
        if self.echoed:
            out.append("echo")
        if self.trailing_removed:
            out.append("trailing_text_removed")
        if self.head_removed:
            out.append(f"copied_head_removed:{self.head_removed}")
        return out


def split_reasoning(text: str) -> tuple[str, str]:
    """(visible text, reasoning) of a reply that may carry `<think>` blocks in its content."""
    parts = [m.group(1).strip() for m in _THINK.finditer(text)]
    visible = _THINK.sub("", text)
    lowered = visible.lower()
    if "</think>" in lowered:  # the opening tag was in the prompt template: all before the close is thinking
        end = lowered.rindex("</think>")
        parts.insert(0, visible[:end].strip())
        visible = visible[end + len("</think>"):]
    elif "<think>" in lowered:  # cut while thinking: what follows the tag is thinking
        start = lowered.index("<think>")
        parts.append(visible[start + len("<think>"):].strip())
        visible = visible[:start]
    return visible.strip("\n"), "\n\n".join(p for p in parts if p)


@dataclass
class _Block:
    start: int  # line index of the opening fence
    end: int | None  # line index of the closing fence; None when unclosed
    tag: str
    body: str
    fence: str = "```"

    @property
    def is_code(self) -> bool:
        return self.tag in PYTHON_TAGS or (not self.tag and parses(self.body) and not _literal(self.body))

    @property
    def is_output(self) -> bool:
        return self.tag in OUTPUT_TAGS or (not self.tag and not self.is_code)


def _literal(body: str) -> bool:
    """Printed values ("12,345", "[1, 2]") parse as Python too; as a step they would do nothing."""
    try:
        ast.literal_eval(body.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _blocks(lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match.group("fence")
        closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        body = "\n".join(lines[i + 1:end if end is not None else len(lines)])
        blocks.append(_Block(i, end, match.group("tag").lower(), body, fence))
        if end is None:
            break
        i = end + 1
    return blocks


EMPTY_KEPT = load("empty_kept")
"""What the history keeps for a turn whose reply was empty (an assistant message may not be empty everywhere)."""


def read_step(text: str, *, finish_reason: str | None = None) -> Step:
    """Read one root reply; see the module docs for the rules."""
    visible, reasoning = split_reasoning(text.replace("\r\n", "\n"))
    cut = finish_reason == "length"
    if not visible.strip() or visible.strip() == EMPTY_KEPT:
        return Step(None, "", reasoning=reasoning, cut=cut, empty=True)
    lines = visible.split("\n")
    blocks = _blocks(lines)
    invented = dropped = 0
    keep_until = len(lines)
    seen_code = False
    for index, block in enumerate(blocks):
        if seen_code and block.is_output:
            rest = blocks[index:]
            invented = sum(1 for b in rest if b.is_output)
            dropped = sum(1 for b in rest if b.is_code)
            keep_until = block.start
            break
        seen_code = seen_code or block.is_code
    kept_lines = lines[:keep_until]
    unfinished = False
    last = next((b for b in reversed(blocks) if b.start < keep_until), None)
    runnable = list(kept_lines)
    if last is not None and last.end is None:
        if cut:
            unfinished = last.is_code or last.tag in PYTHON_TAGS or not last.tag
            runnable = kept_lines[:last.start]
        else:
            runnable.append(last.fence)  # the model ended its reply there: the block is complete
    code = extract_code("\n".join(runnable)).code
    trailing = False
    closed = [b for b in blocks if b.start < keep_until and b.end is not None and b.is_code]
    if code is not None and not unfinished and closed and closed[-1].end is not None:
        after = kept_lines[closed[-1].end + 1:]
        if any(ln.strip() for ln in after):  # prose about a result the model has not seen yet
            kept_lines, trailing = kept_lines[:closed[-1].end + 1], True
    kept = "\n".join(kept_lines).rstrip()
    if invented or dropped:
        kept += ("\n\n" if kept else "") + _removed_note(invented, dropped)
    return Step(code, kept, reasoning=reasoning, invented_outputs=invented, blocks_not_run=dropped,
                unfinished=unfinished, cut=cut, trailing_removed=trailing)


def _removed_note(invented: int, dropped: int) -> str:
    parts = [f"{invented} output block(s) written by the model"] if invented else []
    if dropped:
        parts.append(f"{dropped} later code block(s)")
    return f"[rlmnb removed {' and '.join(parts)} from this reply; they were not run.]"


ECHO_SHARE = 0.6
"""Share of a reply's lines found in the request for the reply to count as copying it."""


def echoes(reply: str, request: str, *, outputs: Sequence[str] = ()) -> bool:
    """Whether a reply mostly copies `request`, the message it answers: at least two of its non-blank lines, and
    `ECHO_SHARE` of them, are lines of the request (whitespace at their ends aside). A small model often copies
    its request back; a reply that is mostly copied lines is not a step.

    A reply whose copied lines are all lines of `outputs` (what the run's code printed) copies no instruction:
    stating a result is quoting it."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    asked = {line.strip() for line in request.splitlines() if line.strip()}
    copied = [line for line in lines if line in asked]
    printed = {line.strip() for text in outputs for line in text.splitlines() if line.strip()}
    if printed and all(line in printed for line in copied):
        return False
    return len(copied) >= 2 and len(copied) >= ECHO_SHARE * len(lines)


def without_copied_head(step: Step, given: str) -> Step:
    """`step` with the lines its reply opens with that copy `given` (the system prompt and the opening) left out of
    what the history keeps; blank lines among them go too. Only a step with code, only two copied lines or more,
    and never into a fenced block; what runs is unchanged.

    A small model that opens a reply with a copy of its instructions copies that reply again on the next turn, so
    the copy is kept out of the history. Nothing is noted in the kept text (a small model copies notes as well).
    """
    if step.code is None or not step.kept:
        return step
    asked = {line.strip() for line in given.splitlines() if line.strip()}
    flat = " ".join(given.split()).casefold()
    lines = step.kept.split("\n")
    copied = end = 0
    for index, line in enumerate(lines):
        text = line.strip()
        if text.startswith(("```", "~~~")) or (text and text not in asked and not _inside(text, flat)):
            break
        copied += bool(text)
        end = index + 1
    if copied < 2 or not any(line.strip() for line in lines[end:]):
        return step
    return replace(step, kept="\n".join(lines[end:]).lstrip("\n"), head_removed=copied)


COPY_CHARS = 40
"""A line this long or longer counts as copied when it appears anywhere in the given text (case and spacing aside);
a shorter one only when it is a whole line of it."""


def _inside(line: str, flat: str) -> bool:
    """Whether a long `line` appears in `flat` (the given text, spacing collapsed and case folded): a copied line
    may drop a lead-in or change its case and spacing, and is a copy all the same."""
    return len(line) >= COPY_CHARS and " ".join(line.split()).casefold() in flat


# ---- repeated steps -------------------------------------------------------------------------------
def without_code(text: str, code: str, placeholder: str) -> str:
    """`text` with `code` (comments and layout aside) left out: the whole text when its code is `code`, else each
    fenced block whose body is `code`, replaced by `placeholder`. A model asked not to send a step again copies it
    from wherever the request still shows it (its own earlier reply, an example)."""
    target = normal_code(code)
    whole = extract_code(text).code
    if whole is not None and normal_code(whole) == target:
        return placeholder
    return _FENCE.sub(lambda m: placeholder if normal_code(_strip_prompts(m.group("body"))) == target else m.group(0),
                      text.replace("\r\n", "\n"))


_TURN_MARK = re.compile(r"<turn \d+(?:\.\d+)?>")  # tracebacks name the turn: the same error reads the same
_LAYOUT = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def normal_code(code: str) -> str:
    """The code's tokens without comments, blank lines or indentation; whitespace-joined text if it does not tokenize."""
    try:
        return " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                        if t.type not in _LAYOUT)
    except (tokenize.TokenError, SyntaxError):
        return " ".join(code.split())


@dataclass
class Repeats:
    """The steps of one run, by the hash of their normalised code and their output."""

    seen: dict[str, int] = field(default_factory=dict)
    code_seen: dict[str, int] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    raised: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    prose_seen: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    """Steps checked so far (their serial numbers order `bound_at` and `checked_at`)."""
    bound_at: dict[str, int] = field(default_factory=dict)
    """Each name, the last step that bound or changed it ("*": a step whose code did not parse, so anything)."""
    checked_at: dict[str, int] = field(default_factory=dict)
    asked: int = 0
    """Times the run's root was asked for another step after a repeat (turn.py; at most `RLMConfig.repeat_asks`)."""

    def check(self, turn: int, code: str, output: str, *, clean: bool = True, submitted: bool = False) -> int | None:
        """The earlier turn this one repeats, or None; remembers this turn either way. For `ran`, a `clean` run
        counts at once; one that raised, timed out or printed a failed sub-call only once it printed the same
        output twice (a retry after an error may be the point; a second identical error shows it was not); a
        `submitted` step never (a guard or a verifier that sent it back may take it the next time)."""
        shown = _TURN_MARK.sub("<turn>", output)
        normal = normal_code(code)
        key = hashlib.sha256(f"{normal}\x00{shown}".encode("utf-8", "surrogatepass")).hexdigest()
        earlier = self.seen.get(key)
        self.seen[key] = turn
        failed = not clean and not submitted
        self.steps += 1
        for name in names_bound(code):
            self.bound_at[name] = self.steps
        self.checked_at[normal] = self.steps
        if clean or (failed and earlier is not None):
            self.code_seen[normal] = turn
        else:
            self.code_seen.pop(normal, None)
        if failed:
            self.failing.add(normal)
        else:
            self.failing.discard(normal)
        return earlier

    def same_error(self, turn: int, code: str, error: str | None) -> tuple[int, str] | None:
        """The earlier turn, and the line, when this step's error was raised by the same line with the same
        message at an earlier turn whose code differed; else None. Remembers this turn's error either way.

        A model that rewrites the code around a failing line often keeps the line; `check` keys on identical code,
        so only this says that the one line is what keeps failing.
        """
        site = _error_site(code, error)
        if site is None:
            return None
        normal = normal_code(code)
        earlier = self.raised.get(site)
        self.raised[site] = (turn, normal)
        if earlier is None or earlier[1] == normal:
            return None
        return earlier[0], site[0]

    def said(self, turn: int, prose: str) -> None:
        """Remember a reply that ran no code (its text, whitespace folded), for `said_before`."""
        self.prose_seen[" ".join(prose.split())] = turn

    def said_before(self, prose: str) -> int | None:
        """The latest earlier turn whose reply, also without code, was this same text (whitespace aside), or None.

        At a low temperature a model that copies its own last reply sends the same prose turn after turn, and a
        note after each changes nothing; the repeat itself has to be seen.
        """
        return self.prose_seen.get(" ".join(prose.split()))

    def ran_codes(self) -> list[str]:
        """The normalised code of every step `ran` knows (`without_code` takes it as code)."""
        return list(self.code_seen)

    def failed(self, code: str) -> bool:
        """Whether this code's latest run failed (raised, timed out or printed a failed sub-call)."""
        return normal_code(code) in self.failing

    def ran(self, code: str) -> int | None:
        """The latest earlier turn after which this code (comments and layout aside) is not run again unasked: it
        ran cleanly, or failed the same way twice; or None. Code is no repeat when a name it reads was bound or
        changed by a step since: what it shows may differ (issue 44: `print(len(t))` after a new filter of `t`)."""
        normal = normal_code(code)
        since = self.checked_at.get(normal)
        if since is not None and any(self.bound_at.get(name, 0) > since for name in (*names_read(code), "*")):
            return None
        return self.code_seen.get(normal)


def names_bound(code: str) -> set[str]:
    """The names a step may bind or change: assignment targets (the base name of `t[...] = ` and `t.x = ` too),
    imports, definitions, loop and `with ... as` targets, deletions, and the object of a method call whose value
    is thrown away (`rows.append(x)`, `df.drop(..., inplace=True)`); {"*"} when the code does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {"*"}
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor | ast.NamedExpr):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            found.update(node.names)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(
                node.value.func, ast.Attribute):
            targets = [node.value.func.value]
        for target in targets:
            found.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return found


def names_read(code: str) -> set[str]:
    """The names a step reads from its namespace: every name it loads but those local to a comprehension, a
    lambda or a function it defines (`i` in `[t[i:i + 9] for i in ...]` is no variable of the run's)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    local: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            local.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
            local.update(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local


_FRAME = re.compile(r'File "<turn \d+(?:\.\d+)?>", line (\d+)')


def _error_site(code: str, error: str | None) -> tuple[str, str] | None:
    """(the code line the snippet's innermost own frame raised at, the error's last line), or None when the error
    names no line of the code."""
    if not error:
        return None
    frames = _FRAME.findall(error)
    lines = code.splitlines()
    if not frames or not 0 < int(frames[-1]) <= len(lines):
        return None
    line = lines[int(frames[-1]) - 1].strip()
    last = error.strip().rsplit("\n", 1)[-1].strip()
    return (line, last) if line and last else None
