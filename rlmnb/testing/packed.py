"""A scripted sub-model that answers llm_map's packed prompts, correctly or with a set rate of mistakes.

`PackedResponder(answer)` reads the numbered items of a packed prompt and replies with the JSON list
llm_map asks for, `answer(item_text)` giving each value. With `garble=0.05` a seeded 5 % of the items
of every packed prompt (of two or more items) come back broken: dropped, given an unparsable value, or
mislabelled (`wrong`), so re-asks can be tested and benchmarked. Which items are garbled depends only on
the seed, the prompt and the item, never on the order concurrent requests arrive in, so runs repeat exactly. A prompt without items (a plain llm_query) is answered with
`answer(text after the last blank line)`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any

_ITEM = re.compile(r"<item id=(\d+)>\n(.*?)\n</item>", re.DOTALL)


def _prompt(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    return str(messages[-1].get("content", "")) if messages else ""


def packed_items(prompt: str) -> list[tuple[int, str]]:
    """(id, text) of every item of a packed llm_map prompt."""
    return [(int(i), text) for i, text in _ITEM.findall(prompt)]


class PackedResponder:
    """Answers packed prompts; `garble` of the items (per prompt, seeded) come back dropped, broken or wrong.

    Args:
        answer: item text -> the correct value (any JSON value).
        garble: share of items answered badly, 0.0 to 1.0 (default 0).
        wrong: item text -> a wrong but well-formed value (default: the string "???").
        seed: the random seed of the mistakes (default 0).
        kinds: which mistakes to make, drawn in turn: "drop", "broken", "wrong" (default all three).
        singles: also garble prompts of one item (llm_map's re-asks); default False, so re-asks succeed.
    """

    def __init__(self, answer: Callable[[str], Any], *, garble: float = 0.0,
                 wrong: Callable[[str], Any] | None = None, seed: int = 0,
                 kinds: tuple[str, ...] = ("drop", "broken", "wrong"), singles: bool = False) -> None:
        if not 0.0 <= garble <= 1.0:
            raise ValueError("garble must be between 0 and 1")
        self.answer = answer
        self.garble = garble
        self.wrong = wrong or (lambda _text: "???")
        self.kinds = kinds
        self.singles = singles
        self.seed = seed
        self._lock = threading.Lock()
        self.garbled = 0  # items answered badly so far
        self.packed_prompts = 0
        self.plain_prompts = 0

    def __call__(self, messages: Any) -> str:
        prompt = _prompt(messages)
        items = packed_items(prompt)
        if not items:
            with self._lock:
                self.plain_prompts += 1
            return str(self.answer(prompt.rsplit("\n\n", 1)[-1].strip()))
        out: list[dict[str, Any]] = []
        rate = self.garble if len(items) > 1 or self.singles else 0.0
        rolls = [self._roll(prompt, number) for number, _ in items] if rate > 0 else [1.0] * len(items)
        draws = [roll < rate for roll in rolls]
        kinds = [self.kinds[int(roll * 1_000_003) % len(self.kinds)] for roll in rolls]
        with self._lock:
            self.packed_prompts += 1
            self.garbled += sum(draws)
        for (number, text), bad, kind in zip(items, draws, kinds, strict=True):
            if not bad:
                out.append({"id": number, "value": self.answer(text)})
            elif kind == "broken":
                out.append({"id": number, "value": {"unparsable": text[:10]}})
            elif kind == "wrong":
                out.append({"id": number, "value": self.wrong(text)})
            # "drop": no entry for this item
        return json.dumps(out)

    def _roll(self, prompt: str, number: int) -> float:
        """A uniform number in [0, 1) from the seed, the prompt and the item's id."""
        digest = hashlib.blake2b(f"{self.seed}\x00{number}\x00{prompt}".encode("utf-8", "surrogatepass"),
                                 digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64


__all__ = ["PackedResponder", "packed_items"]
