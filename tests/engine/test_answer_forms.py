"""Every ordinary form of a correct answer passes unchanged, in the turns the root needed (issue 44).

A scripted root answers an ordinary question over ordinary data (`ordinary_data`: support tickets, a contract, a
service log) the way a careful analyst would: one step of pandas, `re` or `str` code that prints what it found,
then `submit()` of the answer in the form a user would accept, with every policy on. No policy may send such an answer back, ask again
or change it: the run ends "submitted" with exactly the submitted value, after exactly the scripted turns.

Reported on these forms before the policies (issue 44): each was sent back once ("Yes", a date in words, prose
restating a printed count, an index label, an empty result, the question's own options, a computed count beside
a first reading that said otherwise, one of the codes a reading listed), refused four times (a verbatim clause the
question asked for), or passed only by chance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from ordinary_data import (
    LIABILITY_CLAUSE,
    contract,
    contract_clause,
    policy_actions,
    rejections,
    service_log,
    tickets,
    turns_started,
)
from sandbox_support import code

from rlmnb import POLICIES, RLM
from rlmnb._models.base import Message
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")

SMALL_WINDOW = 32_768
"""A context window the "auto" profile counts as small (the root and sub-model of the first-reading cases)."""


@dataclass(frozen=True)
class Case:
    """One ordinary question, the root's steps (code, the last one submitting) and the answer they submit."""

    question: str
    inputs: dict[str, Any]
    steps: list[str]
    answer: Any
    settings: dict[str, Any] = field(default_factory=dict)
    reading: str | None = None
    """What the sub-model answers every request with (a first reading's); None: no first reading."""


def prose_restating_a_printed_count() -> Case:
    return Case("Which area has the most tickets, and how many tickets does it have?", {"tickets": tickets()},
                [code("t = inputs['tickets']\nprint(t['area'].value_counts())"),
                 code("submit('Billing, with 64 tickets')")], "Billing, with 64 tickets")


def yes() -> Case:
    return Case("Is there at least one urgent ticket in the returns area?", {"tickets": tickets()},
                [code("t = inputs['tickets']\nprint(len(t[(t['area'] == 'returns') & (t['priority'] == 'urgent')]))"),
                 code("submit('Yes')")], "Yes")


def date_in_words() -> Case:
    return Case("When was the earliest ticket created?", {"tickets": tickets()},
                [code("print(inputs['tickets']['created'].min().date())"), code("submit('January 1, 2022')")],
                "January 1, 2022")


def rounded_number() -> Case:
    frame = tickets()
    mean = float(frame[frame["area"] == "account"]["text"].str.split().str.len().mean())
    assert str(round(mean, 2)) not in str(round(mean, 4))  # the answer rounds; it is no prefix of what was printed
    return Case("On average, how many words does the text of an account ticket have?", {"tickets": frame},
                [code("t = inputs['tickets']\nwords = t[t['area'] == 'account']['text'].str.split().str.len()\n"
                      "print(round(words.mean(), 4))"),
                 code(f"submit({round(mean, 2)!r})")], round(mean, 2))


def label_from_a_printed_index() -> Case:
    frame = tickets()
    longest = frame.set_index("id")["text"].str.len().idxmax()
    return Case("Which ticket has the longest text? Give its id.", {"tickets": frame},
                [code("t = inputs['tickets'].set_index('id')\nprint(t['text'].str.len().nlargest(3))"),
                 code(f"submit({longest!r})")], longest)


def character_offset() -> Case:
    text = contract()
    offset = text.find("Indemnification")
    return Case("At what character offset does the word 'Indemnification' first appear in the contract?",
                {"contract": text},
                [code("print(inputs['contract'].find('Indemnification'))"), code(f"submit({offset})")], offset)


def empty_list() -> Case:
    return Case("Which technical tickets are urgent? List their ids.", {"tickets": tickets()},
                [code("t = inputs['tickets']\nprint(t[(t['area'] == 'technical') & (t['priority'] == 'urgent')])"),
                 code("submit([])")], [])


def options_the_question_offered() -> Case:
    return Case("Which of these areas have more than 30 tickets: billing, shipping, returns or account?",
                {"tickets": tickets()},
                [code("t = inputs['tickets']\nprint(t['area'].value_counts())"),
                 code("submit(['billing', 'shipping', 'returns'])")], ["billing", "shipping", "returns"])


def verbatim_clause() -> Case:
    text = contract()
    return Case(f"Quote clause {LIABILITY_CLAUSE} of the contract (Limitation of Liability) verbatim.",
                {"contract": text},
                [code(f"text = inputs['contract']\nstart = text.index('\\n\\n{LIABILITY_CLAUSE}. ') + 2\n"
                      "clause = text[start:text.index('\\n\\n', start)]\nprint(len(clause))\nprint(clause[:300])"),
                 code("submit(clause)")], contract_clause(text, LIABILITY_CLAUSE))


def count_beside_a_reading_that_said_otherwise() -> Case:
    return Case("How many ERROR lines does the log have?", {"log": service_log()},
                [code("errors = [line for line in inputs['log'].splitlines() if ' ERROR ' in line]\n"
                      "print(len(errors))"),
                 code("submit(len(errors))")], 37, settings={"first_read": "on"}, reading="12")


