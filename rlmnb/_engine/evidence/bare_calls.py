"""Sub-calls given nothing to read: a prompt that is the question again (`asks_only_the_question`), the answers that came from one (`guessed_by_sub_call`) and how many a turn made (`bare_sub_calls`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlmnb._engine.evidence.shown import (
    found_in,
    short_answer,
)
from rlmnb._engine.evidence.steps import steps_of
from rlmnb._ground.passages import (
    ECHO_WORDS,
    long_words,
    stated_beyond,
)
from rlmnb.events import SubCallFinished, SubCallStarted, Trajectory

__all__ = ["ASKING_WORDS", "BARE_PROMPT_CHARS", "asks_only_the_question", "bare_sub_calls", "guessed_by_sub_call"]


ASKING_WORDS = frozenset({
    "what", "which", "where", "when", "whose", "answer", "answers", "asked", "asking", "based", "context", "data",
    "document", "documents", "find", "from", "given", "give", "input", "inputs", "mentioned", "please", "provided",
    "question", "read", "reading", "reread", "return", "says", "show", "tell", "text", "texts", "that", "this",
    "there", "these", "those", "with", "within", "about", "again", "only"})
"""Words of four or more letters a prompt may add to the question and still carry nothing to read
(`asks_only_the_question`)."""


BARE_PROMPT_CHARS = 2000
"""Longest sub-call prompt `asks_only_the_question` reads; a longer one carries something to read."""


def asks_only_the_question(prompt: str, prompt_chars: int, question: str) -> bool:
    """Whether a sub-call's prompt is the question again with nothing to read: it uses the question's words (at
    least `ECHO_WORDS` of its four-letter words outside `ASKING_WORDS`, or all of them when it has fewer), and has
    no number the question does not give and no such word beyond the question's and `ASKING_WORDS`. A sub-model
    sees only its prompt, so its reply to the question alone is a guess, not a reading. `prompt_chars` is the whole
    prompt's length (events keep a clipped prompt)."""
    if not question.strip() or prompt_chars > min(len(prompt), BARE_PROMPT_CHARS):
        return False
    numbers, words = stated_beyond(prompt, question)
    if numbers or any(w not in ASKING_WORDS for w in words):
        return False
    asked = set(long_words(question)) - ASKING_WORDS
    return len(asked.intersection(long_words(prompt))) >= min(ECHO_WORDS, len(asked)) > 0


def guessed_by_sub_call(answer: Any, *, trajectory: Trajectory, run_id: str, question: str,
                        opening: Sequence[str]) -> int | None:
    """The turn of the run's first sub-call given only the question (`asks_only_the_question`) whose reply holds a
    short `answer`, when nothing shown before that turn (the opening, earlier outputs, other sub-calls' replies)
    held it; else None. The answer is then the sub-model's guess, however the code passed it on."""
    if not short_answer(answer):
        return None
    bare = {e.call_id: e.turn for e in trajectory.of(SubCallStarted) if e.run_id == run_id and _bare(e, question)}
    replies = [e for e in trajectory.of(SubCallFinished) if e.run_id == run_id and e.reply]
    turns = [bare[e.call_id] for e in replies if e.call_id in bare and found_in(answer, [e.reply or ""])]
    if not turns:
        return None
    turn = min(turns)
    before = [*opening, *(s.text for s in steps_of(trajectory, run_id) if s.turn < turn),
              *(e.reply or "" for e in replies if e.call_id not in bare)]
    return None if found_in(answer, before) else turn


def bare_sub_calls(trajectory: Trajectory, run_id: str, turn: int, question: str) -> int:
    """How many of the run's sub-calls at `turn` were given only the question (`asks_only_the_question`)."""
    return sum(1 for e in trajectory.of(SubCallStarted) if e.run_id == run_id and e.turn == turn and _bare(e, question))


def _bare(call: SubCallStarted, question: str) -> bool:
    """A sub-call given nothing to read: no image (an image is input it reads) and a prompt that only asks the
    question (`asks_only_the_question`). So `llm_query('Total?', images=[scan])` for the question "Total?" is a
    reading of the scan, not a bare call."""
    return not call.images and asks_only_the_question(call.prompt, call.prompt_chars, question)
