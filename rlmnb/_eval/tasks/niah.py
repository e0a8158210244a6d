"""S-NIAH: one needle in a haystack of filler prose, among distractor needles.

The needle is the sentence "The special magic number for <key> is <7 digits>." at a random depth.
Distractor needles use the same sentence with other keys, and the keys share words with the asked key
("amber heron" asked, "amber falcon" and "quiet heron" planted), so a search for one word of the key finds
the wrong number. Scored by exact match on the seven digits.

How the answer can be found without reading: a substring search for the whole key finds the needle,
so code alone (the `rlm_no_sub` method) solves this task, as in the paper: S-NIAH measures whether a
method can locate one fact at all, at constant cost in the input size. What cannot find it: anything
that sees only part of the text (a truncated prompt finds it only when the needle's depth is inside
the cut), or a search for a single word of the key.
"""

from __future__ import annotations

from typing import Any

from rlmnb._eval.tasks.base import Instance, instance_seed
from rlmnb._eval.tasks.scoring import exact_match
from rlmnb._eval.tasks.text import chars_per_token, filler, filler_pool, size_tokens

ADJECTIVES = ("amber", "quiet", "crimson", "hollow", "silver", "brisk", "velvet", "northern", "lucky", "frozen",
              "gentle", "rapid", "scarlet", "misty", "golden", "sober")
ANIMALS = ("heron", "falcon", "otter", "badger", "lynx", "marten", "ibis", "walrus", "gecko", "bison", "crane",
           "puffin", "jackal", "osprey", "tapir", "viper")
NEEDLE = "The special magic number for {key} is {number}."
SENTENCES_PER_LINE = 8


class NIAHTask:
    name = "niah"
    description = __doc__ or ""

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        import numpy as np

        rng = np.random.default_rng(instance_seed(self.name, size, seed, index))
        pool = filler_pool(rng)
        adjective, animal = rng.choice(len(ADJECTIVES), 3, replace=False), rng.choice(len(ANIMALS), 3, replace=False)
        key = f"{ADJECTIVES[adjective[0]]} {ANIMALS[animal[0]]}"
        distractor_keys = [f"{ADJECTIVES[adjective[0]]} {ANIMALS[animal[1]]}",
                           f"{ADJECTIVES[adjective[1]]} {ANIMALS[animal[0]]}",
                           f"{ADJECTIVES[adjective[2]]} {ANIMALS[animal[2]]}"]
        numbers = [str(n) for n in rng.choice(np.arange(1_000_000, 10_000_000), 1 + len(distractor_keys),
                                               replace=False)]
        needles = [NEEDLE.format(key=k, number=n) for k, n in zip([key, *distractor_keys], numbers, strict=True)]
        cpt = chars_per_token(" ".join(pool[:400]))
        mean_len = sum(len(s) + 1 for s in pool) / len(pool)
        count = max(len(needles) + 4, int(size * cpt / mean_len) - len(needles))
        sentences = filler(rng, pool, count)
        depth = float(rng.uniform(0.05, 0.95))
        needle_slot = int(depth * count)
        free = np.setdiff1d(np.arange(count), [needle_slot])
        placed = {needle_slot: needles[0]}
        placed.update(zip((int(s) for s in rng.choice(free, len(needles) - 1, replace=False)), needles[1:],
                          strict=True))
        for slot in sorted(placed, reverse=True):
            sentences.insert(slot, placed[slot])
        lines = [" ".join(sentences[i: i + SENTENCES_PER_LINE]) for i in range(0, len(sentences), SENTENCES_PER_LINE)]
        text = "\n".join(lines)
        position = text.find(needles[0])
        return Instance(
            task=self.name, size=size, index=index, seed=seed,
            question=f"What is the special magic number for {key}? Answer with the 7-digit number only.",
            inputs={"context": text}, answer=numbers[0], kind="needle", tokens=size_tokens(text),
            meta={"key": key, "depth": round(position / max(1, len(text)), 4), "position": position,
                  "distractors": len(distractor_keys)},
            data={"needles": dict(zip([key, *distractor_keys], numbers, strict=True))})

    def score(self, instance: Instance, prediction: Any) -> float:
        return exact_match(instance.answer, prediction)


NIAH = NIAHTask()
