"""What a run really printed, read as evidence: for the stall breaker, the evidence check and the fallback.

Entry points:
- `steps_of(trajectory, run_id)`: the run's executed steps, each with the text its code really printed
  (stdout, stderr, the error), in turn order, from its `CodeExecuted` events.
- `latest_other(steps, repeat_of)`: the most recent step whose output differs from a repeated one (what
  the stall note points at), with `last_lines`.
- `output_tails(steps, ...)`: the end of each distinct output, bounded (what the fallback answers from).
- `copied_from(answer, texts)`: a long answer a text input holds verbatim; `partly_holds(answer, named)`: the
  first reading's named-place answers an answer holds, when some but not all (both sent back once by `turn`).
- `boxed_answer(reply, ...)`: the last `\\boxed{...}` of prose, when real output showed it (a final answer so marked);
  `prose_answer(reply, ...)`: a reply that is only a short value which real output showed (an answer in prose);
  `restated(reply, answers)`: the first reading's answer that prose restates (that answer is the run's answer);
  `states_shown_value(reply, ...)`: prose that states such a value (it may be the answer: the note says how to
  submit it).
- `typed_data(code, shown)`: the characters of long string literals in the code that copy text the model was shown
  (the InputsSummary's preview, earlier outputs): code that analyses its own copy says nothing about the input.
- `held_by(answer, text, question=...)` / `holding_excerpt(...)`: whether a text holds what an answer adds to the
  question, and the words around where it does (a first reading's part answer checked against that part).
- `says_nothing(answer)`: a submission that says nothing was found (None, empty, "not found"): sent back once
  when the run's first reading found an answer.
- `prints_own_text(code)`: a step that only prints literals written in its code (it read no data);
  `prints_positions(code)`: one that prints only where things are (offsets are not values; not evidence).
- `asks_only_the_question(prompt, ...)`: a sub-call prompt that carries nothing to read (the question again);
  `guessed_by_sub_call(answer, ...)`: the turn of such a call whose reply an answer came from, when nothing shown
  before held it; `bare_sub_calls(...)`: how many a turn made (its output gets a note).
- `unevidenced(answer, ...)`: where a short submitted answer came from when the model typed it into its
  code and no output printed before that, no sub-call reply and no opening text (question, InputsSummary)
  contains it; None when the answer is evidenced, computed, or not short.

The check reads only what the run recorded: the trajectory's outputs and replies and the conversation's
opening texts, never an input's body (a value in an input that nothing printed is not evidence the
model saw). "Typed" is read from the code's syntax: the argument of `submit` / `FINAL` (or the variable
`FINAL_VAR` names) is a literal, or a variable whose latest assignment is one; a distinctive value (a
number of three or more digits, a string with a digit) written as any literal in the code counts too. A
value the code computed is never sent back: the check is about invented values, not correctness.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlmnb.events import CodeExecuted, RunFinished, SubCallFinished, SubCallStarted, Trajectory

__all__ = ["ASKING_WORDS", "BARE_PROMPT_CHARS", "COPY_CHARS", "ECHOED", "ECHO_WORDS", "EMPTY_WORDS", "NOT_FOUND",
           "NOT_HELD", "RARE_MENTIONS", "RESTATE_CHARS", "Reading", "Step", "Unevidenced", "answer_strings",
           "asks_only_the_question", "bare_sub_calls", "boxed_answer", "copied_from", "echoes_question",
           "found_before", "found_in", "guessed_by_sub_call", "held_by", "holding_excerpt", "last_lines",
           "latest_other", "listed_items", "output_tails", "output_text", "partly_holds", "prints_own_text",
           "prints_positions", "prose_answer", "question_mentions", "question_names", "restated", "same_words",
           "says_nothing", "short_answer", "states_shown_value", "steps_of", "typed_at", "typed_data", "unevidenced"]

SHORT_CHARS = 60
"""Longest string answer the evidence check reads (longer ones are prose, not a looked-up value)."""
PROSE_WORDS = 4
"""Most words of a prose reply taken as a bare answer (`prose_answer`). Recorded (RULER niah_multivalue 8k): the
root sent back a six-word line its own code had printed ("The phrase '...' appears 0 times.") and the run ended
with it; a looked-up value ("4015985", "France", "William the Conqueror") is a few words."""
SHORT_WORDS = 6


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


# ---- the stall breaker's pointer ------------------------------------------------------------------
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


# ---- the fallback's evidence ----------------------------------------------------------------------
def output_tails(steps: Sequence[Step], *, per_step: int = 400, total: int = 4000) -> list[str]:
    """"Turn N printed:" blocks with the end of each distinct non-empty output, newest kept within `total`.

    Each block holds the output's last whole lines that fit in `per_step` characters (a short output whole; a
    last line longer than that, its end). A repeated output is listed once, under its first turn. When the blocks
    do not all fit, the oldest are left out (the newest outputs are the likeliest to hold what the run found).
    Recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B): the root's count printed a header and the ten words, 190
    characters; the fallback was shown its last six lines and answered those six words.
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


