"""The first reading as the root was shown it (`Reading`), its marks (`NOT_HELD`, `NOT_FOUND`) and the words around where a text holds an answer (`holding_excerpt`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlmnb._ground.passages import (
    passage_around,
    stated_beyond,
    word_pattern,
)

__all__ = ["NOT_FOUND", "NOT_HELD", "Reading", "holding_excerpt"]


@dataclass(frozen=True)
class Reading:
    """A first reading the root was shown (policy `first_read`): the message, its answer lines (what the final
    answer's request shows again) and its answers (no "NOT FOUND", no error slots, none marked not held)."""

    message: str
    answers_text: str
    values: tuple[str, ...]


NOT_FOUND = "NOT FOUND"
"""What a first reading's part answers when it does not hold the answer (prompts/first_read_ask.md): never an answer."""


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
