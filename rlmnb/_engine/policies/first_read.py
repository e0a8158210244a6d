"""Policy `first_read` (profile "small"): before the first turn, the sub-model reads the text inputs with the question.

Entry point: `FirstRead.on_start(ctx, fields)` makes the reading and returns its text, which the opening message
shows after the InputsSummary (or None: no reading). Also `parts_of` for the cutting.

Looks at: the text inputs (in-memory `str` and text files) when they fit `min(MAX_PARTS, max_llm_calls // 2)`
parts of the sub-model's prompt window. May: spend those sub-calls before turn 1 and show their answers as
evidence. Never more: the reading is not an answer, sends nothing back and ends nothing; the root checks it with
code and submits (or not). Why: a small model (a few billion parameters, a 16K-token window) rarely finds what a
long text holds by writing code alone, while the same model reading the text whole often answers (issue 22), so
the harness offers that reading; the root keeps every decision (issue 44).

Contract:
- Each text is first searched for the names the question asks about (`evidence.question_mentions`: its terms that
  the input mentions one to five times), and each such place is read alone in a short sub-call. When places
  answer (an answer the passage holds), those answers are the reading and the text is not read whole; the opening
  says how much was left unread.
- Otherwise each text is read whole, or in even parts that fit the window; every prompt states the question before
  and after the text and offers no "not found" exit. A part's answer that its part does not hold
  (`evidence.held_by`) is marked `NOT_HELD`; a held one is shown with the words around it.
- The calls go through the run's SubCaller (group "first reading", turn 0): budgeted, cached, journaled and served
  from the journal on resume, so the opening is rebuilt byte-identical. Budget refused or every part failed: no
  reading, no error.
- Never for a child run or a continued run, nor when the sub-model's window is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._engine.evidence import NOT_FOUND, NOT_HELD, Reading, holding_excerpt, says_nothing
from rlmnb._engine.policies.base import Policy
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.passages import held_by, question_mentions
from rlmnb._ground.prompts import load, render
from rlmnb._ground.text import clip, parts_of
from rlmnb._ground.tokens import count_tokens
from rlmnb._operators.reading import FILL

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext

__all__ = ["MAX_MENTIONS", "MAX_PARTS", "NAMED", "FirstRead", "parts_of"]

MAX_PARTS = 4
"""Most sub-calls one first reading makes (all text inputs together)."""
ANSWER_CHARS = 600
"""Characters of each part's answer shown to the root."""
EXCERPT_CHARS = 240
"""About how many characters of a part's text are quoted around the answer it holds."""
MAX_MENTIONS = 8
"""Most places where the input names the question's names that the reading quotes (all text inputs together)."""
NAMED = "where the input names what the question asks about, each place read alone"
"""The label of the answers the sub-model gave reading each named place alone (`question_mentions`)."""


def _texts(fields: Sequence[Any], budget_tokens: int) -> list[tuple[str, str]] | None:
    """The text inputs as (name, text); None when any input is not text or all of them are too large."""
    texts: list[tuple[str, str]] = []
    for f in fields:
        if f.info.kind not in ("text", "text_file") or f.info.est_tokens > budget_tokens:
            return None
        value = f.load()
        if not isinstance(value, str):
            return None
        texts.append((f.name, value))
    return texts or None


class FirstRead(Policy):
    name = "first_read"

    async def on_start(self, ctx: RunContext, fields: Sequence[Any]) -> str | None:
        message = await first_read(ctx, fields)
        if message is not None:
            self.acted(ctx, "read_first", ctx.reading.answers_text if ctx.reading is not None else "")
        return message