# ---- a bare answer in prose --------------------------------------------------------------------------
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
    return value if found_in(value, _shown(trajectory, run_id, seen)) else None


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
    return value if found_in(value, _shown(trajectory, run_id, seen)) else None


@dataclass(frozen=True)
class Reading:
    """A first reading the root was shown (`first_read`): the message, its answer lines (what the fallback and
    the stall note show again) and the answers a restating reply submits (no "NOT FOUND", no error slots)."""

    message: str
    answers_text: str
    values: tuple[str, ...]
    named: tuple[str, ...] = ()  # the distinct answers of the places naming the question's names, read alone
    marked: tuple[tuple[str, str], ...] = ()  # (answer, mark): the answers marked `NOT_HELD` or `ECHOED`
    named_where: str = "where the input names what the question asks about (each place read alone)"
    """Where `named` came from, as the partial guard's note says it."""
    twice: bool = False
    """A whole text read with both prompts (the reading's and the plain asking's) gave the same one answer."""


def answer_strings(answer: Any) -> list[str]:
    """The strings a submitted answer holds: the answer itself, or the items (values of a dict) of a list or tuple."""
    items = answer.values() if isinstance(answer, dict) else answer if isinstance(answer, list | tuple) else [answer]
    return [v for v in items if isinstance(v, str)]


def same_words(a: str, b: str) -> bool:
    """Whether two texts are the same words in the same order (case, punctuation and layout aside)."""
    return bool(words := _tokens(a)) and words == _tokens(b)


EMPTY_WORDS = frozenset({"", "none", "null", "nan", "n/a", "not found", "nothing", "nothing found", "no answer",
                         "unknown"})


def says_nothing(answer: Any) -> bool:
    """Whether a submitted answer says nothing was found: None, an empty string or collection, or one of
    `EMPTY_WORDS` (case and a trailing full stop aside)."""
    if answer is None:
        return True
    if isinstance(answer, str):
        return answer.strip().rstrip(".").strip().lower() in EMPTY_WORDS
    if isinstance(answer, list | tuple | dict | set | frozenset):
        return len(answer) == 0
    return False


NOT_FOUND = "NOT FOUND"
"""What a first reading's part answers when it does not hold the answer (prompts/first_read_ask.md): never an answer."""
RESTATE_CHARS = 400
"""Longest prose reply read as restating a first reading's answer (longer prose is reasoning, not an answer)."""


COPY_CHARS = 2_000
"""An answer string this long that an input's text holds verbatim is a copy of the input, not an answer."""


def copied_from(answer: Any, texts: Iterable[tuple[str, str]]) -> tuple[str, int] | None:
    """(input name, characters) when `answer` is a string of at least `COPY_CHARS` characters (surrounding
    whitespace aside) that one of `texts` ((name, text) pairs) holds verbatim; else None."""
    if not isinstance(answer, str) or len(body := answer.strip()) < COPY_CHARS:
        return None
    return next(((name, len(body)) for name, text in texts if body in text), None)


def partly_holds(answer: Any, named: Sequence[str]) -> tuple[str, ...] | None:
    """The answers of `named` (several places' answers, each read alone) that `answer` holds, when it holds some of
    them but not all; None when it holds all or none, or there are fewer than two."""
    if len(named) < 2:
        return None
    if isinstance(answer, list | tuple | set | frozenset):
        text = "\n".join(str(a) for a in answer)
    else:
        text = answer if isinstance(answer, str) else str(answer)
    held = tuple(n for n in named if found_in(n, [text]))
    return held if 0 < len(held) < len(named) else None


_ITEM = re.compile(r"(?<![\w.,])(?:\d{3,}|(?=[A-Z0-9]*[A-Z])[A-Z0-9]{3,})(?!\w|[.,]\d)")


