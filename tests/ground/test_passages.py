"""Passages of a text: the question's names, where a text names them, and whether a text holds an answer."""

from __future__ import annotations

import pytest

from rlmnb._ground.passages import (
    echoes_question,
    held_by,
    mentions,
    passage_around,
    question_mentions,
    question_names,
)


def test_question_names_are_numbered_hyphenated_capital_or_capitalised_mid_sentence_terms() -> None:
    question = "What did Ada say about KEY-12, the 2024 budget and project_x in 10 steps? Where is it?"
    assert question_names(question) == ["Ada", "KEY-12", "2024", "project_x"]


def test_question_mentions_quotes_the_rarest_names_first() -> None:
    text = "Ada was here.\nAda again.\nKEY-12 opens the door.\n"
    found = question_mentions("What does Ada know of KEY-12?", text, width=80)
    assert [name for name, _ in found] == ["KEY-12", "Ada", "Ada"]
    assert found[0][1] == "KEY-12 opens the door."


def test_mentions_are_in_text_order_and_span_their_passage() -> None:
    text = "alpha line\nbeta line\nalpha again\n"
    found = mentions(text, ["beta", "alpha"], width=80)
    assert [(m.term, text[m.start:m.end]) for m in found] == [
        ("alpha", "alpha line"), ("beta", "beta line"), ("alpha", "alpha again")]


def test_a_passage_in_a_long_line_is_cut_between_words() -> None:
    text = "x " * 200 + "needle " + "y " * 200
    start = text.index("needle")
    lo, hi, excerpt = passage_around(text, start, start + 6, 40)
    assert excerpt.startswith("...") and excerpt.endswith("...") and "needle" in excerpt
    assert text[lo - 1] == " " and text[hi] == " "


@pytest.mark.parametrize(("answer", "text", "held"), [
    ("73914", "the code is 73,914.", True),
    ("73914", "the code is 73915.", False),
    ("12.5%", "a rate of 12.50 percent", True),
    ("Glasgow office", "moved to the Glasgow office", True),
    ("Lisbon harbour", "moved to the Glasgow office", False),
    ("the vault", "nothing here", None),  # only the question's words: nothing to check
])
def test_held_by_looks_for_the_numbers_else_the_words_an_answer_adds(answer: str, text: str, held: bool | None) -> None:
    assert held_by(answer, text, question="Where is the vault?") is held


def test_an_answer_copied_from_the_question_is_an_echo() -> None:
    question = "List the words, e.g. apple, banana, cherry, as in this example."
    assert echoes_question("apple, banana, cherry", "dog cat mouse", question=question)
    assert not echoes_question("apple, banana, cherry", "apple banana cherry", question=question)
    assert held_by("apple, banana, cherry", "dog cat mouse", question=question) is False
