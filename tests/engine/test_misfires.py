"""The misfires issue 44 recorded, each as a behaviour that now holds: no policy turns the root's correct answer into
another, and no run ends with an answer the root did not give.

Recorded with scripted roots over ordinary data (`ordinary_data`), before the policies:
- a turn-1 plan citing the first reading's number ("... 12 ... I will count them with code next") ended the run
  with '12' (right: 37);
- under a token cap that fit the first reading but not the root's next call, the run ended with the sub-model's
  unchecked '90 days' (the contract says 60);
- a list stated twice in prose, then submitted as a list, ended the run with the sentence.
Two more have their own tests, not repeated here: `print(len(t))` after `t = t[...]` runs again
(tests/engine/test_repeat_after_change.py), and several `submit()` calls at a step's top level are refused
(tests/sandbox/test_several_submits.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from ordinary_data import REFUND_DAYS, contract, policy_actions, service_log, tickets
from sandbox_support import code

from rlmnb import RLM
from rlmnb._engine.budget import REPLY_ESTIMATE
from rlmnb.events import CodeExecuted, ModelReply, SubCallFinished
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")

SMALL_WINDOW = 32_768
"""The root's and sub-model's context window where a first reading is made ("small")."""
COUNT = code("errors = [line for line in inputs['log'].splitlines() if ' ERROR ' in line]\nprint(len(errors))")


def test_a_plan_citing_the_readings_number_does_not_end_the_run(kind: str) -> None:
    plan = "The first reading says there are 12 ERROR lines. I will count them with code next."
    root = ScriptedLM([plan, COUNT, code("submit(len(errors))")], context_window=SMALL_WINDOW)
    sub = ScriptedLM(lambda messages: "12", context_window=SMALL_WINDOW)
    result = RLM(root, sub, sandbox=kind, max_iterations=6, cache=False, policies="small").run(
        "How many ERROR lines does the log have?", log=service_log())
    assert ("first_read", "read_first") in policy_actions(result.trajectory)  # the plan cited a reading it had
    assert (result.status, result.answer) == ("submitted", 37)


def test_a_list_stated_twice_in_prose_then_submitted_ends_with_the_list(kind: str) -> None:
    said = "The areas with more than 30 tickets are: billing, shipping, returns."
    root = ScriptedLM([code("t = inputs['tickets']\nprint(t['area'].value_counts())"), said, said,
                       code("submit(['billing', 'shipping', 'returns'])")])
    result = RLM(root, ScriptedLM(["x"]), sandbox=kind, max_iterations=6, cache=False).run(
        "Which areas have more than 30 tickets?", tickets=tickets())
    assert (result.status, result.answer) == ("submitted", ["billing", "shipping", "returns"])


REFUND_STEPS = [code("text = inputs['contract']\nstart = text.find('Refunds.')\nprint(text[start - 4:start + 300])"),
                code(f"submit('{REFUND_DAYS} days')")]
REFUND_QUESTION = "Within how many days are refunds due?"


def refund_run(kind: str, max_tokens: int | None) -> tuple[Any, ScriptedLM]:
    """The refund question over the contract: a first reading whose every part says "90 days" (wrong), then the
    root's `REFUND_STEPS`; with the token cap `max_tokens`. Returns the result and the root (its requests)."""
    root = ScriptedLM(REFUND_STEPS, context_window=SMALL_WINDOW)
    sub = ScriptedLM(lambda messages: "90 days", context_window=SMALL_WINDOW)
    rlm = RLM(root, sub, sandbox=kind, max_iterations=6, cache=False, policies="small", max_tokens=max_tokens)
    return rlm.run(REFUND_QUESTION, contract=contract()), root


def test_a_token_cap_the_roots_next_call_does_not_fit_ends_without_the_readings_answer(kind: str) -> None:
    # measured on the same run uncapped: the tokens the reading and turn 1 spent, and what turn 2's call reserves
    free, root = refund_run(kind, None)
    assert (free.status, free.answer) == ("submitted", f"{REFUND_DAYS} days")
    reading = sum(_tokens(e.usage) for e in free.trajectory.events if isinstance(e, SubCallFinished) and e.turn == 0)
    turn_1 = next(_tokens(e.usage) for e in free.trajectory.events if isinstance(e, ModelReply) and e.turn == 1)
    reserved = [sum(len(str(m.get("content") or "")) for m in request) // 4 + REPLY_ESTIMATE
                for request in root.requests[:2]]
    fits = reading + max(REPLY_ESTIMATE, reserved[0])  # the reading's last call and turn 1's call fit
    refused = reading + turn_1 + reserved[1]  # turn 2's call does not
    assert reading > 0 and fits < refused
    result, _ = refund_run(kind, (fits + refused) // 2)
    assert any(isinstance(e, SubCallFinished) and e.turn == 0 for e in result.trajectory.events)  # the reading was made
    assert sum(isinstance(e, CodeExecuted) for e in result.trajectory.events) == 1  # and the root's turn 1 ran
    assert (result.status, result.answer) == ("budget_exhausted", None)


def _tokens(usage: dict[str, Any]) -> int:
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