def listed_items(answers: Iterable[str], text: str, *, question: str) -> tuple[str, ...]:
    """The items `answers` list that `text` holds as whole tokens and `question` does not give: numbers of three or
    more digits and codes in capitals (three or more letters and digits, "HZYVC", "SKU42"), in order, once each.
    Ordinary words are no items: a sentence's words are not a list.

    Recorded (RULER vt at 8K, Qwen2.5-Coder 1.5B): the whole text asked plainly named the five variables of a
    chain, "... they are: HZYVC FQZBI ZUFVO PVGUU PHZZO"; the root's code found the one assigned directly
    (`['HZYVC']`). As items, an answer holding some of them goes back once with the list (`partly_holds`)."""
    asked = set(_tokens(question))
    have = set(_TOKEN.findall(text))
    items = (m.group() for a in answers for m in _ITEM.finditer(a))
    return tuple(dict.fromkeys(i for i in items if i.casefold() not in asked and i in have))


def restated(reply: str, answers: Sequence[str]) -> str | None:
    """The answer of `answers` that prose (a reply without code, at most `RESTATE_CHARS`) restates whole, or None.

    `answers` are what a sub-model answered to the run's own question (a first reading), so restating one is
    answering with it, and that answer, not the sentence around it, is the run's answer: the reading was asked for
    the answer alone, the sentence adds only words (recorded, `rlmnb eval`'s niah at 8K: "The special magic
    number for scarlet jackal is 1892269." for "Answer with the 7-digit number only", scored 0 by exact match where
    the reading said "1892269"). Prose that restates several different answers (it combines them) is returned whole,
    unless one of them holds all the others (a list the reading gave, and its items). A comma-separated answer is
    restated when the prose holds each of its items (recorded, RULER niah_multivalue at 32K: the reading gave
    "7975534, 8816912, 2044645, 6551268", the root said "... are 7975534, 8816912, 2044645, and 6551268.").
    """
    text = reply.strip()
    if not text or len(text) > RESTATE_CHARS or "```" in text:
        return None
    found = {answer.strip() for answer in answers if answer.strip() and _restates(answer, text)}
    widest = {a for a in found if not any(a != b and found_in(a, [b]) for b in found)}  # "1, 2" covers "1" and "2"
    return widest.pop() if len(widest) == 1 else (text if found else None)


def _restates(answer: str, text: str) -> bool:
    """Whether `text` holds `answer` whole, or every item of a comma-separated `answer`."""
    if found_in(answer, [text]):
        return True
    items = [item.strip() for item in answer.split(",") if item.strip()]
    return len(items) > 1 and all(found_in(item, [text]) for item in items)


_STATED = re.compile(r"`([^`\n]{1,60})`|\"([^\"\n]{1,60})\"|'([^'\n]{1,60})'")
_LISTED = re.compile(r"^[ \t]*(?:[-*]|\d{1,3}[.)])[ \t]+([^\W_][\w-]{2,59})\b", re.M)
"""The first word of each list line ("- sermon: 30", "2. lapdog"): a listed term a statement states."""
_LISTED_AFTER_COLON = re.compile(r":[ \t]*((?:[^\W\d_][\w-]{2,40}[ \t]*,[ \t]*)+(?:and[ \t]+)?[^\W\d_][\w-]{2,40})")
"""A run of two or more single words after a colon, comma-separated ("are: sermon, lapdog, underground."): each
word is a listed term. Recorded (RULER cwe at 8K, on 1704f9e): turn 1 counted the words and printed ten; turns 2
and 4 said "The top 10 words that appear most often in the list are: sermon, lapdog, ..., laundry.", which stated
no term the rule saw, so the second saying did not end the run."""


def states_shown_value(reply: str, *, trajectory: Trajectory, run_id: str, seen: Sequence[str] = (),
                       question: str = "") -> bool:
    """Whether prose (a reply without code) states a value real output showed: a number of two or more digits or a
    quoted, `backticked` or listed term (`_LISTED`) that sub-call replies, `seen` texts or a step's output hold (an output only where
    its step's code does not hold the value: a printed literal of the model's own is not something it found), and
    `question` does not give. Recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B): "I'm sorry, but the text provided
    does not contain any words to count or rank. The question asks for the 10 most common words ..." said twice in
    a row ended the run as its answer, the question's "10" counted as a value the outputs ("10. enchanting")
    showed. Recorded (RULER niah_multivalue at 32K, on 8adb350): a step printed its own string "The phrase 'special
    magic number for smelly-barrage' was not found in the input." (it searched for the singular); the root said
    that sentence at turns 2 and 3 and it ended the run, where the reading had given all four numbers. The first
    word of a list line counts as a stated term: recorded (RULER cwe at 8K), "- sermon: 30" for ten words its count
    printed stated nothing else the question does not give (its worked example numbers its items up to 190)."""
    values: list[Any] = [m.group(0) for m in _NUMBER.finditer(reply) if len(m.group(0).replace(",", "")) >= 2]
    values += [next(g for g in m.groups() if g) for m in _STATED.finditer(reply)]
    values += _LISTED.findall(reply)
    values += [w for run in _LISTED_AFTER_COLON.findall(reply)
               for w in re.split(r"[ \t]*,[ \t]*(?:and[ \t]+)?", run.strip())]
    if question:
        values = [v for v in values if not found_in(v, [question])]
    if not values:
        return False
    texts = [*seen, *_sub_replies(trajectory, run_id)]
    steps = _finding_steps(trajectory, run_id)
    return any(found_in(v, texts) or any(found_in(v, [s.text]) and not found_in(v, [s.code]) for s in steps)
               for v in values)


