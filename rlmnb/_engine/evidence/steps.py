"""What a run really printed: its executed steps (`steps_of`), the latest different output (`latest_other`, `last_lines`) and the tails the final answer is asked from (`output_tails`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlmnb.events import CodeExecuted, Trajectory

__all__ = ["Step", "last_lines", "latest_other", "output_tails", "output_text", "steps_of"]


@dataclass(frozen=True)
class Step:
    """One executed step of a run: its turn, code, real output and the earlier turn it repeats (if any)."""

    turn: int
    code: str
    text: str
    repeat_of: int | None = None


def output_text(stdout: str, stderr: str, error: str | None) -> str:
    """What a snippet really printed: stdout, then stderr, then its error (tracebacks show values too)."""
    parts = [stdout.rstrip("\n")] if stdout.strip() else []
    if stderr.strip():
        parts.append(stderr.rstrip("\n"))
    if error:
        parts.append(error.rstrip("\n"))
    return "\n".join(parts)


def steps_of(trajectory: Trajectory, run_id: str) -> list[Step]:
    """The run's executed steps in turn order (a revision's later step of the same turn replaces nothing)."""
    return [Step(e.turn, e.code, output_text(e.stdout, e.stderr, e.error), e.repeat_of)
            for e in trajectory.of(CodeExecuted, run_id)]


def last_lines(text: str, count: int = 3, width: int = 200) -> list[str]:
    """The last `count` non-empty lines of `text`, each clipped to `width` characters from its end."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()][-count:]
    return [ln if len(ln) <= width else "..." + ln[-(width - 3):] for ln in lines]


def latest_other(steps: Sequence[Step], repeat_of: int) -> Step | None:
    """The most recent step, other than turn `repeat_of` and the steps repeating it, that printed something.

    Repeats chain (turn 6 repeats 4, which repeats 2): a step belongs to the group of the first turn of its
    chain. `steps` are the steps before the repeating one.
    """
    first: dict[int, int] = {}
    for step in steps:
        first[step.turn] = first.get(step.repeat_of, step.repeat_of) if step.repeat_of is not None else step.turn
    group = first.get(repeat_of, repeat_of)
    for step in reversed(steps):
        if first[step.turn] != group and step.text.strip():
            return step
    return None


def output_tails(steps: Sequence[Step], *, per_step: int = 400, total: int = 4000) -> list[str]:
    """"Turn N printed:" blocks with the end of each distinct non-empty output, newest kept within `total`.

    Each block holds the output's last whole lines that fit in `per_step` characters (a short output whole; a
    last line longer than that, its end). A repeated output is listed once, under its first turn. When the blocks
    do not all fit, the oldest are left out (the newest outputs are the likeliest to hold what the run found). A
    short output is shown whole because a part of a result reads as the whole result to the model that answers.
    """
    seen: set[str] = set()
    blocks: list[str] = []
    for step in steps:
        if not step.text.strip() or step.text in seen:
            continue
        seen.add(step.text)
        blocks.append(f"Turn {step.turn} printed:\n{_tail(step.text, per_step)}")
    kept: list[str] = []
    size = 0
    for block in reversed(blocks):
        if kept and size + len(block) > total:
            break
        kept.append(block)
        size += len(block) + 2
    return kept[::-1]


def _tail(text: str, chars: int) -> str:
    """The last non-empty lines of `text` that fit in `chars` characters together, or the last line's end."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) > chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(reversed(kept)) if kept else "..." + lines[-1][-(chars - 3):]
