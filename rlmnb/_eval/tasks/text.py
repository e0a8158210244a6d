"""Fast seeded text for the tasks: filler prose, token calibration and name making.

Inputs reach 10M tokens (~40 MB), so nothing here encodes a whole text: a generator measures the
characters per token of a small sample of its own output once (exact tiktoken count through
`rlmnb._ground.tokens`) and scales, and the final size is a sampled estimate (`estimate_tokens`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rlmnb._ground.tokens import count_tokens, estimate_tokens

__all__ = ["SYLLABLES", "WORDS", "chars_per_token", "filler", "filler_pool", "names", "size_tokens"]

WORDS = ("archive", "ledger", "meadow", "harvest", "lantern", "quarry", "canal", "orchard", "beacon", "summit",
         "valley", "timber", "copper", "granite", "marble", "velvet", "thunder", "whisper", "compass", "anchor",
         "voyage", "signal", "pattern", "measure", "council", "market", "season", "journal", "chapter", "portrait",
         "theory", "circuit", "network", "gallery", "station", "harbour", "village", "bridge", "tunnel", "garden",
         "window", "morning", "evening", "winter", "summer", "autumn", "spring", "river", "forest", "mountain",
         "quietly", "slowly", "brightly", "carefully", "rarely", "often", "nearby", "across", "beyond", "within",
         "ancient", "modern", "distant", "gentle", "steady", "narrow", "golden", "silver", "hidden", "common")
SYLLABLES = ("ka", "lo", "mi", "ren", "sa", "tor", "vel", "dun", "pra", "li", "mo", "qua", "zen", "bri", "cas",
             "dor", "fen", "gal", "hal", "jun", "kor", "lum", "nar", "osk", "pel", "rin", "sol", "tam", "ul", "vor")


def filler_pool(rng: Any, count: int = 2048) -> list[str]:
    """`count` random sentences of 6-15 filler words, for drawing prose from by index."""
    words = list(WORDS)
    lengths = rng.integers(6, 16, size=count)
    picks = rng.integers(0, len(words), size=int(lengths.sum()))
    pool, at = [], 0
    for n in lengths:
        sentence = " ".join(words[i] for i in picks[at: at + n])
        at += n
        pool.append(sentence[0].upper() + sentence[1:] + ".")
    return pool


def filler(rng: Any, pool: list[str], sentences: int) -> list[str]:
    """`sentences` sentences drawn from `pool` (vectorised draw; the caller joins them)."""
    return [pool[i] for i in rng.integers(0, len(pool), size=max(0, sentences))]


def names(rng: Any, count: int, *, syllables: tuple[int, int] = (2, 3), taken: set[str] | None = None) -> list[str]:
    """`count` distinct capitalised made-up names (no real-world knowledge can answer a question about them)."""
    seen = taken if taken is not None else set()
    capacity = sum(len(SYLLABLES) ** k for k in range(syllables[0], syllables[1] + 1))
    if count + len(seen) > capacity // 2:  # past half the space, redraws would take ever longer
        raise ValueError(f"{count} names of {syllables} syllables would exhaust the name space; widen it.")
    out: list[str] = []
    pool = list(SYLLABLES)
    while len(out) < count:
        need = (count - len(out)) * 2 + 8
        lengths = rng.integers(syllables[0], syllables[1] + 1, size=need)
        parts = rng.integers(0, len(pool), size=(need, syllables[1]))
        for n, row in zip(lengths, parts, strict=True):
            name = "".join(pool[j] for j in row[:n]).capitalize()
            if name not in seen:
                seen.add(name)
                out.append(name)
                if len(out) == count:
                    break
    return out


@lru_cache(maxsize=32)
def _chars_per_token(sample: str) -> float:
    return max(1.0, len(sample) / max(1, count_tokens(sample)))


def chars_per_token(sample: str) -> float:
    """Characters per token of a text like `sample` (an exact count of the sample, cached)."""
    return _chars_per_token(sample[:20_000])


def size_tokens(text: str) -> int:
    """The token size of a generated input: exact when small, a sampled estimate when large."""
    return estimate_tokens(text)
