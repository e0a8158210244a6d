"""A first reading: before a small root model's first step, the sub-model reads the text inputs with the question.

Entry points: `wants_first_read(config, limits)` (is it on for this run) and `first_read(ctx, fields)` (make
the reading; returns its text, which the opening message shows after the InputsSummary, or None).

Why: a small model (a few billion parameters, a 16K-token window) rarely finds what a long text holds by
writing code alone, while the same model reading the text whole answers correctly far more often (issue 22:
RULER at 8K tokens, rlmnb 0.17 against the model alone 0.54). The harness offers that strategy itself and
the root keeps the rest: it sees what the sub-model answered, checks with code and submits.

Contract:
- Mode `first_read`: "off"; "on" (whenever the texts fit `MAX_PARTS` sub-calls); "auto" (on when the root
  model's context window is known and at most `SMALL_ROOT_WINDOW` tokens: the small local models of issue 22).
  Never for a child run, a continued run or a run whose sub-model window is unknown.
- Only text inputs (in-memory `str` and text files) are read, each cut into parts that fit the sub-model's
  prompt window with the instruction around them; when every text together needs more than
  `min(MAX_PARTS, max_llm_calls // 2)` parts, there is no first reading (the root works as usual).
- Each prompt states the question before the text and again after it (recorded, RULER vt 8k: with it only
  after, the reading named one variable of five, where `direct`'s prompt, instruction first, named all five).
- No prompt offers a "NOT FOUND" exit, neither to a part nor to a whole text (recorded at 32K: offered it, the parts
  holding the needle took it; at 8K the whole reading of a variable-tracking text took it where the same model,
  asked plainly, answered right). So every part answers; each part's answer is looked for in that part's text
  (`evidence.held_by`: the numbers it adds to the question, else half its words): held, the root is shown the
  words around it (`evidence.holding_excerpt`); not held, it is marked `NOT_HELD` and is not an answer a
  restating reply submits. A text read whole is checked only for an answer copied from the question
  (`evidence.echoes_question`; marked `ECHOED`, not an answer), since its answer may be a count the text never states.
- One text that fits one sub-call is also asked plainly, in the same batch: the prompt of the eval's `direct`
  method (`prompts.ask_plainly`, byte-identical for an input named `context`), so the harness offers at least
  what the model alone would answer. Recorded (RULER at 8K, Qwen2.5-Coder 1.5B, temperature 0): the reading
  prompt named one variable of vt's five where the plain prompt named all five, and the plain prompt named one
  of niah_multivalue's four numbers where the reading named all four; no one wording did both. The same answer
  twice is one line ("read twice"); a different one is a second line, checked like the whole reading (an echo of
  the question is marked `ECHOED`), and a value restating it is an answer like the reading's. Not with two
  or more texts (the plain prompt frames one input) nor when the budget has room for one reading call only.
  The items the whole readings list (`evidence.listed_items`: numbers of three or more digits, codes in
  capitals, that the text holds), when two or more, are the reading's `named` answers: an answer holding some
  of them goes back once with the list (`turn`; recorded, vt at 8K: the root's regex found the one variable
  assigned directly and went on without the other four the plain asking named).
- Every text, whole or in parts, is first searched for the names the question asks about
  (`evidence.question_mentions`: hyphenated, numbered, capitalised terms the input mentions one to five times), and
  the places are quoted. Each place is read alone in a short sub-call (a few hundred tokens; "NONE" when it does
  not answer). When a place answers (an answer its passage holds), the distinct answers are the reading (`NAMED`)
  and the text is not read; the opening says how much was left unread and to read it with code and `llm_query`
  if the question needs more. When none answers, the text is read whole or in parts as above. Recorded at 32K: niah_multikey_1's
  parts answered other keys' numbers and the root restated the first; read together, the quoted passages gave two
  of niah_multivalue's four numbers; each named place read alone gave the asked key's number and all four, in
  about 800 tokens and a minute where the three parts took 32,600 tokens and 45 minutes (probe in
  docs/decisions/first-reading.md). An answer (submitted or in prose) holding some of the places' answers but not
  all goes back once with the list (`turn`; recorded at 32K: niah_multivalue's places gave all four numbers and the
  root boxed "the first occurrence for simplicity").
- A text read in parts is read part 1 first: when its answer is only the question's own words
  (`evidence.echoes_question`: the question carries a worked example, or the model restated it), the other parts
  are not read, since they get the same prompt over the same kind of text; the opening says so and asks for code.
  Recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B, both instances): all four parts answered the question's worked
  example, ~13,000 tokens each. Otherwise the other parts go together. A text read whole is likewise read before
  it is asked plainly, and not asked plainly when the reading echoes the question (recorded, cwe at 8K: both
  prompts gave the worked example, ~10,600 tokens each).
- The places, then the parts, go as `llm_query_batched`-style batches (group "first reading", turn 0) through the run's
  SubCaller: budgeted, cached, journaled, and on resume served from the journal like any sub-call, so the
  opening is rebuilt byte-identical.
- The reading goes into the opening message after the InputsSummary (it says whose reading it is and that it
  is unchecked), whose last line then asks for one step that checks it and a submit; the fallback shows its
  answers again beside the outputs' tails. With it the root may submit on its first step, and a bare answer
  it gave counts as shown (the reading is output the root has seen).
- Budget refused or every part failed: no reading, no error (the run goes on as without it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._engine.evidence import (
    ECHOED,
    NOT_FOUND,
    NOT_HELD,
    Reading,
    echoes_question,
    held_by,
    holding_excerpt,
    listed_items,
    question_mentions,
    same_words,
    says_nothing,
)
from rlmnb._engine.limits import SMALL_WINDOW
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.prompts import ask_plainly, load, render
from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens

if TYPE_CHECKING:
    from rlmnb._engine.limits import RunLimits
    from rlmnb._engine.turn import RunContext

__all__ = ["MAX_MENTIONS", "MAX_PARTS", "NAMED", "SMALL_ROOT_WINDOW", "WHOLE_ITEMS", "first_read", "parts_of",
           "wants_first_read"]

SMALL_ROOT_WINDOW = SMALL_WINDOW
"""A root model whose window is at most this many tokens gets a first reading in mode "auto"."""
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
WHOLE_ITEMS = "reading the whole text"
"""Where the items a whole text's reading listed came from, as the partial guard's note says it."""
_FILL = 0.8
"""Share of the sub-model's prompt window a part's text may fill (tokenizers differ; the instruction needs room)."""


def wants_first_read(config: RLMConfig, limits: RunLimits) -> bool:
    """Whether this run's root gets a first reading (see the module docs for the modes)."""
    if config.first_read == "off" or limits.sub_window is None:
        return False
    if config.first_read == "on":
        return True
    return limits.root_window is not None and limits.root_window <= SMALL_ROOT_WINDOW