def _sub_replies(trajectory: Trajectory, run_id: str) -> list[str]:
    """The replies of the run's sub-calls (the first reading's among them)."""
    return [e.reply for e in trajectory.of(SubCallFinished) if e.reply and e.run_id == run_id]


def _shown(trajectory: Trajectory, run_id: str, seen: Sequence[str]) -> list[str]:
    """What the run has really shown the model: `seen`, its steps' outputs and its sub-call replies."""
    return [*seen, *(step.text for step in _finding_steps(trajectory, run_id)), *_sub_replies(trajectory, run_id)]


def found_before(prose: str, turn: int, steps: Sequence[Step], *, question: str) -> bool:
    """Whether `prose`, said at `turn`, states what the outputs of earlier steps held (`held_by` over the output of
    every step before `turn` that shows values): a statement of a finding, not a guess made before the output that
    holds it. Recorded (RULER niah_single_2 at 8K): turn 1 said the number "is 4", from the input summary's preview;
    turn 2 printed the text's head, which holds that "4"; it was a guess all the same."""
    outputs = "\n".join(s.text for s in _findings(steps) if s.turn < turn)
    return bool(outputs) and held_by(prose, outputs, question=question) is True


def _finding_steps(trajectory: Trajectory, run_id: str) -> list[Step]:
    """The run's steps whose output can show a value the input holds: not those that print only positions."""
    return _findings(steps_of(trajectory, run_id))


def _findings(steps: Iterable[Step]) -> list[Step]:
    return [step for step in steps if not prints_positions(step.code)]


# ---- sub-calls given nothing to read ---------------------------------------------------------------
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
    prompt's length (events keep a clipped prompt). Recorded (RULER niah_single_2 at 8K, Qwen2.5-Coder 1.5B, on d92f852): sent back by guard
    `reading`, the root ran `llm_query("What is the special magic number for tangy-midnight mentioned in the
    provided text?")`, printed the reply's "12" and submitted it."""
    if not question.strip() or prompt_chars > min(len(prompt), BARE_PROMPT_CHARS):
        return False
    numbers, words = _stated(prompt, question)
    if numbers or any(w not in ASKING_WORDS for w in words):
        return False
    asked = set(_long_words(question)) - ASKING_WORDS
    return len(asked.intersection(_long_words(prompt))) >= min(ECHO_WORDS, len(asked)) > 0


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
    before = [*opening, *(s.text for s in _finding_steps(trajectory, run_id) if s.turn < turn),
              *(e.reply or "" for e in replies if e.call_id not in bare)]
    return None if found_in(answer, before) else turn


def bare_sub_calls(trajectory: Trajectory, run_id: str, turn: int, question: str) -> int:
    """How many of the run's sub-calls at `turn` were given only the question (`asks_only_the_question`)."""
    return sum(1 for e in trajectory.of(SubCallStarted) if e.run_id == run_id and e.turn == turn and _bare(e, question))


def _bare(call: SubCallStarted, question: str) -> bool:
    """A sub-call given nothing to read: no image (an image is input it reads) and a prompt that only asks the
    question (`asks_only_the_question`). Recorded in the suite: `llm_query('Total?', images=[scan])` for the
    question "Total?" reads the scan."""
    return not call.images and asks_only_the_question(call.prompt, call.prompt_chars, question)


# ---- the evidence check ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Unevidenced:
    """A short answer the model typed at `typed_turn` that nothing it saw before contained."""

    value: Any
    typed_turn: int


def short_answer(answer: Any) -> bool:
    """A number (not a bool) or a one-line string of a few words: the values a model can invent."""
    if isinstance(answer, bool) or answer is None:
        return False
    if isinstance(answer, int | float):
        return not (isinstance(answer, float) and not math.isfinite(answer))
    if isinstance(answer, str):
        text = answer.strip()
        return bool(text) and "\n" not in text and len(text) <= SHORT_CHARS and len(text.split()) <= SHORT_WORDS
    return False


