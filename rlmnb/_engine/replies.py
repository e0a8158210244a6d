"""What one root reply means: its reasoning, the one step it runs, and the text the history keeps.

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
- A reply with no visible text (empty, or reasoning only) is `empty`: the loop asks again once.

Nothing here executes anything; `parsing.extract_code` still decides which blocks are Python.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rlmnb._engine.parsing import PYTHON_TAGS, extract_code, parses

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
    trailing_removed: bool = False
    """Prose after the last code block (about a result not yet seen) was left out of the history."""

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
        if self.trailing_removed:
            out.append("trailing_text_removed")
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


def read_step(text: str, *, finish_reason: str | None = None) -> Step:
    """Read one root reply; see the module docs for the rules."""
    visible, reasoning = split_reasoning(text.replace("\r\n", "\n"))
    cut = finish_reason == "length"
    if not visible.strip():
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
