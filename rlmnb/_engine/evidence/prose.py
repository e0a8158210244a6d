"""An answer in prose: a reply that is only a short value, or ends in a `\\boxed{}` value, that real output showed (policy `prose_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlmnb._engine.evidence.shown import (
    found_in,
    says_nothing,
    short_answer,
)
from rlmnb._engine.evidence.steps import steps_of
from rlmnb.events import SubCallFinished, Trajectory

__all__ = ["PROSE_WORDS", "RESTATE_CHARS", "boxed_answer", "prose_answer"]


PROSE_WORDS = 4
"""Most words of a prose reply taken as a bare answer (`prose_answer`). Recorded (RULER niah_multivalue 8k): the
root sent back a six-word line its own code had printed ("The phrase '...' appears 0 times.") and the run ended
with it; a looked-up value ("4015985", "France", "William the Conqueror") is a few words."""


_WRAPPERS = "`'\"*"


def prose_answer(reply: str, *, trajectory: Trajectory, run_id: str, seen: Sequence[str] = ()) -> str | None:
    """The value of a reply that is nothing but a short answer ("4015985", "`France`."), when a real output of
    the run, a sub-call reply or one of the `seen` texts (a first reading) shows it; else None.

    Small models often answer in prose once they have seen the value; the evidence makes that a submission
    rather than a guess. The question and the InputsSummary do not count here: a value only they hold is read
    from the preview, not found. A reply that says nothing was found ("None", `says_nothing`) is never a value.
    """
    text = reply.strip()
    if "\n" in text or not text:
        return None
    value = text.rstrip(".").strip(_WRAPPERS).strip()
    if (not short_answer(value) or len(value.split()) > PROSE_WORDS or value.lower().startswith(("final", "submit"))
            or says_nothing(value)):  # says_nothing covers NOT FOUND
        return None
    return value if _all_shown(value, _shown(trajectory, run_id, seen)) else None


_BOXED = re.compile(r"\\boxed\{([^{}\n]{1,300})\}")


def boxed_answer(reply: str, *, trajectory: Trajectory, run_id: str, seen: Sequence[str] = ()) -> str | None:
    """The value of the last `\\boxed{...}` in prose (a reply without code), when a real output of the run, a
    sub-call reply or one of the `seen` texts (a first reading) shows it; else None.

    `\\boxed{}` is how models trained on worked solutions (Qwen, DeepSeek and others) mark their final answer.
    Recorded (RULER niah_multivalue at 32K, Qwen2.5-Coder 1.5B): turn 1 reasoned over the first reading in 1,127
    characters and ended "are \\(\\boxed{7975534, 8816912, 2044645, 6551268}\\)", all four numbers; too long to
    read as restating the reading, it was told it had no code, and the re-asked step submitted the question's key.
    As with `prose_answer`, a value only the question or the InputsSummary holds does not count.
    """
    found = _BOXED.findall(reply)
    if not found:
        return None
    value = found[-1].strip().strip(_WRAPPERS).strip()
    if not value or says_nothing(value):
        return None
    return value if _all_shown(value, _shown(trajectory, run_id, seen)) else None


RESTATE_CHARS = 400
"""Longest prose reply read as restating a first reading's answer (longer prose is reasoning, not an answer)."""


def _sub_replies(trajectory: Trajectory, run_id: str) -> list[str]:
    """The replies of the run's sub-calls (the first reading's among them)."""
    return [e.reply for e in trajectory.of(SubCallFinished) if e.reply and e.run_id == run_id]


def _all_shown(value: str, texts: list[str]) -> bool:
    """Whether `texts` show `value`, or, for a list written with commas, each of its items (the places of a text
    each read alone give one item each)."""
    if found_in(value, texts):
        return True
    items = [item.strip(" .`'\"") for item in value.split(",")]
    return len(items) > 1 and all(items) and all(found_in(item, texts) for item in items)


def _shown(trajectory: Trajectory, run_id: str, seen: Sequence[str]) -> list[str]:
    """What the run has really shown the model: `seen`, its steps' outputs and its sub-call replies."""
    return [*seen, *(step.text for step in steps_of(trajectory, run_id)), *_sub_replies(trajectory, run_id)]
