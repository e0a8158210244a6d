"""What the root model is shown after its code ran: a turn header, output cut to size, and notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._ground.prompts import load, render
from rlmnb._sandbox.base import ExecResult

if TYPE_CHECKING:
    from rlmnb._engine.replies import Step


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, stating the true length."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    omitted = len(text) - 2 * half
    return text[:half] + render("truncated", omitted=f"{omitted:,}", total=f"{len(text):,}") + text[-half:]


def header(turn: int, max_turns: int) -> str:
    return render("turn_header", turn=turn, max_turns=max_turns)


def output_of(result: ExecResult) -> str:
    """Everything a snippet showed (to compare steps): stdout, stderr, error, timeout."""
    return "\x00".join((result.stdout, result.stderr, result.error or "", "timeout" if result.timed_out else ""))


def reply_notes(step: Step, max_tokens: int | None) -> list[str]:
    """What the model must know about how its reply was read: output it invented, a cut reply."""
    notes = []
    if step.invented_outputs or step.blocks_not_run:
        later = render("later_blocks", count=step.blocks_not_run) if step.blocks_not_run else ""
        notes.append("[note] " + render("outputs_removed", count=step.invented_outputs, later=later))
    if step.cut:
        where = load("cut_in_block") if step.unfinished else ""
        limit = f" ({max_tokens:,} tokens)" if max_tokens else ""
        notes.append("[note] " + render("reply_cut", limit=limit, where=where))
    if step.empty:
        notes.append("[note] " + load("empty_reply"))
    return notes


def build(result: ExecResult, *, turn: int, max_turns: int, max_chars: int, timeout: float,
          extra: list[str] | None = None, nudge: bool = True, repeat_of: int | None = None) -> str:
    """The observation text for one executed snippet; `nudge=False` after an accepted submit.

    A step that repeats turn `repeat_of` gets a pointer to it instead of the same output again: a model
    stuck in a loop copies the last exchange, and an identical exchange is what keeps it there.
    """
    if repeat_of is not None:
        return build_lines([header(turn, max_turns), "[note] " + render("repeated", turn=repeat_of),
                            *(extra or [])], turn, max_turns, nudge)
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr.strip():
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.error:
        parts.append("[error]\n" + result.error)
    if result.timed_out:
        parts.append("[timeout] " + render("timeout", timeout=f"{timeout:g}"))
    if result.notice:
        parts.append("[notice] " + result.notice)
    body = "\n".join(parts) if parts else load("no_output")
    return build_lines([header(turn, max_turns), clip_middle(body, max_chars), *(extra or [])], turn, max_turns,
                       nudge)


def build_lines(lines: list[str], turn: int, max_turns: int, nudge: bool) -> str:
    left = max_turns - turn
    if nudge and 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)


def no_code(turn: int, max_turns: int, notes: list[str] | None = None) -> str:
    lines = [header(turn, max_turns), *(notes or []), load("no_code")]
    left = max_turns - turn
    if 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)