def parts_of(text: str, part_tokens: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `text`, even, each at most about `part_tokens` tokens, cut at a line break
    (else a space) within a tenth of a part of the even cut, and covering the text exactly."""
    total = max(1, count_tokens(text))
    size = max(1, int(part_tokens * len(text) / total * 0.9))  # the 0.9 leaves room for cuts moved later
    count = math.ceil(len(text) / size)
    slack = len(text) // count // 10
    cuts = [0]
    for i in range(1, count):
        target = round(i * len(text) / count)
        lo, hi = max(cuts[-1] + 1, target - slack), min(len(text) - 1, target + slack)
        cut = target
        for sep in ("\n", " "):
            before, after = text.rfind(sep, lo, target), text.find(sep, target, hi)
            near = [p for p in (before, after) if p >= 0]
            if near:
                cut = min(near, key=lambda p: abs(p - target)) + 1
                break
        cuts.append(cut)
    cuts.append(len(text))
    return list(zip(cuts, cuts[1:], strict=False))


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


async def first_read(ctx: RunContext, fields: Sequence[Any]) -> str | None:
    """Have the sub-model read the text inputs with the question; the message for the root, or None."""
    limits = ctx.run_limits()
    if not wants_first_read(ctx.config, limits) or limits.sub_window is None:
        return None
    max_parts = min(MAX_PARTS, ctx.config.max_llm_calls // 2)
    if max_parts < 1:
        return None
    question = ctx.question.strip()
    frame = render("first_read_ask", question=question, input="x", where="", text="")
    part_tokens = int(limits.sub_window * _FILL) - count_tokens(frame, None) - 20  # room for ", part 1 of 4"
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
        ctx.reading = Reading(message, line, (", ".join(found),), tuple(found))
        return message
    prompts = [render("first_read_ask", question=question, input=name, text=body,
                      where=f", part {part} of {of}" if of > 1 else "")
               for name, part, of, _, body in pieces]
    plain = len(pieces) == 1 and not split and max_parts >= 2  # one text that fits one call: also asked plainly
    if plain:
        name, _, _, tokens, body = pieces[0]
        prompts.append(ask_plainly(question, body, tokens=tokens, name=name))
    answers: list[str] = []
    try:
        answers = await ctx.sub.query_batched(prompts[:1], group="first reading")
        if _echoed(answers[0], pieces[0][4], question) and (split or plain):
            return _echo_stop(ctx, pieces, answers[0], question, named, named_calls)
        if len(prompts) > 1:
            answers += await ctx.sub.query_batched(prompts[1:], group="first reading")
    except BudgetExhausted:
        if not plain or len(answers) != 1:
            return None
        plain = False  # the budget refused the plain asking: the reading alone
    if all(a.startswith("[error]") for a in answers):
        return None
    if plain:
        answers, asked = answers[:1], answers[1]
    lines, values, marked = _part_lines(pieces, answers, question)
    twice = False
    if plain:
        lines, values, marked, twice = _with_plain(lines, values, marked, asked, pieces[0], question)
    message = render("first_read", how=load("first_read_how"), answers="\n".join(lines),
                     calls=len(prompts) + named_calls, named=named,
                     parts=load("first_read_parts").rstrip("\n") if split else "")
    items = () if split else listed_items(values, "\n".join(text for _, text in texts), question=question)
    ctx.reading = Reading(message, "\n".join(lines), tuple(dict.fromkeys(values)), marked=tuple(marked),
                          named=items if len(items) >= 2 else (), named_where=WHOLE_ITEMS,
                          twice=twice and len(values) == 1)
    return message


def _no_answer(answer: str) -> bool:
    """Whether a sub-call's answer gives nothing: a failed call, NOT FOUND, or words saying nothing was found."""
    return answer.startswith("[error]") or NOT_FOUND in answer or says_nothing(answer)


def _echoed(answer: str, body: str, question: str) -> bool:
    """Whether a part's answer is only the question's own words (`evidence.echoes_question`): no reading of it."""
    return not _no_answer(answer) and echoes_question(answer, body, question=question)


def _echo_stop(ctx: RunContext, pieces: list[tuple[str, int, int, int, str]], answer: str, question: str,
               named: str, named_calls: int) -> str:
    """The reading when the first part (or a whole text's reading) answered with the question's own words: that
    line, marked, and a note that the other parts were not read, or the whole text not asked plainly (the same
    text or the same kind of text, asked the same question)."""
    lines, _, marked = _part_lines(pieces[:1], [answer], question)
    rest = pieces[1:]
    unread = (render("first_read_echoed", parts=len(rest), tokens=f"{sum(p[3] for p in rest):,}") if rest else
              load("first_read_echoed_whole"))
    message = render("first_read", how=load("first_read_how"), answers="\n".join(lines), calls=1 + named_calls,
                     named=named, parts=unread)
    ctx.reading = Reading(message, "\n".join(lines), (), marked=tuple(marked))
    return message


def _part_lines(pieces: list[tuple[str, int, int, int, str]], answers: list[str],
                question: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Each part's answer as a line for the root (checked against its part when the text was cut), the answers
    that count as the reading's values (not empty, not marked), and the marked ones as (answer, mark)."""
    lines, values, marked = [], [], []
    for (name, part, of, tokens, body), answer in zip(pieces, answers, strict=True):
        where = f'`inputs["{name}"]`' + (f" part {part} of {of}" if of > 1 else " whole")
        said = clip(" ".join(answer.split()), ANSWER_CHARS)
        empty = _no_answer(answer)
        if empty:
            held = None
        elif of == 1:  # a whole text's answer may be a count it never states: only an echo of the question is checked
            held = False if echoes_question(answer, body, question=question) else None
        else:
            held = held_by(answer, body, question=question)
        if held is False:
            said += f" [{NOT_HELD if of > 1 else ECHOED}]"
            marked.append((answer.strip(), NOT_HELD if of > 1 else ECHOED))
        elif held:
            excerpt = holding_excerpt(answer, body, question=question, width=EXCERPT_CHARS)
            said += f' (the part says: "{excerpt}")'
        lines.append(f"- {where} ({tokens:,} tokens): {said}")
        if not empty and held is not False:
            values.append(answer.strip())
    return lines, values, marked


def _with_plain(lines: list[str], values: list[str], marked: list[tuple[str, str]], asked: str,
                piece: tuple[str, int, int, int, str],
                question: str) -> tuple[list[str], list[str], list[tuple[str, str]], bool]:
    """`_part_lines`'s lines, values and marked answers with the plain asking's answer (`prompts/ask_plainly.md`)
    added, and whether the two gave the same answer: then one line saying the text was read twice, else a second
    line (an echo of the question marked)."""
    name, _, _, tokens, body = piece
    said = " ".join(asked.split())
    if asked.startswith("[error]") or not said:
        return lines, values, marked, False
    if values and same_words(said, values[0]):
        return [lines[0].replace(" whole (", " whole, read twice (", 1)], values, marked, True
    echo = echoes_question(asked, body, question=question)
    mark = f" [{ECHOED}]" if echo else ""
    line = f'- `inputs["{name}"]` whole, asked plainly ({tokens:,} tokens): {clip(said, ANSWER_CHARS)}{mark}'
    if echo:
        return [*lines, line], values, [*marked, (asked.strip(), ECHOED)], False
    return [*lines, line], values if _no_answer(asked) else [*values, asked.strip()], marked, False


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