def one_code_of_those_a_reading_listed() -> Case:
    return Case("Which error code appears most often in the log?", {"log": service_log()},
                [code("import re\nfrom collections import Counter\n"
                      "codes = Counter(re.findall(r'ERROR service=\\w+ (E\\d+)', inputs['log']))\n"
                      "print(codes.most_common())"),
                 code("submit('E503')")], "E503", settings={"policies": "small"}, reading="E503 and E404")


CASES: list[Callable[[], Case]] = [
    prose_restating_a_printed_count, yes, date_in_words, rounded_number, label_from_a_printed_index,
    character_offset, empty_list, options_the_question_offered, verbatim_clause,
    count_beside_a_reading_that_said_otherwise, one_code_of_those_a_reading_listed,
]


def answering(reply: str) -> Callable[[list[Message]], str]:
    """A sub-model that answers every request with `reply` (a first reading's parts, its plain asking, its places)."""
    return lambda messages: reply


def assert_taken_after(result: Any, answer: Any, turns: int, sent_back: list[str]) -> None:
    """The run ended "submitted" with `answer` after `turns` turns, and exactly the policies `sent_back` sent an
    answer back (each as a PolicyActed send_back and a GuardRejected of its name), in that order."""
    acted, rejected = policy_actions(result.trajectory), rejections(result.trajectory)
    assert (result.status, result.answer) == ("submitted", answer), (rejected, acted)
    assert turns_started(result.trajectory) == turns and rejected == sent_back
    assert [policy for policy, action in acted if action == "send_back"] == sent_back


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_an_ordinary_answer_passes_unchanged_in_the_turns_the_root_needed(make: Callable[[], Case],
                                                                          kind: str) -> None:
    case = make()
    window = SMALL_WINDOW if case.reading is not None else None
    root = ScriptedLM(case.steps, context_window=window)
    sub = ScriptedLM(answering(case.reading) if case.reading is not None else ["x"], context_window=window)
    settings = {"policies": POLICIES, **case.settings}  # every policy on: none may misfire, named or in a profile
    result = RLM(root, sub, sandbox=kind, max_iterations=6, cache=False, **settings).run(
        case.question, **case.inputs)
    assert_taken_after(result, case.answer, len(case.steps), sent_back=[])
    if case.reading is not None:  # the reading was made and was not the answer
        assert ("first_read", "read_first") in policy_actions(result.trajectory)


# ---- which policy acts: the answers that do go back, and the paper's loop, where none does -------------------------


def run_policies(kind: str, steps: list[str], question: str, policies: str, **inputs: Any) -> Any:
    """A run whose scripted root takes `steps`, under the profile `policies` (or that one policy named alone); the
    sub-model is never asked."""
    rlm = RLM(ScriptedLM(steps), ScriptedLM(["x"]), sandbox=kind, max_iterations=6, cache=False, policies=policies)
    return rlm.run(question, **inputs)


@pytest.mark.parametrize("policies", ["unshown_value", "default", "paper"])
def test_a_typed_number_nothing_showed_goes_back_once_where_unshown_value_is_on(kind: str, policies: str) -> None:
    shown = code("t = inputs['tickets']\nprint(t['area'].value_counts())")
    again = code("answer = 4711\nsubmit(answer)")  # other code: a step that ran before may be refused as a repeat
    steps = [shown, code("submit(4711)")] + ([again] if policies == "unshown_value" else [])
    result = run_policies(kind, steps, "How many billing tickets are urgent?", policies, tickets=tickets())
    sent_back = ["unshown_value"] if policies == "unshown_value" else []
    assert_taken_after(result, 4711, len(steps), sent_back)


@pytest.mark.parametrize("policies", ["whole_copy", "default", "paper"])
def test_the_whole_text_input_submitted_goes_back_once_where_whole_copy_is_on(kind: str, policies: str) -> None:
    again = code("log = inputs['log']\nsubmit(log)")
    steps = [code("print(inputs['log'][:400])"), code("submit(inputs['log'])")] + ([again] if policies == "whole_copy" else [])
    log = service_log()
    result = run_policies(kind, steps, "What happened in the service this morning?", policies, log=log)
    sent_back = ["whole_copy"] if policies == "whole_copy" else []
    assert_taken_after(result, log, len(steps), sent_back)


@pytest.mark.parametrize("policies", ["look_first", "all", "look_first, final_answer", "default", "paper"])
def test_a_submit_before_any_output_goes_back_where_look_first_is_on(kind: str, policies: str) -> None:
    # "all" and a string of names with commas (as `rlmnb eval --policies` and %config give them) turn it on too
    blind = code("submit(len(inputs['log'].splitlines()))")
    looked = code("lines = inputs['log'].splitlines()\nprint(len(lines))\nsubmit(len(lines))")
    on = "look_first" in policies or policies == "all"
    steps = [blind, looked] if on else [blind]
    result = run_policies(kind, steps, "How many lines does the log have?", policies, log=service_log())
    sent_back = ["look_first"] if on else []
    assert_taken_after(result, 400, len(steps), sent_back)
