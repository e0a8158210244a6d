"""What a run really showed, read as evidence by the turn loop's policies.

Entry points:
- `steps_of(trajectory, run_id)`: the run's executed steps with the text their code printed; `latest_other`,
  `last_lines` (what a repeat note points at) and `output_tails` (what the final answer is asked from).
- `copied_from(answer, texts, share=...)`: a long answer that a text input holds verbatim (policy `whole_copy`).
- `prose_answer` / `boxed_answer`: a reply that is only a short value, or ends in a `\\boxed{}` value, that real
  output showed (policy `prose_answer`).
- `value_claims(answer)`: the numbers and ids a short answer claims; `unevidenced(answer, ...)`: a typed claim
  that nothing shown before held (policy `unshown_value`); `found_in`, `typed_at` underneath.
- `asks_only_the_question`, `guessed_by_sub_call`, `bare_sub_calls`: sub-calls given nothing to read, and answers
  that came from them (policies `unshown_value`, `guess_note`).
- `holding_excerpt`, `says_nothing`, `found_before`, `Reading`: for the first reading and the final answer.

The checks read only what the run recorded (the trajectory's outputs and replies, the conversation's opening
texts), never an input's body: a value in an input that nothing printed is not evidence the model saw. "Typed" is
read from the code's syntax: the argument of `submit` / `FINAL` (or the variable `FINAL_VAR` names) is a literal,
or a variable whose latest assignment is one. A value the code computed is never judged: the checks are about
invented values, not correctness.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.passages import (
    ECHO_WORDS,
    held_by,
    long_words,
    number_in,
    passage_around,
    stated_beyond,
    word_pattern,
    words_of,
)
from rlmnb._ground.passages import (
    decimals_of as _str_decimals,  # one number reading for the engine and the sandbox
)
from rlmnb.events import CodeExecuted, RunFinished, SubCallFinished, SubCallStarted, Trajectory

__all__ = [
    "ASKING_WORDS", "BARE_PROMPT_CHARS", "COPY_CHARS", "ECHO_WORDS", "EMPTY_WORDS", "NOT_FOUND", "NOT_HELD",
    "RESTATE_CHARS", "Reading", "Step", "Unevidenced", "asks_only_the_question", "bare_sub_calls", "boxed_answer",
    "copied_from", "found_before", "found_in", "guessed_by_sub_call", "holding_excerpt", "last_lines", "latest_other",
    "output_tails", "output_text", "prose_answer", "says_nothing", "short_answer", "steps_of", "typed_at",
    "unevidenced", "value_claims",
]

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


@dataclass(frozen=True)
class Reading:
    """A first reading the root was shown (policy `first_read`): the message, its answer lines (what the final
    answer's request shows again) and its answers (no "NOT FOUND", no error slots, none marked not held)."""

    message: str
    answers_text: str
    values: tuple[str, ...]


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


def copied_from(answer: Any, texts: Iterable[tuple[str, str]], *, share: float = 0.0) -> tuple[str, int] | None:
    """(input name, characters) when `answer` is a string of at least `COPY_CHARS` characters (surrounding
    whitespace aside) that one of `texts` ((name, text) pairs) holds verbatim, and that covers at least `share` of
    that text; else None."""
    if not isinstance(answer, str) or len(body := answer.strip()) < COPY_CHARS:
        return None
    return next(((name, len(body)) for name, text in texts
                 if len(body) >= share * len(text.strip()) and body in text), None)


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


def found_before(prose: str, turn: int, steps: Sequence[Step], *, question: str) -> bool:
    """Whether `prose`, said at `turn`, states what the outputs of earlier steps held (`held_by` over the output of
    every step before `turn` that shows values): a statement of a finding, not a guess made before the output that
    holds it. Recorded (RULER niah_single_2 at 8K): turn 1 said the number "is 4", from the input summary's preview;
    turn 2 printed the text's head, which holds that "4"; it was a guess all the same."""
    outputs = "\n".join(s.text for s in steps if s.turn < turn)
    return bool(outputs) and held_by(prose, outputs, question=question) is True


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


def found_in(answer: Any, texts: Iterable[str]) -> bool:
    """Whether `answer` appears in any of `texts`: as a number (commas, rounding to the answer's decimals
    and percentages allowed) or, for a string, as the run of its words."""
    number = _as_number(answer)
    words = words_of(answer) if isinstance(answer, str) else []
    decimals = _answer_decimals(answer)
    for text in texts:
        if not text:
            continue
        if number is not None and number_in(number, decimals, text):
            return True
        if words and _words_in(words, text):
            return True
    return False


NOT_HELD = "not in this part's text"
"""The mark a first reading puts after a part's answer that its text does not contain (`held_by`)."""


def holding_excerpt(answer: str, text: str, *, question: str = "", width: int = 240) -> str:
    """The words of `text` around the first place it holds what `answer` states beyond `question` (its first such
    number, else its first such word): its line, or at most about `width` characters of it cut between words,
    whitespace folded, "..." where cut; "" when `text` holds none of it."""
    numbers, words = stated_beyond(answer, question)
    patterns = [r"(?<![\d.,])" + re.escape(n) + r"(?![\d])" for n in numbers[:1]]
    patterns += [word_pattern(w) for w in words]
    for pattern in patterns:
        hit = re.search(pattern, text, re.IGNORECASE)
        if hit is not None:
            return passage_around(text, hit.start(), hit.end(), width)[2]
    return ""


def _words_in(words: list[str], text: str) -> bool:
    joined = " ".join(words)
    return f" {joined} " in f" {' '.join(words_of(text))} "


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


def _same(value: Any, answer: Any) -> bool:
    number, other = _as_number(answer), _as_number(value)
    if number is not None and other is not None:
        return math.isclose(number, other, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(value, str) and isinstance(answer, str):
        return words_of(value) == words_of(answer) and bool(words_of(answer))
    return False


def _distinctive(answer: Any) -> bool:
    """Values unlikely to be in code by chance: numbers of 3+ digits, strings with a digit (ids, keys)."""
    number = _as_number(answer)
    if isinstance(answer, str):
        return any(ch.isdigit() for ch in answer) and len(answer.strip()) >= 3
    return number is not None and (not number.is_integer() or abs(number) >= 100)


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
        words = words_of(str(answer) if not isinstance(answer, str) else answer)
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
    claims = value_claims(answer)
    if not claims:
        return None
    steps = steps_of(trajectory, run_id)
    typed = typed_at(answer, [*((s.turn, s.code) for s in steps if s.turn < turn), (turn, code)])
    if typed is None:
        return None
    texts: list[str] = list(opening)
    texts.extend(s.text for s in steps if s.turn < typed)
    for event in trajectory.events:
        if isinstance(event, SubCallFinished) and event.reply:  # another model's reading, whenever it came
            texts.append(event.reply)
        elif isinstance(event, CodeExecuted) and event.run_id != run_id:  # child and earlier runs
            texts.append(output_text(event.stdout, event.stderr, event.error))
        elif isinstance(event, RunFinished) and event.run_id != run_id and event.answer is not None:
            texts.append(str(event.answer))
    return None if all(found_in(claim, texts) for claim in claims) else Unevidenced(answer, typed)


_ID = re.compile(r"[^\W_]*\d[\w-]*")


def value_claims(answer: Any) -> list[Any]:
    """What a short answer claims that a model could invent: the number itself, or in a string each number and id
    (a token holding a digit: "64", "2022", "T-0193", "E503"); [] for words, yes/no, labels and empty results,
    which a check of what output showed cannot judge (issue 44: "Yes" and "Billing, with 64 tickets" are
    ordinary correct answers)."""
    if not short_answer(answer):
        return []
    if not isinstance(answer, str):
        return [answer]
    number = _as_number(answer)
    if number is not None:
        return [answer]
    return list(dict.fromkeys(m.group().strip("-") for m in _ID.finditer(answer) if m.group().strip("-")))


def _answer_decimals(value: Any) -> int:
    """Decimal places an answer is given to (a number's repr, or a string such as '12.35%')."""
    return _str_decimals(value if isinstance(value, str) else repr(value))