async def first_read(ctx: RunContext, fields: Sequence[Any]) -> str | None:
    """Have the sub-model read the text inputs with the question; the message for the root, or None."""
    limits = ctx.run_limits()
    if limits.sub_window is None:
        return None
    max_parts = min(MAX_PARTS, ctx.config.max_llm_calls // 2)
    if max_parts < 1:
        return None
    question = ctx.question.strip()
    frame = render("first_read_ask", question=question, input="x", where="", text="")
    part_tokens = int(limits.sub_window * FILL) - count_tokens(frame, None) - 20  # room for ", part 1 of 4"
    if part_tokens < 500:
        return None
    texts = _texts(fields, part_tokens * max_parts * 2)
    if texts is None:
        return None
    pieces: list[tuple[str, int, int, int, str]] = []  # name, part, of, tokens, text
    for name, text in texts:
        spans = parts_of(text, part_tokens)
        for i, (start, end) in enumerate(spans):
            pieces.append((name, i + 1, len(spans), count_tokens(text[start:end], None), text[start:end]))
            if len(pieces) > max_parts:
                return None
    split = any(of > 1 for _, _, of, _, _ in pieces)
    room = max(0, min(MAX_MENTIONS, ctx.config.max_llm_calls // 2 - len(pieces)))
    named, found, named_calls = await _named_places(ctx, question, texts, room)
    if found:  # the places naming what the question asks about answered it: the text is not read
        line = f"- {NAMED}: {clip(', '.join(found), ANSWER_CHARS)}"
        size = f"~{sum(t for _, _, _, t, _ in pieces):,} tokens"
        unread = render("first_read_unread", size=f"{len(pieces)} parts, {size}" if len(pieces) > 1 else size)
        message = render("first_read", how=load("first_read_how_named"), answers=line,
                         calls=named_calls, named=named, parts=unread)
        ctx.reading = Reading(message, line, tuple(found))
        return message
    prompts = [render("first_read_ask", question=question, input=name, text=body,
                      where=f", part {part} of {of}" if of > 1 else "")
               for name, part, of, _, body in pieces]
    try:
        answers = await ctx.sub.query_batched(prompts, group="first reading")
    except BudgetExhausted:
        return None
    if all(a.startswith("[error]") for a in answers):
        return None
    lines, values = _part_lines(pieces, answers, question)
    message = render("first_read", how=load("first_read_how"), answers="\n".join(lines),
                     calls=len(prompts) + named_calls, named=named,
                     parts=load("first_read_parts").rstrip("\n") if split else "")
    ctx.reading = Reading(message, "\n".join(lines), tuple(dict.fromkeys(values)))
    return message


def _no_answer(answer: str) -> bool:
    """Whether a sub-call's answer gives nothing: a failed call, NOT FOUND, or words saying nothing was found."""
    return answer.startswith("[error]") or NOT_FOUND in answer or says_nothing(answer)


def _part_lines(pieces: list[tuple[str, int, int, int, str]], answers: list[str],
                question: str) -> tuple[list[str], list[str]]:
    """Each part's answer as a line for the root (checked against its part when the text was cut) and the answers
    that count as the reading's values (not empty, not marked)."""
    lines, values = [], []
    for (name, part, of, tokens, body), answer in zip(pieces, answers, strict=True):
        where = f'`inputs["{name}"]`' + (f" part {part} of {of}" if of > 1 else " whole")
        said = clip(" ".join(answer.split()), ANSWER_CHARS)
        empty = _no_answer(answer)
        held = None if empty or of == 1 else held_by(answer, body, question=question)  # a whole text's answer
        if held is False:                                                    # may be a count it never states
            said += f" [{NOT_HELD}]"
        elif held:
            excerpt = holding_excerpt(answer, body, question=question, width=EXCERPT_CHARS)
            said += f' (the part says: "{excerpt}")'
        lines.append(f"- {where} ({tokens:,} tokens): {said}")
        if not empty and held is not False:
            values.append(answer.strip())
    return lines, values


async def _named_places(ctx: RunContext, question: str, texts: list[tuple[str, str]],
                        room: int) -> tuple[str, list[str] | None, int]:
    """The places in `texts` that name what the question asks about (at most `room`), quoted for the root, and what
    each says read alone: (the quotes' message part, the distinct answers or None, the sub-calls made)."""
    mentions = [(name, term, excerpt) for name, text in texts
                for term, excerpt in question_mentions(question, text, width=EXCERPT_CHARS)][:room]
    if not mentions:
        return "", None, 0
    named = "\n" + render("first_read_named", mentions="\n".join(
        f'- "{term}" in `inputs["{name}"]`: "{excerpt}"' for name, term, excerpt in mentions)).rstrip("\n")
    found = await _read_named(ctx, question, [excerpt for _, _, excerpt in mentions])
    return named, found, len(mentions) if found is not None else 0


async def _read_named(ctx: RunContext, question: str, passages: list[str]) -> list[str] | None:
    """Each place that names what the question asks about, read alone by the sub-model (one short sub-call each):
    the distinct answers the places give and hold, in the input's order ([] when none answers); None when there is
    no such place or the budget refuses."""
    if not passages:
        return None
    prompts = [render("first_read_passage", passage=p, question=question) for p in passages]
    try:
        replies = await ctx.sub.query_batched(prompts, group="first reading")
    except BudgetExhausted:
        return None
    found: dict[str, str] = {}
    for passage, reply in zip(passages, replies, strict=True):
        answer = " ".join(reply.split()).strip(" .")
        if (not reply.startswith("[error]") and not says_nothing(answer)
                and held_by(answer, passage, question=question) is not False):
            found.setdefault(answer.casefold(), answer)
    return list(found.values())