_NUMBER = re.compile(r"(?<![\d.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r"[^\W_]+")
_SUBMITS = ("submit", "FINAL")


def _as_number(value: Any) -> float | None:
    """The number an answer stands for: a number, or a string such as '4,015,985', '$12.50' or '12%'."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip().strip("$€£%").replace(",", "").replace("_", "").strip()
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _decimals(value: Any) -> int:
    text = value.strip().rstrip("%") if isinstance(value, str) else repr(value)
    return len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def found_in(answer: Any, texts: Iterable[str]) -> bool:
    """Whether `answer` appears in any of `texts`: as a number (commas, rounding to the answer's decimals
    and percentages allowed) or, for a string, as the run of its words."""
    number = _as_number(answer)
    words = _tokens(answer) if isinstance(answer, str) else []
    decimals = _decimals(answer)
    for text in texts:
        if not text:
            continue
        if number is not None and _number_in(number, decimals, text):
            return True
        if words and _words_in(words, _ROW_LABEL.sub("", text) if number is not None else text):
            return True
    return False


def _stated(answer: str, question: str) -> tuple[list[str], list[str]]:
    """What `answer` states beyond `question`: its numbers the question does not give, and its words of four or
    more letters the question does not use (in order, once each)."""
    asked = set(_tokens(question))
    numbers = [m.group() for m in _NUMBER.finditer(answer) if m.group().replace(",", "") not in asked]
    return numbers, [w for w in _long_words(answer) if w not in asked]


def _long_words(text: str) -> list[str]:
    """The words of `text` of four or more letters (not numbers), in order, once each."""
    return list(dict.fromkeys(w for w in _tokens(text) if len(w) >= 4 and not w.isdigit()))


NOT_HELD = "not in this part's text"
"""The mark a first reading puts after a part's answer that its text does not contain (`held_by`)."""
ECHOED = "not in the text: the question's own words"
"""The mark a first reading puts after a whole text's answer copied from the question (`echoes_question`)."""

ECHO_WORDS = 3
"""Words (of four or more letters) an answer made only of the question's words needs before `echoes_question` checks them."""


def held_by(answer: str, text: str, *, question: str = "") -> bool | None:
    """Whether `text` holds what `answer` states beyond `question`: every number the answer gives that the question
    does not (read as `found_in` reads numbers), or, for an answer without such numbers, at least half of its words
    of four or more letters that the question does not use.

    An answer of the question's own words states nothing beyond it: None (nothing to check: a choice the question
    offers, a restatement), unless it echoes the question (`echoes_question`); then False."""
    numbers, words = _stated(answer, question)
    if numbers:
        return all(_number_in(float(n.replace(",", "")), _decimals(n), text) for n in numbers)
    if not words:  # the question's own words: checked only when there are enough of them
        return False if echoes_question(answer, text, question=question) else None
    have = set(_tokens(text))
    return 2 * sum(w in have for w in words) >= len(words)


def echoes_question(answer: str, text: str, *, question: str) -> bool:
    """Whether `answer` is made only of `question`'s words and numbers, with `ECHO_WORDS` or more words of four or
    more letters, fewer than half of which `text` holds: an answer copied from the question (its worked example),
    not read from `text`. Recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B): all four parts of a numbered word list
    answered "ketchup, fresh, dreamer, adult, server", the answer of the worked example inside the question, which
    none of the parts holds; counted as the reading's answer, the root submitted it over its own correct count."""
    numbers, words = _stated(answer, question)
    if numbers or words:
        return False
    words = _long_words(answer)
    if len(words) < ECHO_WORDS:
        return False
    have = set(_tokens(text))
    return 2 * sum(w in have for w in words) < len(words)


def holding_excerpt(answer: str, text: str, *, question: str = "", width: int = 240) -> str:
    """The words of `text` around the first place it holds what `answer` states beyond `question` (its first such
    number, else its first such word): its line, or at most about `width` characters of it cut between words,
    whitespace folded, "..." where cut; "" when `text` holds none of it."""
    numbers, words = _stated(answer, question)
    patterns = [r"(?<![\d.,])" + re.escape(n) + r"(?![\d])" for n in numbers[:1]]
    patterns += [_word_pattern(w) for w in words]
    for pattern in patterns:
        hit = re.search(pattern, text, re.IGNORECASE)
        if hit is not None:
            return _around(text, hit.start(), hit.end(), width)[2]
    return ""


RARE_MENTIONS = 5
"""Most times the input may mention a name in the question for `question_mentions` to quote where it does."""
_TERM = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_SENTENCE_START = re.compile(r"(?:^|[.?!:\n\[(]\s*)$")


def question_names(question: str) -> list[str]:
    """The names a question asks about, as written: its terms of three or more characters (hyphenated words whole;
    a plain number of four or more digits) that hold a digit, join words with a hyphen or underscore, are written in
    capitals, or start with a capital where no sentence starts."""
    names = []
    for m in _TERM.finditer(question):
        term = m.group()
        if len(term) < 3 or (term.isdigit() and len(term) < 4):  # "10", "190": counts and list numbers
            continue
        if (any(c.isdigit() for c in term) or "-" in term or "_" in term
                or (len(term) > 1 and term.isupper())
                or (term[0].isupper() and not _SENTENCE_START.search(question[max(0, m.start() - 3):m.start()]))):
            names.append(term)
    return list(dict.fromkeys(names))


def question_mentions(question: str, text: str, *, width: int = 240, names: int = 4,
                      rare: int = RARE_MENTIONS) -> list[tuple[str, str]]:
    """(name, excerpt) for each place `text` mentions a name the question asks about (`question_names`) that it holds
    between one and `rare` times: the rarest `names` of them, each place's words as `holding_excerpt` cuts them,
    places that overlap an earlier one left out. A name the input mentions more often is not where to look."""
    counted = []
    for name in question_names(question):
        hits = [(m.start(), m.end()) for m in re.finditer(_word_pattern(name), text, re.IGNORECASE)]
        if 1 <= len(hits) <= rare:
            counted.append((len(hits), name, hits))
    found: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for _, name, hits in sorted(counted, key=lambda c: c[0])[:names]:
        for start, end in hits:
            lo, hi, excerpt = _around(text, start, end, width)
            if not any(lo < b and a < hi for a, b in spans):
                spans.append((lo, hi))
                found.append((name, excerpt))
    return found


def _word_pattern(word: str) -> str:
    return r"(?<![^\W_])" + re.escape(word) + r"(?![^\W_])"


def _around(text: str, start: int, end: int, width: int) -> tuple[int, int, str]:
    """(lo, hi, excerpt): the line of `text` holding [start, end), or at most about `width` characters of it cut
    between words, whitespace folded, "..." where cut."""
    lo, hi = max(0, start - width // 2), min(len(text), end + width // 2)
    line_start, line_end = text.rfind("\n", lo, start), text.find("\n", end, hi)
    if line_start >= 0:
        lo = line_start + 1
    elif lo > 0:  # cut between words
        lo = next((i + 1 for i in range(lo - 1, start) if text[i].isspace()), lo)
    if line_end >= 0:
        hi = line_end
    elif hi < len(text):
        hi = next((i for i in range(hi, end, -1) if text[i].isspace()), hi)
    head = "..." if lo > 0 and text[lo - 1] != "\n" else ""
    tail = "..." if hi < len(text) and text[hi] != "\n" else ""
    return lo, hi, head + " ".join(text[lo:hi].split()) + tail


_ROW_LABEL = re.compile(r"(?m)^[ \t]*\d+(?=[ \t]{2,}\S)")
"""An integer opening a line and followed by a column gap: the row label of a printed table (pandas, a Series)."""


def _number_in(number: float, decimals: int, text: str) -> bool:
    """Whether `text` shows `number` (rounded to `decimals`), a table's row labels aside: recorded (bench/realmodel.py
    billing, on f9d7749), the root printed the billing rows of a 2,000-row frame, said "The filtered DataFrame has
    15 rows" twice, and 15, the label of one printed row, counted as a value the output showed: the run ended."""
    target = abs(number)
    if target.is_integer() and decimals == 0:  # the common case first, without parsing every number
        plain = str(int(target))
        if plain not in text and f"{int(target):,}" not in text:
            return False
        text = _ROW_LABEL.sub("", text)
        return any(_close(float(m.group().replace(",", "")), target, 0) for m in _NUMBER.finditer(text))
    text = _ROW_LABEL.sub("", text)
    return any(_close(float(m.group().replace(",", "")), target, decimals) for m in _NUMBER.finditer(text))


def _close(seen: float, target: float, decimals: int) -> bool:
    if math.isclose(seen, target, rel_tol=1e-9, abs_tol=1e-12):
        return True
    return bool(decimals) and (round(seen, decimals) == target or round(seen * 100, decimals) == target)


def _words_in(words: list[str], text: str) -> bool:
    joined = " ".join(words)
    return f" {joined} " in f" {' '.join(_tokens(text))} "


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) when `node` is a constant written in the code (also -5, int('7'), f'text')."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        ok, value = _literal(node.operand)
        if ok and isinstance(value, int | float) and not isinstance(value, bool):
            return True, -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return True, "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float", "str")
            and len(node.args) == 1 and not node.keywords):
        return _literal(node.args[0])
    return False, None


