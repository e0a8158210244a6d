"""rlmnb._eval.tasks: scorers against hand-computed cases, and the generators' promises (seeded, sized, readable only by reading)."""

from __future__ import annotations

import re

import pytest

from rlmnb._eval.tasks import TASK_NAMES, Instance, format_size, generate, parse_size
from rlmnb._eval.tasks.oolong import LABELS, category_words, parse_line, read_note
from rlmnb._eval.tasks.scoring import exact_match, numeric_score, pair_f1, parse_number, parse_pairs
from rlmnb._ground.errors import ConfigError


# ---- scorers --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("truth", "prediction", "expected"), [
    ("1234567", "1234567", 1.0),
    ("1234567", " '1234567'. ", 1.0),
    ("1234567", 1234567, 1.0),
    ("1234567", "The answer is 1234567", 1.0),
    ("1234567", "7654321", 0.0),
    ("1234567", None, 0.0),
    ("1234567", "", 0.0),
    ("Fruit", "fruit", 1.0),
    ("fruit", {"answer": "Fruit"}, 1.0),
    ("fruit", ["fruit"], 0.0),
])
def test_exact_match(truth: object, prediction: object, expected: float) -> None:
    assert exact_match(truth, prediction) == expected


@pytest.mark.parametrize(("truth", "prediction", "expected"), [
    (10, 10, 1.0),
    (10, "10", 1.0),
    (10, 12, 0.75 ** 2),          # partial credit: two off
    (10, "about 7 records", 0.75 ** 3),
    (10, 10.5, 0.75 ** 0.5),
    (1000, "1,000", 1.0),
    (10, "12 or 13", 0.0),        # two numbers: not an answer
    (10, "many", 0.0),
    (10, None, 0.0),
    (10, True, 0.0),
    (10, float("nan"), 0.0),
])
def test_numeric_score_is_the_papers(truth: float, prediction: object, expected: float) -> None:
    assert numeric_score(truth, prediction) == pytest.approx(expected)


def test_parse_number_and_pairs_read_what_models_write() -> None:
    assert parse_number({"answer": "42"}) == 42.0
    assert parse_pairs([[2, 1], (3, 4)]) == {(1, 2), (3, 4)}
    assert parse_pairs("[[5, 6], [8, 7]]") == {(5, 6), (7, 8)}
    assert parse_pairs("pairs: (1, 2) and (4, 3)") == {(1, 2), (3, 4)}
    assert parse_pairs("none") == set()
    assert parse_pairs("I could not find any") is None
    assert parse_pairs([[1, 2, 3]]) is None
    assert parse_pairs(17) is None


@pytest.mark.parametrize(("prediction", "expected"), [
    ([[1, 2], [3, 4], [5, 6]], 1.0),
    ([[2, 1], [4, 3], [6, 5]], 1.0),                    # order inside a pair does not matter
    ([[1, 2], [3, 4]], 2 * 1.0 * (2 / 3) / (1 + 2 / 3)),  # precision 1, recall 2/3 -> 0.8
    ([[1, 2], [3, 4], [5, 6], [7, 8]], 2 * 0.75 * 1.0 / 1.75),  # precision 3/4, recall 1
    ([[1, 2], [9, 9]], 2 * 0.5 * (1 / 3) / (0.5 + 1 / 3)),
    ([[7, 8]], 0.0),
    ([], 0.0),
    ("garbage", 0.0),
    (None, 0.0),
])
def test_pair_f1(prediction: object, expected: float) -> None:
    assert pair_f1([[1, 2], [3, 4], [5, 6]], prediction) == pytest.approx(expected)


def test_pair_f1_both_empty_is_perfect() -> None:
    assert pair_f1([], []) == 1.0
    assert pair_f1([], [[1, 2]]) == 0.0


# ---- sizes and the registry ------------------------------------------------------------------------------
def test_sizes_parse_and_print() -> None:
    assert parse_size("32k") == 32_000 and parse_size("1m") == 1_000_000 and parse_size("1.5M") == 1_500_000
    assert parse_size(8000) == 8000
    assert format_size(256_000) == "256k" and format_size(10_000_000) == "10m"
    with pytest.raises(ConfigError, match="write it like"):
        parse_size("lots")
    with pytest.raises(ConfigError, match="outside"):
        parse_size("100")
    with pytest.raises(ConfigError, match="choose from"):
        generate("browsecomp", "8k")


