"""Reading strategies model code can call in the sandbox: `find_mentions` and `read_text`.

A small root model often finds what a long text holds faster by having it read than by writing code alone;
these two functions offer the usual ways as ordinary calls, and the root decides whether and when to use
them (they are evidence for its own computation, never an answer imposed on it):

- `find_mentions(text, terms)`: the places a text names some terms (or the names a question asks about),
  each term counted only where it is rare (1 to `rare` times). Pure Python, no model call.
- `read_text(text, question, parts=None)`: the sub-model reads the text with the question, cut into parts
  that fit its window, all parts in one batch; each part's answer comes back with whether that part's text
  holds the answer's numbers or words (`held`), a cheap flag for made-up answers.

The sub-model's window reaches the sandbox the way llm_map's packing learns it: `read_text` opens a map
group on the host (`map_begin`, operator "read_text"), whose plan carries `max_prompt_tokens`; its one batch
goes through `map_batch` (exactly `llm_query_batched`, budgeted and cached, grouped under the read in the
trajectory) and `map_end` records its figures. A bridge without map support reads with `llm_query_batched`
and a default part size. Standard library and rlmnb's light modules only: this is imported inside the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rlmnb._ground.passages import RARE_MENTIONS, held_by, mentions, question_names
from rlmnb._ground.prompts import render
from rlmnb._ground.text import cut_evenly, parts_of
from rlmnb._ground.tokens import count_tokens

__all__ = ["FILL", "MIN_PART_TOKENS", "UNKNOWN_WINDOW_PART_TOKENS", "find_mentions", "make_readers", "read_parts"]

FILL = 0.8
"""Share of the sub-model's prompt window a part's text may fill: tokenizers differ, and the prompt needs room."""
UNKNOWN_WINDOW_PART_TOKENS = 8_000
"""About the most tokens of text a part holds when the host does not know the sub-model's window."""
MIN_PART_TOKENS = 100
"""A window that leaves a part less than this many tokens of text beside the question is too small to read in."""
MIN_WIDTH = 20
"""The narrowest passage `find_mentions` cuts around a term."""

Sender = Callable[[list[str]], list[str]]


def find_mentions(text: str, terms: str | Iterable[str] | None = None, *, width: int = 240,
                  rare: int = RARE_MENTIONS, question: str | None = None) -> list[dict[str, Any]]:
    """The passages of `text` that name `terms`, each term counted only where `text` names it 1 to `rare` times.

    Args:
        text: the text to search.
        terms: the words or names to look for (a list of str, each matched whole, ignoring case), or a question
            as one str, whose names are looked for (numbers, codes, hyphenated and capitalised terms); None: the
            names of `question`.
        width: about how many characters each passage holds around its term (its line, when shorter).
        rare: the most times a term may occur for its places to count (a commoner term is no place to look).
        question: the question whose names `terms=None` stands for (None: there is none to use).

    Returns:
        [{"term", "start", "end", "passage"}] in text order: `text[start:end]` is the passage, `passage` its words
        with whitespace folded and "..." where cut; a passage overlapping one already taken is left out.

    Raises:
        TypeError: `text` is not a str, or `terms` not a str or a list of str.
        ValueError: no terms (none given, or a question without names), or `width` / `rare` out of range.
    """
    if not isinstance(text, str):
        raise TypeError(f"find_mentions() takes the text as a str, got {type(text).__name__}; pass inputs['name'] "
                        "of a text input, or str(...) of the value.")
    words = _terms(terms, question)
    if not isinstance(width, int) or isinstance(width, bool) or width < MIN_WIDTH:
        raise ValueError(f"find_mentions(): pass width as a whole number of characters of at least {MIN_WIDTH}, "
                         f"not {width!r}.")
    if not isinstance(rare, int) or isinstance(rare, bool) or rare < 1:
        raise ValueError(f"find_mentions(): pass rare as a whole number of at least 1, not {rare!r}.")
    return [m.to_dict() for m in mentions(text, words, width=width, rare=rare)]


def _terms(terms: Any, question: str | None) -> list[str]:
    """The terms to look for: the given list, or the names of a question (the one given as `terms`, else `question`)."""
    asked = terms if terms is not None else question
    if asked is None:
        raise ValueError("find_mentions() needs terms: pass a list of the words or names to look for, or the "
                         "question as a str to look for the names it asks about.")
    if isinstance(asked, str):
        names = question_names(asked)
        if not names:
            raise ValueError("find_mentions() found no names in the question (numbers, codes, hyphenated or "
                             "capitalised terms); pass the words to look for as a list of str.")
        return names
    if isinstance(asked, bytes) or not isinstance(asked, Iterable):
        raise TypeError(f"find_mentions() takes terms as a list of str or a question as a str, got "
                        f"{type(asked).__name__}.")
    words = list(asked)
    bad = next((w for w in words if not isinstance(w, str)), None)
    if bad is not None:
        raise TypeError(f"find_mentions() takes terms as a list of str; one is a {type(bad).__name__}: {bad!r}.")
    if not any(w.strip() for w in words):
        raise ValueError("find_mentions() needs at least one term that is not blank, e.g. ['invoice', 'INV-204'].")
    return words