def prints_own_text(code: str) -> bool:
    """Whether a step only writes out text of its own: every statement assigns a literal (a constant, or a list,
    tuple, set or dict of them) or prints / echoes literals and names so assigned, and it prints something.
    Its output then says nothing about the input. Recorded (RULER niah_multivalue 8k, Qwen2.5-Coder 1.5B): the
    root's first step was `print("No special magic numbers found.")`; the next turn took that line as a finding
    and submitted None, while the first reading had named two of the numbers."""
    tree = _parse(code)
    if tree is None:
        return False
    own: set[str] = set()
    printed = False

    def plain(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in own
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return all(plain(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and plain(k) for k in node.keys) and all(plain(v) for v in node.values)
        return _literal(node)[0]

    for statement in tree.body:
        if isinstance(statement, ast.Pass):
            continue
        if isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets):
            if not plain(statement.value):
                return False
            own.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        elif isinstance(statement, ast.Expr) and (plain(statement.value) or _prints_plain(statement.value, plain)):
            printed = True
        else:
            return False
    return printed


_POSITION_CALLS = frozenset({"start", "end", "span", "find", "rfind", "index", "rindex"})
"""Methods that say where something is (`re.Match.start`, `str.find`, `list.index`), not what is there."""


def prints_positions(code: str) -> bool:
    """Whether a step prints only where things are: every `print(...)` (and a trailing expression, which the
    sandbox echoes) shows string literals and position calls (`_POSITION_CALLS`), directly or through names
    assigned from them, and it prints something. The numbers it prints are offsets, not values the input holds.
    Recorded (RULER niah_multivalue 8k, Qwen2.5-Coder 1.5B): `magic_number = re.search(r"deranged-asparagus",
    text).start()` then `print(magic_number)` showed "939"; the root said "The special magic number ... is 939."
    twice and that ended the run as the answer."""
    tree = _parse(code)
    if tree is None:
        return False
    positions: set[str] = set()

    def offset(node: ast.AST) -> bool:  # a position call, or a name assigned one
        if isinstance(node, ast.Name):
            return node.id in positions
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _POSITION_CALLS

    def formatted(node: ast.AST) -> list[ast.AST]:  # the values an f-string formats
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)] if isinstance(
            node, ast.JoinedStr) else []

    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)
                and offset(node.value)):
            positions.update(t.id for t in node.targets if isinstance(t, ast.Name))
    shows = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"]
    last = tree.body[-1] if tree.body else None
    shown = [arg for call in shows for arg in call.args]
    shown += [last.value] if isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call) else []
    values = [v for arg in shown for v in (formatted(arg) or [arg])
              if not (isinstance(v, ast.Constant) and isinstance(v.value, str))]
    return bool(values) and all(offset(v) for v in values)


