"""An answer in prose (policy `prose_answer`): a reply that is only a short value, ends in a `\\boxed{}` value, or
states in a few sentences the numbers or ids real output showed, without saying what it will do next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlmnb._engine.evidence.shown import claims_in, found_in, says_nothing, short_answer
from rlmnb._engine.evidence.steps import steps_of
from rlmnb.events import SubCallFinished, Trajectory

__all__ = ["PROSE_WORDS", "RESTATE_CHARS", "boxed_answer", "prose_answer", "stated_answer"]


PROSE_WORDS = 4
"""Most words of a prose reply taken as a bare answer (`prose_answer`): a looked-up value ("4015985", "France",
"William the Conqueror") is a few words, while a longer line is more often a sentence the model's own code
printed than an answer."""


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

    `\\boxed{}` is how models trained on worked solutions mark their final answer, often at the end of reasoning
    too long to read as a short answer. As with `prose_answer`, a value only the question or the InputsSummary
    holds does not count.
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


_GOING_ON = re.compile(
    r"\b(?:I will|I'll|I am going to|I'm going to|we will|we'll|let me|let's|let us|next|then|first|"
    r"need to|needs to|should|must|to (?:verify|check|confirm|count|find|compute|search|read|look)|"
    r"will (?:now )?(?:check|count|verify|search|look|compute|use|read|run|print))\b|\?", re.IGNORECASE)
"""What a reply that is still working says (a plan, a step it will take, a question): then it is no answer."""


def stated_answer(reply: str, *, trajectory: Trajectory, run_id: str, question: str, before: int | None = None,
                  unheld: Sequence[str] = ()) -> str | None:
    """The reply itself, when it is a short statement (at most `RESTATE_CHARS` characters, no code) of numbers or
    ids beyond the question's that real output or a sub-call reply showed, every one of them, and says nothing of
    going on (`_GOING_ON`: "I will count them with code next" is a plan, not an answer); else None.

    Prose restating a printed value is an ordinary answer ("Billing has 64 tickets."); a model that says it and
    stops has answered. A statement of words alone (labels, names) is not taken: nothing shown can vouch for it.
    `before`: judge by what was shown before that turn (the turn the same words were first said: a guess said again
    after an output that happens to hold its number stays a guess). `unheld`: answers a reading marked as not held by
    the text it was read from, which vouch for nothing."""
    text = " ".join(reply.split())
    if not text or len(text) > RESTATE_CHARS or _GOING_ON.search(text) or says_nothing(text):
        return None
    asked = set(claims_in(question))
    claims = [c for c in claims_in(text) if c not in asked]
    if not claims or any(c in claims_in(u) for u in unheld for c in claims):
        return None
    shown = [*(s.text for s in steps_of(trajectory, run_id) if before is None or s.turn < before),
             *(e.reply for e in trajectory.of(SubCallFinished)
               if e.reply and e.run_id == run_id and (before is None or e.turn < before))]
    return text if all(found_in(claim, shown) for claim in claims) else None