# ---- generators -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASK_NAMES)
def test_generators_are_seeded_sized_and_self_consistent(task: str) -> None:
    a = generate(task, "16k", seed=3, index=1)
    b = generate(task, "16k", seed=3, index=1)
    c = generate(task, "16k", seed=3, index=2)
    assert a.inputs["context"] == b.inputs["context"] and a.answer == b.answer and a.question == b.question
    assert a.inputs["context"] != c.inputs["context"]
    assert 0.85 * 16_000 <= a.tokens <= 1.15 * 16_000
    assert a.score(a.answer) == 1.0
    assert a.score("certainly not the answer") == 0.0
    again = Instance.from_dict(a.to_dict())
    assert again.inputs["context"] == a.inputs["context"] and again.answer == a.answer
    assert "inputs" not in a.to_dict() and "data" not in a.to_dict()


def test_niah_has_distractors_sharing_words_with_the_key() -> None:
    inst = generate("niah", "32k", seed=0, index=4)
    key = inst.meta["key"]
    planted = re.findall(r"special magic number for ([a-z]+ [a-z]+) is (\d{7})", inst.inputs["context"])
    assert len(planted) == 4 and dict(planted)[key] == inst.answer
    words = key.split()
    others = [k for k, _ in planted if k != key]
    assert any(words[0] in k for k in others) and any(words[1] in k for k in others)


def test_oolong_counts_match_the_records_and_never_tie() -> None:
    inst = generate("oolong", "32k", seed=1, index=0)
    records = inst.data
    counts = inst.meta["counts"]
    assert sum(counts.values()) == records.count == inst.meta["records"]
    assert len(set(counts.values())) == len(LABELS)
    assert [read_note(p[2]) for p in map(parse_line, inst.inputs["context"].split("\n")) if p] == records.label_names()


def test_oolong_labels_defeat_keyword_rules() -> None:
    """Every note names two categories; first-word and last-word rules are right about half the time."""
    inst = generate("oolong", "64k", seed=2, index=0)
    notes = [p[2] for p in map(parse_line, inst.inputs["context"].split("\n")) if p]
    truth = inst.data.label_names()
    named = [category_words(note) for note in notes]
    assert all(len(words) == 2 and words[0] != words[1] for words in named)
    first = sum(w[0] == t for w, t in zip(named, truth, strict=True)) / len(truth)
    last = sum(w[-1] == t for w, t in zip(named, truth, strict=True)) / len(truth)
    assert 0.35 < first < 0.65 and 0.35 < last < 0.65


def test_oolong_pairs_answer_is_the_predicate_over_both_labels() -> None:
    inst = generate("oolong_pairs", "32k", seed=0, index=1)
    records = inst.data
    a, b = inst.meta["params"]["a"], inst.meta["params"]["b"]
    label = dict(zip(records.ids.tolist(), records.label_names(), strict=True))
    user = dict(zip(records.ids.tolist(), records.users.tolist(), strict=True))
    assert inst.answer, "this seed's question has pairs (so the check below checks something)"
    for i, j in inst.answer:
        assert user[i] == user[j] and {label[i], label[j]} == {a, b}


def test_multihop_chain_is_stated_once_with_distractors() -> None:
    inst = generate("multihop", "32k", seed=0, index=0)
    text = inst.inputs["context"]
    chain = inst.meta["chain"]
    assert inst.answer == chain[-1] and len(chain) == int(inst.kind[0]) + 1
    assert text.count("### Document") == inst.meta["documents"]
    person_docs = [d for d in text.split("\n\n") if chain[0] in d]
    assert len(person_docs) == 1 and chain[1] in person_docs[0]
    assert len(re.findall(r"[A-Z][a-z]+ (?:Systems|Works|Labs|Group|Holdings)", person_docs[0])) == 2