def _prints_plain(node: ast.AST, plain: Any) -> bool:
    """A `print(...)` call whose arguments are all `plain`."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
            and all(plain(a) for a in node.args))


def _same(value: Any, answer: Any) -> bool:
    number, other = _as_number(answer), _as_number(value)
    if number is not None and other is not None:
        return math.isclose(number, other, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(value, str) and isinstance(answer, str):
        return _tokens(value) == _tokens(answer) and bool(_tokens(answer))
    return False


def _distinctive(answer: Any) -> bool:
    """Values unlikely to be in code by chance: numbers of 3+ digits, strings with a digit (ids, keys)."""
    number = _as_number(answer)
    if isinstance(answer, str):
        return any(ch.isdigit() for ch in answer) and len(answer.strip()) >= 3
    return number is not None and (not number.is_integer() or abs(number) >= 100)


TYPED_DATA_CHARS = 200
"""Fewest characters of shown text in a step's string literals before its output carries the typed-data note."""
_CHUNK = 40
"""Literals are compared with what was shown in pieces of this many characters (a copy may start mid-line)."""


def typed_data(code: str, shown: Sequence[str]) -> int:
    """Characters of the code's long string literals (at least `TYPED_DATA_CHARS`) that copy text the model was
    shown (the opening's preview, earlier outputs), counted in `_CHUNK`-character pieces; 0 below the threshold or
    when the code does not parse.

    Recorded (RULER vt and cwe at 8K, Qwen2.5-Coder 1.5B): the root pasted the preview, or the 500 characters an
    earlier step printed, into `text = \"\"\"...\"\"\"`, counted in that copy and printed the count as if it were
    the input's; nothing told it the count was of its own copy.
    """
    tree = _parse(code)
    if tree is None:
        return 0
    seen = "\n".join(" ".join(text.split()) for text in shown)
    copied = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= TYPED_DATA_CHARS:
            flat = " ".join(node.value.split())
            copied += sum(_CHUNK for i in range(0, len(flat) - _CHUNK + 1, _CHUNK) if flat[i:i + _CHUNK] in seen)
    return copied if copied >= TYPED_DATA_CHARS else 0


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _submitted_expr(tree: ast.Module) -> list[ast.AST | str]:
    """The argument of each submit()/FINAL() call, or the variable name a FINAL_VAR() call gives."""
    found: list[ast.AST | str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id in _SUBMITS and node.args:
            found.append(node.args[0])
        elif node.func.id in _SUBMITS and node.keywords:
            found.append(node.keywords[0].value)
        elif node.func.id == "FINAL_VAR" and node.args:
            ok, name = _literal(node.args[0])
            if ok and isinstance(name, str):
                found.append(name.strip().strip("'\""))
    return found


def _assignments(tree: ast.Module, name: str) -> list[tuple[int, ast.AST]]:
    """(line, value) of each `name = value` / `name: T = value` in `tree`, in source order."""
    out: list[tuple[int, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            out.append((node.lineno, node.value))
        elif (isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name)
              and node.target.id == name and node.value is not None):
            out.append((node.lineno, node.value if isinstance(node, ast.AnnAssign) else node))
        elif isinstance(node, ast.For | ast.comprehension) and _binds(node.target, name):
            out.append((getattr(node, "lineno", 0), node))
    return sorted(out, key=lambda item: item[0])


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def typed_at(answer: Any, codes: Sequence[tuple[int, str]]) -> int | None:
    """The turn at which the model's code wrote `answer` as a literal, or None when its code computed it.

    `codes` are the run's executed steps (turn, code) in order, the submitting step last.
    """
    trees = [(turn, tree) for turn, code in codes if (tree := _parse(code)) is not None]
    if not trees:
        return None
    turns: list[int] = []
    for expr in _submitted_expr(trees[-1][1]):
        if isinstance(expr, str):
            name: str | None = expr
        else:
            ok, value = _literal(expr)
            if ok and _same(value, answer):
                turns.append(trees[-1][0])
            name = expr.id if isinstance(expr, ast.Name) else None
        if name is None:
            continue
        latest: tuple[int, ast.AST] | None = None  # the variable's latest assignment before the submit
        for turn, tree in trees:
            for _, value_node in _assignments(tree, name):
                latest = (turn, value_node)
        if latest is not None:
            ok, value = _literal(latest[1])
            if ok and _same(value, answer):
                turns.append(latest[0])
    if _distinctive(answer):
        for turn, tree in trees:
            if any(_literal_holds(node, answer) for node in ast.walk(tree)):
                turns.append(turn)
                break
    return min(turns) if turns else None


def _literal_holds(node: ast.AST, answer: Any) -> bool:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return False
    if _same(node.value, answer):
        return True
    if isinstance(node.value, str) and isinstance(answer, str | int | float):
        words = _tokens(str(answer) if not isinstance(answer, str) else answer)
        return bool(words) and _words_in(words, node.value)
    return False


def unevidenced(answer: Any, *, turn: int, trajectory: Trajectory, run_id: str, code: str,
                opening: Sequence[str]) -> Unevidenced | None:
    """Whether a submitted answer must go back to the model as unevidenced (see the module docs).

    Args:
        answer: the submitted value; `code`: the submitting step's code (not yet in the trajectory).
        turn: the submitting turn; `run_id`: the run; `opening`: the texts the model was given (question,
            InputsSummary, later questions and revision requests).
    """
    if not short_answer(answer):
        return None
    steps = steps_of(trajectory, run_id)
    typed = typed_at(answer, [*((s.turn, s.code) for s in steps if s.turn < turn), (turn, code)])
    if typed is None:
        return None
    texts: list[str] = list(opening)
    texts.extend(s.text for s in _findings(steps) if s.turn < typed)
    for event in trajectory.events:
        if isinstance(event, SubCallFinished) and event.reply:  # another model's reading, whenever it came
            texts.append(event.reply)
        elif isinstance(event, CodeExecuted) and event.run_id != run_id:  # child and earlier runs
            texts.append(output_text(event.stdout, event.stderr, event.error))
        elif isinstance(event, RunFinished) and event.run_id != run_id and event.answer is not None:
            texts.append(str(event.answer))
    return None if found_in(answer, texts) else Unevidenced(answer, typed)
