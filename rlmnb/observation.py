"""What the root model is shown after its code ran: a turn header, output cut to size, and notes."""

from __future__ import annotations

from .prompts import load, render
from .sandbox.base import ExecResult


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, stating the true length."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    omitted = len(text) - 2 * half
    return text[:half] + render("truncated", omitted=f"{omitted:,}", total=f"{len(text):,}") + text[-half:]


def header(turn: int, max_turns: int) -> str:
    return render("turn_header", turn=turn, max_turns=max_turns)


def build(result: ExecResult, *, turn: int, max_turns: int, max_chars: int, timeout: float,
          extra: list[str] | None = None) -> str:
    """The observation text for one executed snippet."""
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
    lines = [header(turn, max_turns), clip_middle(body, max_chars)]
    lines.extend(extra or [])
    left = max_turns - turn
    if 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)


def no_code(turn: int, max_turns: int) -> str:
    lines = [header(turn, max_turns), load("no_code")]
    left = max_turns - turn
    if 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)
