"""Tasks that find facts planted in generated filler prose: S-NIAH (one fact) and multi-hop (a chain of facts).

`NIAH` plants one needle among distractor needles; `MULTIHOP` builds a corpus of documents whose answer
takes two or three of them. Each class docstring says how its answer can and cannot be found without reading.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from rlmnb._eval.tasks.base import Instance, instance_seed
from rlmnb._eval.tasks.scoring import exact_match
from rlmnb._eval.tasks.text import chars_per_token, filler, filler_pool, names, size_tokens

__all__ = ["ADJECTIVES", "ANIMALS", "HQ", "HQ_DISTRACTOR", "IN_COUNTRY", "IN_DISTRACTOR", "MULTIHOP", "NEEDLE", "NIAH",
           "WORKS", "WORKS_DISTRACTOR", "MultiHopTask", "NIAHTask", "read_fact"]


# ---- S-NIAH ------------------------------------------------------------------------------------------

ADJECTIVES = ("amber", "quiet", "crimson", "hollow", "silver", "brisk", "velvet", "northern", "lucky", "frozen",
              "gentle", "rapid", "scarlet", "misty", "golden", "sober")
ANIMALS = ("heron", "falcon", "otter", "badger", "lynx", "marten", "ibis", "walrus", "gecko", "bison", "crane",
           "puffin", "jackal", "osprey", "tapir", "viper")
NEEDLE = "The special magic number for {key} is {number}."
SENTENCES_PER_LINE = 8


class NIAHTask:
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

    name = "niah"
    description = inspect.cleandoc(__doc__ or "")

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


# ---- multi-hop ---------------------------------------------------------------------------------------

WORKS = ("{p} has worked at {c} for several years.", "These days {p} is employed by {c}.",
         "{p} joined {c} as an engineer and stayed.", "Colleagues at {c} describe {p} as reliable.")
WORKS_DISTRACTOR = ("{p} once interviewed at {c} but declined the offer.", "{p} has never worked for {c}.")
HQ = ("{c} has its headquarters in {t}.", "The head office of {c} is in {t}.",
      "{c} is headquartered in the city of {t}.", "From its main office in {t}, {c} runs everything.")
HQ_DISTRACTOR = ("{c} considered opening an office in {t}, but did not.", "{c} has no presence in {t}.")
IN_COUNTRY = ("{t} is a city in {n}.", "{t} lies in the north of {n}.", "The city of {t} belongs to {n}.")
IN_DISTRACTOR = ("Many travellers from {t} visit {n} in summer.", "{t} trades a lot with {n}.")
FILLER_SENTENCES = (3, 9)


class MultiHopTask:
    """Multi-hop: a corpus of generated documents where the answer takes two or three of them, found by reading.

    Made-up people work at made-up companies, companies have their headquarters in made-up cities, and
    cities lie in made-up countries (no world knowledge helps). Each fact is stated once, in its own
    document, in one of several phrasings, and each document also names a second entity in a role that
    is not the fact (a person who "once interviewed at" another company, a company that "considered" another
    city). A two-hop question asks for the headquarters city of a person's employer; a three-hop question
    asks for the country of that city. Exact match on the final entity.

    How the answer can be found without reading: code can find the documents that mention a name (a
    substring search), which narrows the corpus to a handful; it cannot tell the employer from the company
    the person only interviewed at, or the headquarters from a city that was merely considered, without a
    pattern per phrasing. A method reads the few candidate documents at each hop (a sub-call) and follows the
    chain with code. A truncated prompt answers only when every document of the chain is inside the cut.
    """

    name = "multihop"
    description = inspect.cleandoc(__doc__ or "")

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        import numpy as np

        rng = np.random.default_rng(instance_seed(self.name, size, seed, index))
        pool = filler_pool(rng)
        # a document: title and two facts (~180 characters) and 5.5 filler sentences on average; made-up names
        # cost more tokens per character than filler words (docs/decisions/multihop-size-calibration.md)
        mean_doc = 180 + 5.5 * sum(len(s) + 1 for s in pool[:400]) / 400
        cpt = 0.8 * chars_per_token(" ".join(pool[:400]))
        docs = max(40, int(size * cpt / mean_doc))
        people_n = max(10, docs * 6 // 10)
        companies_n = max(5, docs * 3 // 10)
        cities_n = max(4, docs - people_n - companies_n)
        taken: set[str] = set()
        firsts, lasts = names(rng, 400, taken=taken), names(rng, 400, taken=taken)
        combos = rng.choice(len(firsts) * len(lasts), size=people_n, replace=False)  # unique full names
        people = [f"{firsts[k // len(lasts)]} {lasts[k % len(lasts)]}" for k in combos.tolist()]
        companies = [f"{n} {s}" for n, s in zip(names(rng, companies_n, syllables=(2, 4), taken=taken),
                                                 rng.choice(["Systems", "Works", "Labs", "Group", "Holdings"],
                                                            size=companies_n), strict=True)]
        cities = names(rng, cities_n, syllables=(3, 4), taken=taken)
        countries = [f"{n}ia" for n in names(rng, max(3, min(300, cities_n // 8)), syllables=(2, 4), taken=taken)]
        employer = rng.integers(0, companies_n, size=people_n)
        hq = rng.integers(0, cities_n, size=companies_n)
        country = rng.integers(0, len(countries), size=cities_n)
        documents: list[tuple[str, str]] = []
        for i, p in enumerate(people):
            other = (employer[i] + 1 + rng.integers(0, companies_n - 1)) % companies_n
            documents.append((f"Profile of {p}", _fact(rng, WORKS, p=p, c=companies[employer[i]]) + " "
                              + _fact(rng, WORKS_DISTRACTOR, p=p, c=companies[other])))
        for i, c in enumerate(companies):
            other = (hq[i] + 1 + rng.integers(0, cities_n - 1)) % cities_n
            documents.append((f"About {c}", _fact(rng, HQ, c=c, t=cities[hq[i]]) + " "
                              + _fact(rng, HQ_DISTRACTOR, c=c, t=cities[other])))
        for i, t in enumerate(cities):
            other = (country[i] + 1 + rng.integers(0, len(countries) - 1)) % len(countries)
            documents.append((f"City guide: {t}", _fact(rng, IN_COUNTRY, t=t, n=countries[country[i]]) + " "
                              + _fact(rng, IN_DISTRACTOR, t=t, n=countries[other])))
        order = rng.permutation(len(documents))
        lengths = rng.integers(*FILLER_SENTENCES, size=len(documents))
        parts = []
        for k, (slot, n) in enumerate(zip(order.tolist(), lengths.tolist(), strict=True)):
            title, facts = documents[slot]
            prose = filler(rng, pool, n)
            cut = int(rng.integers(0, n + 1))
            parts.append(f"### Document {k + 1}: {title}\n" + " ".join([*prose[:cut], facts, *prose[cut:]]))
        text = "\n\n".join(parts)
        person = int(rng.integers(0, people_n))
        company = int(employer[person])
        city = int(hq[company])
        hops = 3 if rng.random() < 0.5 else 2
        chain = [people[person], companies[company], cities[city]] + ([countries[country[city]]] if hops == 3 else [])
        if hops == 2:
            question = (f"In which city does the company that {people[person]} works for have its headquarters? "
                        f"Answer with the city name only.")
        else:
            question = (f"In which country is the headquarters city of the company that {people[person]} works "
                        f"for? Answer with the country name only.")
        return Instance(task=self.name, size=size, index=index, seed=seed,
                        question=f"The input `context` is a corpus of documents, each starting with '### Document'. "
                                 f"{question}",
                        inputs={"context": text}, answer=chain[-1], kind=f"{hops}-hop", tokens=size_tokens(text),
                        meta={"documents": len(documents), "chain": chain,
                              "positions": [_doc_position(text, title) for title in _titles(chain)]},
                        data={"people": people, "companies": companies, "cities": cities, "countries": countries})

    def score(self, instance: Instance, prediction: Any) -> float:
        return exact_match(instance.answer, prediction)


def _fact(rng: Any, phrasings: tuple[str, ...], **names_: str) -> str:
    return phrasings[int(rng.integers(0, len(phrasings)))].format(**names_)


def _titles(chain: list[str]) -> list[str]:
    kinds = ("Profile of ", "About ", "City guide: ")
    return [kind + entity for kind, entity in zip(kinds, chain, strict=False)]


def _doc_position(text: str, title: str) -> int:
    """Where the document with `title` ends (a cut prompt must reach this far to hold its fact)."""
    match = re.search(rf"### Document \d+: {re.escape(title)}\n", text)
    if not match:
        return -1
    end = text.find("\n\n### Document", match.end())
    return len(text) if end < 0 else end


# ---- the reader's side: what a sub-model that reads concludes (the oracles use this) ---------------------
def _patterns(phrasings: tuple[str, ...], **fixed: str) -> list[re.Pattern[str]]:
    out = []
    for phrasing in phrasings:
        pattern = re.escape(phrasing)
        for key in ("p", "c", "t", "n"):
            value = fixed.get(key)
            pattern = pattern.replace(r"\{" + key + r"\}",
                                      re.escape(value) if value else rf"(?P<{key}>[A-Z][a-z]+(?: [A-Z][a-z]+)?)")
        out.append(re.compile(pattern))
    return out


def read_fact(text: str, relation: str, subject: str) -> str | None:
    """The object of `relation` ("works", "hq", "country") for `subject` as stated in `text`, read correctly."""
    phrasings, key, group = {"works": (WORKS, "p", "c"), "hq": (HQ, "c", "t"), "country": (IN_COUNTRY, "t", "n")}[
        relation]
    for pattern in _patterns(phrasings, **{key: subject}):
        match = pattern.search(text)
        if match:
            return match.group(group)
    return None


MULTIHOP = MultiHopTask()