def read_parts(text: str, part_tokens: int, parts: int | None) -> list[tuple[int, int]]:
    """The spans `read_text` reads: as few as keep each part within `part_tokens` tokens, or exactly `parts`.

    Raises:
        ValueError: `parts` is fewer than the text needs to fit `part_tokens`, or more than it has characters.
    """
    fit = parts_of(text, part_tokens)
    if parts is None:
        return fit
    if parts < len(fit):
        raise ValueError(f"read_text(): the text needs at least {len(fit)} parts to fit the sub-model's window; "
                         f"pass parts={len(fit)} or more, or leave parts out.")
    if parts > len(text):
        raise ValueError(f"read_text(): the text has {len(text)} characters, too few for {parts} parts; pass a "
                         "smaller parts, or leave it out.")
    return cut_evenly(text, parts)


def _read(send: Sender, text: str, question: str, spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Send one prompt a part, all in one batch; each part's answer with whether its text holds it."""
    count = len(spans)
    prompts = [render("read_text", question=question, text=text[start:end],
                      where=f" (part {i} of {count})" if count > 1 else "")
               for i, (start, end) in enumerate(spans, 1)]
    replies = send(prompts)
    out = []
    for i, ((start, end), reply) in enumerate(zip(spans, replies, strict=True), 1):
        answer = reply.strip()
        failed = answer.startswith("[error]") or not answer
        held = None if failed else held_by(answer, text[start:end], question=question)
        out.append({"part": i, "of": count, "start": start, "end": end, "answer": answer, "held": held})
    return out


def _check_str(value: object, what: str, example: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"read_text() takes the {what} as a str, got {type(value).__name__}; pass {example}.")
    if not value.strip():
        raise ValueError(f"read_text() needs a {what} that is not blank; pass {example}.")
    return value


def make_readers(bridge: Any, run_question: str | None = None) -> dict[str, Callable[..., Any]]:
    """`find_mentions` and `read_text` over one bridge (the sandbox's synchronous bridge to the host).

    `run_question` is the run's question when the host gives it: `find_mentions(text)` then looks for its names.
    """

    def find_mentions_in(text: str, terms: str | Iterable[str] | None = None, *, width: int = 240,
                         rare: int = RARE_MENTIONS) -> list[dict[str, Any]]:
        """The passages of `text` that name `terms` (a list of str, or a question as a str: the names it asks
        about), where each term occurs 1 to `rare` times: [{"term", "start", "end", "passage"}] in text order;
        `text[start:end]` is the passage. No model call."""
        return find_mentions(text, terms, width=width, rare=rare, question=run_question)

    def read_text(text: str, question: str, *, parts: int | None = None) -> list[dict[str, Any]]:
        """The sub-model reads `text` and answers `question`; the text is cut into parts that fit its window (or
        into exactly `parts`), all read at once. Returns [{"part", "of", "start", "end", "answer", "held"}], one per
        part in order: `text[start:end]` is the part, `held` whether that part holds the answer's numbers or words
        (False: check it; None: nothing to check, e.g. a failed call starting with "[error]")."""
        body = _check_str(text, "text", "inputs['name'] of a text input, or str(...) of the value")
        asked = _check_str(question, "question", "the question to answer from the text")
        if parts is not None and (not isinstance(parts, int) or isinstance(parts, bool) or parts < 1):
            raise ValueError(f"read_text(): pass parts as a whole number of at least 1, or leave it out; got {parts!r}.")
        return _read_through(bridge, body, asked, parts)

    find_mentions_in.__name__ = find_mentions_in.__qualname__ = "find_mentions"
    return {"find_mentions": find_mentions_in, "read_text": read_text}


def _read_through(bridge: Any, text: str, question: str, parts: int | None) -> list[dict[str, Any]]:
    """Open a read on the host (its plan gives the sub-model's window), cut, read, close with the figures."""
    begin, batch, end = (getattr(bridge, name, None) for name in ("map_begin", "map_batch", "map_end"))
    plan: dict[str, Any] = {}
    if callable(begin):
        plan = dict(begin({"operator": "read_text", "instruction": question, "output": "str", "items": None}))
    read_id = plan.get("map_id")

    def send(prompts: list[str]) -> list[str]:
        if read_id is not None and callable(batch):
            return list(batch(read_id, prompts, None))
        return list(bridge.llm_query_batched(prompts, None))

    figures: dict[str, Any] = {"items": 0, "packs": 0, "calls": 0, "failures": 0, "reasks": 0}
    try:
        spans = read_parts(text, _part_tokens(plan.get("max_prompt_tokens"), question), parts)
        figures.update(items=len(spans), packs=len(spans))
        result = _read(send, text, question, spans)
        figures.update(calls=len(spans), failures=sum(r["answer"].startswith("[error]") for r in result))
        return result
    except BaseException as exc:
        figures["stopped"] = f"{type(exc).__name__}: {exc}"[:300]
        raise
    finally:
        if read_id is not None and callable(end):
            end(read_id, figures)


def _part_tokens(window: Any, question: str) -> int:
    """Tokens of text one part may hold: `FILL` of the sub-model's prompt window less the prompt around the text."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return UNKNOWN_WINDOW_PART_TOKENS
    frame = render("read_text", question=question, text="", where=" (part 100 of 100)")
    room = int(window * FILL) - count_tokens(frame)
    if room < MIN_PART_TOKENS:
        raise ValueError(f"read_text(): the question leaves no room for text in the sub-model's window of {window:,} "
                         "tokens; pass a shorter question.")
    return room
