"""The turn loop's policies on replies shaped like issue 22's small-model trajectories (Qwen2.5-Coder 1.5B on
llama.cpp, RULER needle and multikey tasks), and the evidence they read: `repeat_breaker` on repeated steps,
`unshown_value` on submit(), `prose_answer` on a bare value, `empty_reply` on replies that copy their request,
`same_error`, and `final_answer` answering from real outputs. Each action is asserted as the `PolicyActed` event
that names the policy (and a `GuardRejected` of its name for a send-back), never by a message's wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from ordinary_data import EVERY_POLICY
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb._engine.evidence import (
    Step,
    asks_only_the_question,
    found_before,
    found_in,
    holding_excerpt,
    latest_other,
    output_tails,
    short_answer,
    typed_at,
)
from rlmnb._ground.config import PROFILES
from rlmnb._ground.passages import held_by, question_mentions, question_names
from rlmnb._ground.prompts import load, render
from rlmnb.events import CodeExecuted, Fallback, GuardRejected, ModelReply, PolicyActed, Submitted, Trajectory
from rlmnb.testing import ScriptedLM

WITH_BREAKER = ("repeat_breaker", *PROFILES["default"])  # the policy these tests are about, beside its profile

NEEDLE = "One of the special magic numbers for furtive-donation is: 4015985."
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


def haystack(repeats: int = 120) -> str:
    half = FILLER * (repeats // 2)
    return half + NEEDLE + " " + half


def run(replies: list[Any], *, text: str | None = None, **kw: Any) -> tuple[Any, ScriptedLM]:
    """A run with every policy on (most of these are named ones, out of the profiles) unless `policies` is given."""
    root = ScriptedLM(replies, name="root")
    kw.setdefault("policies", EVERY_POLICY)
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", **kw)
    return rlm.run("What is the special magic number for furtive-donation?", text=text or haystack()), root


def acted(trajectory: Trajectory) -> list[tuple[int, str, str]]:
    """(turn, policy, action) of every `PolicyActed` event of a run, in order."""
    return [(e.turn, e.policy, e.action) for e in trajectory.of(PolicyActed)]


def acted_by(trajectory: Trajectory, policy: str) -> list[tuple[int, str]]:
    """(turn, action) of every action of `policy` in a run, in order."""
    return [(turn, action) for turn, name, action in acted(trajectory) if name == policy]


def asked_again(trajectory: Trajectory) -> list[int]:
    """The turns at which `repeat_breaker` asked for another step instead of running a repeat."""
    return [turn for turn, action in acted_by(trajectory, "repeat_breaker") if action == "ask_again"]


LOOK = code("text = inputs['text']\nprint(len(text))")
SPLIT = code("chunks = [text[i:i + 2000] for i in range(0, len(text), 2000)]\nprint(len(chunks), 'chunks')")
FIND = code("i = text.find('special magic number')\nprint(text[i - 40:i + 60])")


# ---- the stall breaker ------------------------------------------------------------------------------------
BAD = code("print(chunks[99])")  # an IndexError: a failing step runs again once unasked


def test_a_repeated_step_shows_its_output_again_and_points_at_the_latest_different_output() -> None:
    # recorded (needle, 8k): turn 3 printed "...for furtive-donation is: 4015985", then the model went back to
    # turn 2's code; the old note hid the output and changed nothing. A step that ran cleanly is never run again
    # (below); one that failed runs once more, with the stall note
    result, root = run([LOOK, SPLIT, FIND, BAD, BAD, code("submit(4015985)")])
    assert [e.repeat_of for e in result.trajectory.of(CodeExecuted)] == [None, None, None, None, 4, None]
    assert acted(result.trajectory) == [(5, "repeat_breaker", "note")]  # it ran (it had failed), with the note
    obs = observations(root)[4]
    output, note = obs[:obs.index("[note]")], obs[obs.index("[note]"):]
    assert "IndexError" in output  # the output is shown again
    assert "for furtive-donation is: 4015985" in note  # the note quotes turn 3's output, the latest different one
    assert result.status == "submitted" and result.answer == 4015985  # printed at turn 3: evidenced


def test_a_repeat_after_the_runs_ask_ends_the_turns_with_the_fallback() -> None:
    # recorded (RULER cwe at 32K, instance 1, on 35b3988): turn 1 counted the words right; turn 2 sent the same
    # step, was asked for another, and the run wandered (the text's head, two more counts, empty replies; asked
    # again at turns 5 and 7) to the last turn, 12 root calls and ~40,700 tokens; the fallback gave the count turn 1
    # had printed. RULER vt at 8K (31f41fc) was asked again at turns 2, 5, 6, 7 and 8 and ended the same way
    words = ["hip", "gossip", "family"]
    text = " ".join(f"{i}. {words[i % 3] if i <= 90 else 'rare' + str(i)}" for i in range(1, 100))
    count = code("from collections import Counter\nfor w, n in Counter(inputs['text'].split()[1::2]).most_common(3):"
                 "\n    print(f'{w}: {n}')")
    head = code("print(inputs['text'][:40])")

    steps = iter([count, count, head, count, count])  # the re-ask's request shows none of the model's replies

    def reply(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if "Do not write code" in last:
            return ", ".join(re.findall(r"^([\w-]+): 30$", last, re.M))
        return next(steps)

    root = ScriptedLM(reply, name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies=WITH_BREAKER, max_iterations=8).run(
        "What are the 3 most common words in the above list?", text=text)
    replies = result.trajectory.of(ModelReply)
    assert [(r.turn, r.purpose) for r in replies] == [
        (1, "turn"), (2, "turn"), (2, "turn"), (3, "turn"), (3, "turn"), (3, "fallback")]
    assert acted(result.trajectory) == [(2, "repeat_breaker", "ask_again"), (3, "repeat_breaker", "ask_again"),
                                        (3, "repeat_breaker", "end_turns"), (3, "final_answer", "end_turns")]
    assert [e.turn for e in result.trajectory.of(CodeExecuted)] == [1, 2]  # the count once, then the head
    assert result.status == "fallback" and set(result.answer.split(", ")) == set(words)
    prompt = str(root.requests[-1][-1]["content"])
    assert "hip: 30" in prompt  # the final answer is asked from the count's output
    # with one ask, a re-ask answered with the same step again ends the turns at once
    root = ScriptedLM([count, count, count, "hip, gossip, family"], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies=WITH_BREAKER, repeat_asks=1).run(
        "What are the 3 most common words in the above list?", text=text)
    assert acted_by(result.trajectory, "repeat_breaker") == [(2, "ask_again"), (2, "end_turns")]
    assert result.status == "fallback" and result.answer == "hip, gossip, family" and len(root.requests) == 4
    # repeat_asks: how many asks a run has before a repeat ends it (0: the first repeat does)
    root = ScriptedLM([count, count, "hip, gossip, family"], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies=WITH_BREAKER, repeat_asks=0).run(
        "What are the 3 most common words in the above list?", text=text)
    assert acted_by(result.trajectory, "repeat_breaker") == [(2, "end_turns")]
    assert result.status == "fallback" and result.answer == "hip, gossip, family" and len(root.requests) == 3
    # without the policy (the paper's loop) the repeated step runs again and the turns go on
    root = ScriptedLM([count, count, code("submit(['hip', 'gossip', 'family'])")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies="paper").run(
        "What are the 3 most common words in the above list?", text=text)
    assert acted(result.trajectory) == [] and [e.repeat_of for e in result.trajectory.of(CodeExecuted)] == [None, 1, None]
    assert result.status == "submitted" and result.answer == ["hip", "gossip", "family"]


def test_a_repeat_with_no_other_output_has_no_pointer() -> None:
    result, root = run([BAD, BAD, code("print(text[:10])"), code("submit('x')")], evidence_check=False)
    obs = observations(root)[1]
    assert "same code as turn 1" in obs and "most recent different output" not in obs
    assert "[error]" in obs  # shown again


EXAMPLE = code('data = inputs["text"]\nprint(type(data), len(data))\nprint(str(data)[:500])')


def test_a_step_whose_code_already_ran_is_asked_again_once_before_it_runs() -> None:
    # recorded (RULER vt, cwe and niah_multivalue at 8k): the root sent the system prompt's example step on seven
    # turns in a row; the stall note after each run changed nothing (the model copies its own last reply)
    look = "i = data.find('special magic number')\nprint(data[i - 40:i + 60])"
    root = ScriptedLM([EXAMPLE, EXAMPLE, code(look), code("submit(4015985)")], name="root", supports_seed=True)
    root.temperature = 0.0  # type: ignore[attr-defined]  # a model built with a temperature, as `rlmnb eval` does
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", policies=WITH_BREAKER)
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    runs = result.trajectory.of(CodeExecuted)
    assert [e.code.splitlines()[0] for e in runs] == ['data = inputs["text"]', look.splitlines()[0], "submit(4015985)"]
    assert "furtive-donation is: 4015985" in runs[1].stdout
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3]
    assert acted(result.trajectory) == [(2, "repeat_breaker", "ask_again")]
    reask, before = root.requests[2], root.requests[1]
    # the re-ask shows none of the model's replies, and the step's code nowhere (the system prompt's example is this
    # step): recorded (vt, cwe) it copied whatever earlier step the request showed, even a placeholder line
    assert [m["role"] for m in reask] == ["system", "user"]
    assert "print(str(data)[:500])" in str(before[0]["content"]) and "print(str(data)[:500])" in str(before[2]["content"])
    assert "print(str(data)[:500])" not in str(reask[0]["content"]) + str(reask[1]["content"])
    assert load("repeat_left_out") in str(reask[0]["content"])
    said = str(reask[1]["content"])
    assert said.startswith(str(before[1]["content"])) and str(before[3]["content"]) in said  # opening, turn 1's output
    assert [p.get("temperature") for p in root.request_params] == [None, None, 0.7, None]
    assert [p.get("seed") for p in root.request_params] == [None, None, 1, None]  # seeded: a re-run samples the same
    # the turn keeps the reply that ran; the repeat and the re-ask are in no later request
    later = "\n".join(str(m["content"]) for m in root.requests[3][1:])  # after the system prompt
    assert str(reask[-1]["content"])[len(said) - 60:] not in later and later.count("print(str(data)[:500])") == 1
    assert result.status == "submitted" and result.answer == 4015985


VT_PROSE = """To find all variables that are assigned the value 64268 in the text, we need to analyze the input and \
look for occurrences of the value "VAR KNRWU = 64268". Here's a step-by-step approach:

1. **Identify the relevant part of the input**: The question asks about the variable `VAR KNRWU`, so we need to \
focus on this part of the text.

2. **Extract the relevant part**: The relevant part is:
   ```
   VAR KNRWU = 64268 The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.
   ```

3. **Conclusion**: The variable `VAR KNRWU` is assigned the value 64268 in the text.

Therefore, the answer is:
```
VAR KNRWU
```"""


def test_the_same_long_reply_without_code_is_asked_again_once() -> None:
    # recorded (RULER vt at 32K, on b3a4e5b, temperature 0): turn 1 replied with this reasoning and no ```python
    # block; turns 2 to 8 sent it again word for word, each told it had no code; the fallback ended the run
    find = code("import re\nprint(re.findall(r'VAR (\\w+) = 64268', inputs['text']))")
    root = ScriptedLM([VT_PROSE, VT_PROSE, find, code("submit('KNRWU')")], name="root")
    root.temperature = 0.0  # type: ignore[attr-defined]
    text = "The grass is green.\n" * 50 + "VAR KNRWU = 64268\n" + "The grass is green.\n" * 50
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", policies=WITH_BREAKER).run(
        "Find all variables that are assigned the value 64268 in the text.", text=text)
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3]
    assert acted(result.trajectory) == [(2, "repeat_breaker", "ask_again")]
    reask = root.requests[2]
    assert [m["role"] for m in reask] == ["system", "user"] and "step-by-step approach" not in str(reask)
    assert [p.get("temperature") for p in root.request_params] == [None, None, 0.7, None]
    assert all("seed" not in p for p in root.request_params)  # a model that takes no seed is sent none
    assert "['KNRWU']" in result.trajectory.of(CodeExecuted)[0].stdout
    assert result.status == "submitted" and result.answer == "KNRWU"
    # short prose said twice in a row is not asked again: it costs its turns and the run goes on to the submit
    short = "The variables are `KNRWU`."
    root = ScriptedLM([find, short, short, code("submit('KNRWU')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", policies=WITH_BREAKER).run(
        "Find all variables that are assigned the value 64268 in the text.", text=text)
    assert acted_by(result.trajectory, "repeat_breaker") == []
    assert result.status == "submitted" and result.answer == "KNRWU" and len(root.requests) == 4


def test_a_re_ask_keeps_the_models_own_sampling_and_skips_steps_that_failed() -> None:
    # a model built without a temperature is not sent one (reasoning models refuse it)
    result, root = run([LOOK, SPLIT, LOOK, FIND, code("submit(4015985)")])
    assert acted(result.trajectory) == [(3, "repeat_breaker", "ask_again")]
    assert all("temperature" not in p for p in root.request_params)
    # the re-ask shows no step that already ran, the repeated one or another (recorded, vt: asked again about its
    # example step, the model sent its first step again): only their outputs
    reask = root.requests[3]
    assert [m["role"] for m in reask] == ["system", "user"]
    assert "Turn 1/20\n10867\n\nTurn 2/20\n6 chunks\n\n" in str(reask[1]["content"])
    assert "chunks = [text" not in str(reask)
    # code whose run raised (or printed a failed sub-call) may be worth running again: it runs, with the stall note
    broken = code("print(inputs['report'])")
    result, root = run([broken, broken, FIND, code("submit(4015985)")])
    assert [e.repeat_of for e in result.trajectory.of(CodeExecuted)] == [None, 1, None, None]
    assert acted_by(result.trajectory, "repeat_breaker") == [(2, "note")]  # the stall note, no ask
    # a submission the evidence check sent back is meant to be sent again: it is not asked about
    result, root = run([LOOK, code("submit(4015985)"), code("submit(4015985)")])
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["unshown_value"]
    assert acted(result.trajectory) == [(2, "unshown_value", "send_back")]
    assert result.status == "submitted" and len(root.requests) == 3


def test_a_step_that_failed_the_same_way_twice_is_asked_again_before_its_third_run() -> None:
    # recorded (RULER niah_multivalue at 8k): the root passed one string to llm_map at turn 2 (TypeError), wrapped
    # it at turn 3 (it ran), then sent turn 2's code at turns 4 and 5, the same TypeError each time
    count = ("# Define the custom instruction to count the occurrences of 'abashed-aftershave'\n"
             "instruction = \"Count how many times the word 'abashed-aftershave' appears in the text.\"\n\n"
             "# Use llm_map to map over the input and count occurrences\n{call}\n")
    unwrapped = code(count.format(call='llm_map(inputs["text"], instruction, output=str)'))
    wrapped = code(count.format(call='llm_map([inputs["text"]], instruction, output=str)'))
    root = ScriptedLM([LOOK, unwrapped, wrapped, unwrapped, unwrapped, FIND, code("submit(4015985)")], name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "2", name="sub"), sandbox="local", policies=WITH_BREAKER)
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    runs = result.trajectory.of(CodeExecuted)
    assert [e.turn for e in runs] == [1, 2, 3, 4, 5, 6]
    assert [e.error_type for e in runs] == [None, "TypeError", None, "TypeError", None, None]
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 3, 4, 5, 5, 6]
    assert asked_again(result.trajectory) == [5]
    ask = str(root.requests[5][-1]["content"])
    assert ask.endswith(render("repeat_error_ask", turn=4))  # the failed-twice ask, naming turn 4
    assert "llm_map() takes a list of items" in ask  # the error it must avoid is in view, its code is not
    assert "# Define the custom instruction" not in ask + str(root.requests[5][0]["content"])
    assert result.status == "submitted" and result.answer == 4015985
    # a failure is retried once unasked; after two alike the next send is asked about, even past another step
    other = code("print(inputs['report'])")
    result, root = run([other, other, code("print(inputs['text'][10**9])"), other, LOOK, FIND, code("submit(4015985)")])
    assert asked_again(result.trajectory) == [4]
    assert [e.error_type for e in result.trajectory.of(CodeExecuted)] == ["KeyError", "KeyError", "IndexError", None,
                                                                           None, None]
    assert result.status == "submitted"
    # a failure of another kind in between is no second identical failure
    result, root = run([other, code("print(inputs['text'][10**9])"), other, LOOK, FIND, code("submit(4015985)")])
    assert acted_by(result.trajectory, "repeat_breaker") == [(3, "note")]  # it ran again, with the stall note
    assert result.status == "submitted"
    # a submission a guard sent back is never asked about, however often it comes back the same
    unjsonable = code("submit(object())")
    result, root = run([LOOK, unjsonable, unjsonable, unjsonable, FIND, code("submit(4015985)")])
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["jsonable"] * 3
    assert asked_again(result.trajectory) == [] and result.status == "submitted"
    # the same code failing with another message each time is no stall either
    flaky = code("tries = globals().get('tries', 0) + 1\nraise ValueError(f'try {tries}')")
    result, root = run([flaky, flaky, flaky, LOOK, FIND, code("submit(4015985)")])
    assert acted_by(result.trajectory, "repeat_breaker") == [] and result.status == "submitted"

def test_the_same_line_raising_the_same_error_behind_other_code_is_named() -> None:
    # recorded (`rlmnb eval` oolong_pairs 8k): `df = pd.read_csv(pd.compat.StringIO(...))` raised the same
    # AttributeError on five steps whose code around it changed; no note said that this one line kept failing
    bad = "df = text.no_such_method()"
    first = code(f"text = inputs['text']\n{bad}\nprint(len(df))")
    second = code(f"import re\ntext = inputs['text']\n{bad}\nprint(df[:3])")
    third = code(f"text = inputs['text'].strip()\n{bad}")
    result, root = run([first, second, code("print(inputs['text'][10**9])"), third, FIND, code("submit(4015985)")])
    assert [e.error_type for e in result.trajectory.of(CodeExecuted)] == ["AttributeError"] * 2 + ["IndexError",
                                                                           "AttributeError", None, None]
    assert acted(result.trajectory) == [(2, "same_error", "note"), (4, "same_error", "note")]
    obs = observations(root)
    assert render("same_error", turn=1, line=bad) in obs[1]
    assert render("same_error", turn=2, line=bad) in obs[3]  # the latest earlier turn, past a different error
    assert result.status == "submitted"
    # the same code failing the same way is the stall rule's case, not this note's; another message is not the same
    again = code(f"text = inputs['text']\n{bad}")
    result, root = run([again, again, code(f"text = 'x'\n{bad.replace('no_such_method', 'other_missing')}"), FIND,
                        code("submit(4015985)")])
    assert acted_by(result.trajectory, "same_error") == []


def test_latest_other_skips_the_repeated_group() -> None:
    steps = [Step(1, "a", "one"), Step(2, "b", "two"), Step(3, "c", "three"), Step(4, "b", "two", repeat_of=2),
             Step(5, "d", ""), Step(6, "b", "two", repeat_of=4)]
    assert latest_other(steps, 4) == steps[2]
    assert latest_other(steps[:2], 1) == steps[1]
    assert latest_other([steps[1]], 2) is None


# ---- the evidence check -------------------------------------------------------------------------------------
# recorded (needle, 8k): turn 1 hard-coded a value guessed from nowhere, printed it, and turn 2 submitted it
GUESS = ("The special magic number for furtive-donation is 4742018.\n"
         + code('special_magic_number = "4742018"\nprint(special_magic_number)'))


def test_a_typed_value_nothing_printed_before_is_sent_back_once() -> None:
    result, root = run([GUESS, code("submit(special_magic_number)"), FIND, code("submit(4015985)")])
    rejected = result.trajectory.of(GuardRejected)
    assert [(r.turn, r.guard) for r in rejected] == [(2, "unshown_value")]
    assert acted(result.trajectory) == [(2, "unshown_value", "send_back")]
    assert rejected[0].reason in observations(root)[1]  # the model is told why
    assert result.status == "submitted" and result.answer == 4015985


def test_the_second_submission_is_accepted_whatever_it_is() -> None:
    result, _ = run([GUESS, code("submit(special_magic_number)"), code("submit('4742018')")])
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["unshown_value"]
    assert result.status == "submitted" and result.answer == "4742018"
    assert len(result.trajectory.of(Submitted)) == 1


def test_a_typed_value_an_earlier_traceback_showed_is_accepted() -> None:
    # recorded (multikey, 32k): the right value appeared only in a traceback, as '8138881.'
    lookup = code("values = {}\nkey = text.split()[-1]\nprint(values[key])")
    result, _ = run([LOOK, lookup, code("submit(8138881)")], text=haystack(20) + " 8138881.")
    assert result.trajectory.of(CodeExecuted)[1].error is not None
    assert result.trajectory.of(GuardRejected) == [] and result.answer == 8138881


def test_a_value_in_the_input_preview_or_a_sub_call_reply_is_accepted() -> None:
    short = "Notes. " + NEEDLE  # the whole text is in the preview
    result, _ = run([LOOK, code("submit('4015985')")], text=short)
    assert result.trajectory.of(GuardRejected) == [] and result.answer == "4015985"
    root = ScriptedLM([LOOK, code("r = llm_query('Find the number:\\n' + text)"), code("submit(4015985)")])
    sub = ScriptedLM(lambda m: "The number is 4015985.", name="sub")
    result = RLM(root, sub, sandbox="local").run("Which number?", text=haystack())
    assert result.trajectory.of(GuardRejected) == [] and result.answer == 4015985


def test_a_computed_value_is_never_sent_back() -> None:
    found = code("import re\nm = re.search(r'furtive-donation is: (\\d+)', text)\nsubmit(m.group(1))")
    result, _ = run([LOOK, found])
    assert result.trajectory.of(GuardRejected) == [] and result.answer == "4015985"


def test_no_check_on_the_last_turn_nor_when_turned_off() -> None:
    result, _ = run([GUESS, code("submit(special_magic_number)")], max_iterations=2)
    assert result.trajectory.of(GuardRejected) == [] and result.answer == "4742018"
    result, _ = run([GUESS, code("submit(special_magic_number)")], evidence_check=False)
    assert result.trajectory.of(GuardRejected) == [] and result.answer == "4742018"


def test_long_answers_and_structures_are_not_checked() -> None:
    prose = "The text says that the special magic number for furtive-donation is not given anywhere at all."
    result, _ = run([LOOK, code(f"submit({prose!r})")])
    assert result.trajectory.of(GuardRejected) == [] and result.answer == prose
    result, _ = run([LOOK, code("submit({'number': 4742018})")])
    assert result.trajectory.of(GuardRejected) == []
    assert [short_answer(v) for v in (True, None, 3, 2.5, float("nan"), "a b", "x" * 61, "a\nb", [1])] == \
        [False, False, True, True, False, True, False, False, False]


def test_found_in_reads_numbers_and_words_as_a_reader_would() -> None:
    assert found_in(4015985, ["total: 4,015,985 items"]) and found_in("4,015,985", ["4015985"])
    assert found_in(0.33, ["ratio 0.3333333"]) and found_in("12.5%", ["share: 0.125"])
    assert not found_in(4015985, ["40159851"]) and not found_in(4015985, ["4015984.9"])
    assert found_in("Dana Ito", ["owner:  DANA   ito."]) and not found_in("Dana Ito", ["Dana Itoh"])
    assert found_in(8138881, ["KeyError: '8138881.'"]) and not found_in("yes", ["yesterday"])


def test_typed_at_follows_literals_variables_and_final_var() -> None:
    codes = [(1, 'guess = "4742018"\nprint(guess)'), (2, "x = 5"), (3, "submit(guess)")]
    assert typed_at("4742018", codes) == 1
    assert typed_at("4742018", [(1, 'guess = "4742018"'), (2, "guess = found[0]"), (3, "submit(guess)")]) == 1
    assert typed_at("7", [(1, "guess = '7'"), (2, "guess = found[0]"), (3, "submit(guess)")]) is None
    assert typed_at(42, [(1, "answer = 42"), (2, "FINAL_VAR('answer')")]) == 1
    assert typed_at("ok", [(1, "print(1)"), (2, "FINAL('ok')")]) == 2
    assert typed_at(3, [(1, "print(x[:3])"), (2, "submit(len(x))")]) is None  # a small number by chance
    numbers = [(1, "needles = {'a': 4742018, 'b': 1234567}"), (2, "submit(needles['a'])")]
    assert typed_at(4742018, numbers) == 1  # a distinctive number written anywhere in the code


# ---- the fallback ------------------------------------------------------------------------------------------
def test_the_fallback_answers_from_the_real_outputs() -> None:
    # recorded (needle, 8k): the number was printed at turn 3; the fallback said "the text does not mention a
    # special magic number". The scripted model answers from the outputs it is given, if they hold the number.
    def reply(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if "Do not write code" in last:
            found = re.findall(r"\b\d{7}\b", last)
            return found[-1] if found else "The text does not mention a special magic number."
        return [LOOK, SPLIT, FIND, SPLIT][sum(1 for m in messages if m["role"] == "assistant")]

    root = ScriptedLM(reply, name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies=WITH_BREAKER, max_iterations=5).run("Which number?",
                                                                                           text=haystack())
    assert result.status == "fallback" and result.answer == "4015985"
    prompt = root.requests[-1][-1]["content"]
    assert "Here is what your code really printed" in prompt
    assert prompt.count("Turn 2 printed:") == 1 and "Turn 4 printed" not in prompt  # a repeat is not run
    assert "Turn 3 printed:\n" in prompt and "furtive-donation is: 4015985" in prompt
    assert result.trajectory.of(Fallback)[0].answer == "4015985"


def fallback_copies_a_shown_4(replies: list[str]) -> Callable[[list[dict[str, Any]]], str]:
    """A root that sends `replies` by turn (the last one again after them) and whose fallback answers "4" when the
    request shows " is 4." anywhere, else the last seven-digit number shown (as the recorded model did)."""
    def reply(messages: list[dict[str, Any]]) -> str:
        if "Do not write code" in str(messages[-1]["content"]):
            said = "\n".join(str(m["content"]) for m in messages)
            return "4" if " is 4." in said else re.findall(r"\b\d{7}\b", said)[-1]
        return replies[min(len(replies) - 1, sum(1 for m in messages if m["role"] == "assistant"))]

    return reply


def test_the_fallback_is_shown_the_models_code_not_its_prose() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, resumed on 604880f with repeat_asks=1): turn 1 said the number
    # "is 4" (the preview's "at least 4 of these 5 mistakes"), turn 4's code printed the needle's number; the
    # fallback, shown its own turn-1 sentence, answered "... is 4."
    guess = "The special magic number for furtive-donation mentioned in the provided text is 4."
    look = code("text = inputs['text']\nprint(text[:60])")

    root = ScriptedLM(fallback_copies_a_shown_4([guess, look, FIND, look]), name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", policies=WITH_BREAKER, repeat_asks=0).run(
        "What is the special magic number for furtive-donation?", text=haystack())
    assert result.status == "fallback" and result.answer == "4015985"
    request = root.requests[-1]
    assert guess not in str(request) and [m["role"] for m in request].count("assistant") == 2
    assert request[-5]["content"] == look and "i = text.find" in str(request[-3]["content"])


def test_a_statement_counts_as_found_only_after_the_output_that_holds_it() -> None:
    head = Step(2, "print(text[:500])", "April 2012 ... at least 4 of these 5 mistakes")
    needle = Step(4, "print(re.findall(...))", "7067228")
    q = "What is the special magic number for tangy-midnight mentioned in the provided text?"
    guess = "The special magic number for tangy-midnight mentioned in the provided text is 4."
    assert not found_before(guess, 1, [head, needle], question=q)  # said before the output that holds the 4
    assert found_before(guess, 3, [head, needle], question=q)
    assert found_before("It is 7067228.", 5, [head, needle], question=q)
    assert not found_before("It is 7067228.", 4, [head, needle], question=q)


def test_the_fallback_is_shown_a_short_output_whole() -> None:
    # recorded (RULER cwe at 32K, instance 1, on 8a944dc): turn 1's count printed a header and the ten words
    # (190 characters); the fallback was shown its last six lines and answered those six words (0.6)
    words = ["hip", "step-mother", "disagreement", "gossip", "family", "jumbled", "columnist", "courthouse",
             "blackberry", "coconut"]
    text = " ".join(f"{i}. {words[i % 10] if i <= 300 else 'rare' + str(i)}" for i in range(1, 320))
    count = code("from collections import Counter\nwords = inputs['text'].split()[1::2]\n"
                 "print('The top 10 words that appear most often are:')\n"
                 "for word, n in Counter(words).most_common(10):\n    print(f'{word}: {n}')")
    wander = [code(f"print(open('/path/to/context{i}').read())") for i in range(4)]

    def reply(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if "used all" in last:
            return ", ".join(re.findall(r"^([\w-]+): 30$", last, re.M))
        return [count, *wander][sum(1 for m in messages if m["role"] == "assistant")]

    root = ScriptedLM(reply, name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=5).run(
        "What are the 10 most common words in the above list?", text=text)
    assert "The top 10 words" in result.trajectory.of(CodeExecuted)[0].stdout
    assert result.status == "fallback" and sorted(result.answer.split(", ")) == sorted(words)
    assert "Turn 1 printed:\nThe top 10 words that appear most often are:\n" in root.requests[-1][-1]["content"]


def test_output_tails_are_bounded_newest_first() -> None:
    steps = [Step(t, "c", "\n".join(f"line {t}.{i} " + "x" * 100 for i in range(20))) for t in range(1, 31)]
    tails = output_tails(steps, per_step=400, total=2000)
    assert 1 <= len(tails) <= 6 and tails[-1].startswith("Turn 30 printed:")
    assert all(len(t) <= 400 + len("Turn 30 printed:\n") for t in tails)
    assert sum(len(t) for t in tails) <= 2000 + 2 * len(tails)
    assert output_tails([Step(1, "c", ""), Step(2, "c", "  \n")]) == []
    # whole last lines that fit, or the end of one line longer than a block
    assert output_tails([Step(1, "c", "a\n\nbb\nccc\n")], per_step=6) == ["Turn 1 printed:\nbb\nccc"]
    assert output_tails([Step(1, "c", "a\n" + "x" * 500)], per_step=10) == ["Turn 1 printed:\n..." + "x" * 7]


def test_a_fallback_without_any_output_keeps_the_plain_request() -> None:
    result, root = run(["I think it is 4742018.", "Still thinking.", "4742018"], max_iterations=2)
    prompt = root.requests[-1][-1]["content"]
    assert result.status == "fallback" and "Here is what your code" not in prompt
    assert prompt.startswith("You have used all 2 steps. Do not write code.\n\nBased on everything above")


# ---- a prose guess --------------------------------------------------------------------------------------------
def test_a_prose_guess_gets_a_directive_and_its_value_is_checked() -> None:
    # recorded: turn 1 a prose guess from the preview, no code; turn 2 submitted the guessed number
    guess = "Based on the preview, the special magic number for furtive-donation is 4742018."
    result, root = run([guess, code("submit(4742018)"), FIND, code("submit(4015985)")])
    assert load("no_code") in observations(root)[0]  # told that nothing ran, not taken as an answer
    assert [(r.turn, r.guard) for r in result.trajectory.of(GuardRejected)] == [(2, "unshown_value")]
    assert result.answer == 4015985
    assert [e.purpose for e in result.trajectory.of(ModelReply)] == ["turn"] * 4


# ---- a bare answer in prose ------------------------------------------------------------------------------------
def test_a_bare_value_an_output_showed_ends_the_run_as_a_submission() -> None:
    # recorded (bench/realmodel.py, needle): after seeing the value the model replied with the number alone, three
    # turns running, and each got the no-code note until the fallback
    for reply, value in [("4015985", "4015985"), ("`4015985`.", "4015985"), ('"4015985"', "4015985")]:
        result, root = run([LOOK, FIND, reply, code("submit('never')")])
        assert result.status == "submitted" and result.answer == value, reply
        assert len(root.requests) == 3 and result.trajectory.of(Submitted)[0].turn == 3
        assert acted(result.trajectory) == [(3, "prose_answer", "answer")]
    # without the policy the bare value is a reply without code, and the run goes on to the root's submit()
    result, root = run([LOOK, FIND, "4015985", code("submit(4015985)")], policies="paper")
    assert result.trajectory.of(Submitted)[0].turn == 4 and acted(result.trajectory) == []


def test_a_bare_value_nothing_showed_or_only_the_preview_showed_is_a_guess() -> None:
    from rlmnb._engine.evidence import prose_answer
    from rlmnb.events import Trajectory

    result, root = run([LOOK, "4742018", code("submit(4015985)")], evidence_check=False)
    assert result.answer == 4015985 and load("no_code") in observations(root)[1]
    assert acted_by(result.trajectory, "prose_answer") == []
    # the preview shows the needle at its head: a bare value read there is not found by the run
    result, root = run([LOOK, "4015985", FIND, code("submit(4015985)")], text=NEEDLE + " " + haystack())
    assert result.trajectory.of(Submitted)[0].turn == 4 and acted_by(result.trajectory, "prose_answer") == []
    empty = Trajectory()
    assert prose_answer("4015985", trajectory=empty, run_id="r", seen=["it is: 4015985"]) == "4015985"
    for reply in ["The special magic number is 4015985.", "4015985\n4015985", "FINAL", "", "seven words in a row to say it"]:
        assert prose_answer(reply, trajectory=empty, run_id="r", seen=["it is: 4015985 FINAL"]) is None, reply
    # recorded (RULER niah_multivalue 8k): a line the root's own code printed, sent back as prose, is no answer
    printed = ["abashed-aftershav\nThe phrase 'abashed-aftershav' appears 0 times.\n"]
    assert prose_answer("The phrase 'abashed-aftershav' appears 0 times.", trajectory=empty, run_id="r",
                        seen=printed) is None
    assert prose_answer("William the Conqueror.", trajectory=empty, run_id="r",
                        seen=["the answer: William the Conqueror"]) == "William the Conqueror"


def test_no_bare_answer_on_the_first_turn_before_any_output() -> None:
    result, root = run(["4015985", FIND, code("submit(4015985)")], text=NEEDLE + " " + haystack())
    assert result.trajectory.of(Submitted)[0].turn == 3


def test_a_trim_drops_repeated_steps_before_older_findings() -> None:
    from rlmnb._engine.conversation import Conversation, TurnRecord

    conversation = Conversation("rules", ["question"])
    for turn, repeat in [(1, False), (2, False), (3, True), (4, True), (5, False), (6, False)]:
        conversation.add_turn(TurnRecord(turn, f"reply {turn}", "x " * 200, repeat=repeat))
    per_turn = conversation.turns[0].tokens
    dropped = conversation.trim(conversation.tokens() - per_turn)
    assert dropped == [3]  # the oldest repeated step, not turn 1
    assert conversation.trim(conversation.tokens() - 2 * per_turn) == [1, 4]


# ---- empty answers, and replies that copy the request -------------------------------------------------------
def test_says_nothing_reads_empty_answers_only() -> None:
    from rlmnb._engine.evidence import says_nothing

    for empty in (None, "", "  ", "None", "null", "Not found.", [], {}, (), set()):
        assert says_nothing(empty), empty
    for something in (0, False, "0", "no", "Nothing here is 42", ["x"], {"a": 1}, 0.0):
        assert not says_nothing(something), something


def _copy_of_the_request(messages: list[dict[str, Any]]) -> str:
    # recorded (RULER vt 8k): asked again after a repeated step, the model sent the request's "Turn 1/8 ..." text
    # back, then copied each next turn's note, adding "If you have any other questions ..." until the run ended
    return str(messages[-1]["content"]) + "\n\nIf you have any other questions or need further assistance, feel free to ask!"


def _copy_of_the_system_prompt(messages: list[dict[str, Any]]) -> str:
    # recorded (`rlmnb eval` oolong_pairs 8k, turns 7 and 8): the system prompt's paragraph on the operators word
    # for word, one line of its own, no code; each got the no-code note and cost a turn
    system = str(messages[0]["content"])
    start = system.index("To read every row or item of a collection")
    return system[start:system.index("\n\n", start)] + "\n\nThis will help you extract relevant information."


@pytest.mark.parametrize(("copy", "starts"), [(_copy_of_the_request, "Turn 1/20"),
                                              (_copy_of_the_system_prompt, "To read every row or item")])
def test_a_reply_that_only_copies_what_it_was_given_is_asked_again_as_an_empty_one(
        copy: Callable[[list[dict[str, Any]]], str], starts: str) -> None:
    def root_reply(messages: list[dict[str, Any]]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        last = str(messages[-1]["content"])
        if turn == 0:
            return LOOK
        if last == load("echo_retry"):
            return FIND
        if "furtive-donation is: 4015985" in last:
            return code("submit(4015985)")
        return copy(messages)

    root = ScriptedLM(root_reply, name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", policies=["empty_reply"])
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3]
    assert replies[1].notes == ["empty", "echo"] and replies[1].text.startswith(starts)
    assert acted(result.trajectory) == [(2, "empty_reply", "ask_again")]
    assert str(root.requests[2][-1]["content"]) == load("echo_retry")  # asked as a copy, not as an empty reply
    later = "\n".join(str(m["content"]) for m in root.requests[3] if m["role"] == "assistant")
    assert "any other questions" not in later and "help you extract" not in later  # the copy stays out
    assert result.status == "submitted" and result.answer == 4015985


@pytest.mark.parametrize("copied", ["whole", "without FINAL"])
def test_only_a_turn_reply_is_read_for_copying_the_request(copied: str) -> None:
    # the fallback answers with its text as it is; a reply that restates the fallback request is not a turn to
    # ask again, and its event carries no "empty"/"echo" notes for the views; the request's own "FINAL(...)",
    # copied back, is not the literal answer `...`
    def root_reply(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if not last.startswith("You have used all"):
            return LOOK
        return last if copied == "whole" else "\n".join(line for line in last.splitlines() if "FINAL(" not in line)

    root = ScriptedLM(root_reply, name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", max_iterations=1)
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    fallback = [r for r in result.trajectory.of(ModelReply) if r.purpose == "fallback"]
    assert len(fallback) == 1 and fallback[0].notes == [], fallback[0].notes
    assert "Turn 1 printed:" in fallback[0].text  # it copied the outputs the fallback request showed
    assert result.status == "fallback" and result.answer == fallback[0].text.strip()


def test_echoes_needs_most_lines_copied() -> None:
    from rlmnb._engine.replies import echoes

    request = "Turn 3/8\nYour reply had no ```python block, so nothing ran.\nWrite the next step."
    assert echoes("Turn 3/8\nYour reply had no ```python block, so nothing ran.\n\nAnything else?", request)
    assert not echoes("Turn 3/8\nI will split the text into parts.\nThen count.", request)
    assert not echoes("Write the next step.", request)  # one line: too little to tell
    # what the run's code printed is quoted, not copied: a reply stating a step's output is no echo
    printed = "The top 2 words are:\nhip: 30\nfamily: 30"
    asked = f"Turn 1/8\n{printed}\n\nDo not send the code of turn 1 again."
    assert echoes(printed, asked) and not echoes(printed, asked, outputs=[printed])
    assert echoes("Turn 1/8\n" + printed + "\nTurn 1/8", asked, outputs=[printed])  # the harness's lines still are


def test_a_reply_stating_its_counts_output_is_a_statement_not_an_echo() -> None:
    # recorded (RULER cwe at 32K, instance 1, on 8a944dc): turn 1's count printed the ten words right; asked again
    # after sending that step once more, the root replied with the count's output word for word, and was told it
    # had only copied its request (an echo, counted as empty); the run ended in the fallback
    words = ["hip", "family"]
    text = " ".join(f"{i}. {words[i % 2] if i <= 60 else 'rare' + str(i)}" for i in range(1, 80))
    count = code("from collections import Counter\nprint('The top 2 words are:')\n"
                 "for word, n in Counter(inputs['text'].split()[1::2]).most_common(2):\n    print(f'{word}: {n}')")
    said = "The top 2 words are:\nfamily: 30\nhip: 30"
    root = ScriptedLM([count, count, said, code("submit(['family', 'hip'])")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", policies=WITH_BREAKER).run(
        "What are the 2 most common words in the above list?", text=text)
    assert result.trajectory.of(CodeExecuted)[0].stdout.strip() == said
    replies = result.trajectory.of(ModelReply)
    assert "echo" not in replies[2].notes and replies[2].text == said
    # no empty_reply ask for the statement: it states the counts the output showed, so it is the answer
    assert acted(result.trajectory) == [(2, "repeat_breaker", "ask_again"), (2, "prose_answer", "answer")]
    assert result.status == "submitted" and result.answer == " ".join(said.split()) and len(root.requests) == 3


def test_a_readings_answer_is_held_by_a_text_when_it_holds_what_the_answer_adds_to_the_question() -> None:
    question = "What is the special magic number for mindless-kilometer mentioned in the provided text?"
    text = ("paintings of the time.\nOne of the special magic numbers for mindless-kilometer is: 4194548. But these\n"
            "In 2002 the pay of S&P 500 CEOs was $3.65 million, or 4,015,985 dollars a year.\n")
    # numbers: every one the question does not give must be in the text (commas allowed)
    assert held_by("4194548", text, question=question) is True
    assert held_by("The special magic number for mindless-kilometer is 4194548.", text, question=question) is True
    assert held_by("4015985", text, question=question) is True
    assert held_by("The special magic number for mindless-kilometer is 1234567.", text, question=question) is False
    assert held_by("4194548 and 1234567", text, question=question) is False
    # words: at least half of the answer's own words of four or more letters
    assert held_by("paintings", text, question=question) is True
    assert held_by("Normandy, France", text, question=question) is False
    assert held_by("the special magic number", text, question=question) is None  # nothing beyond the question
    # the excerpt: the line around the first place the text holds it, whitespace folded, "..." where cut
    assert holding_excerpt("4194548", text, question=question) == (
        "One of the special magic numbers for mindless-kilometer is: 4194548. But these")
    assert holding_excerpt("$3.65", text, question=question, width=30) == "...500 CEOs was $3.65 million, or..."
    assert holding_excerpt("1234567", text, question=question) == ""


def test_an_answer_copying_the_questions_worked_example_is_not_held_by_a_text_without_its_words() -> None:
    # recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B): every part of a numbered word list answered with the answer of
    # the worked example inside the question; none of the parts holds those words
    question = ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
                "ones that appear most often.\n1. dreamer 2. server 3. dreamer 4. router 5. ketchup 6. fertilizer 7. "
                "adult 8. fresh\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 "
                "words that appear most often in the list are:1. ketchup 2. fresh 3. dreamer 4. adult 5. server\n"
                "Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
                "ones that appear most often.\n[the text is in the input `context`]\nQuestion: What are the 10 most "
                "common words in the above list?")
    part = ("1. balloon 2. hypothermia 3. sweat 4. hierarchy 5. mosquito 6. atmosphere 7. federation 8. mop 9. mailman "
            "10. enchanting 11. weapon 12. story-telling 13. federation 14. census 15. treatment 16. census\n")
    assert held_by("ketchup, fresh, dreamer, adult, server", part, question=question) is False
    # the question's words that the text holds too, or too few of them to tell, stay unchecked
    assert held_by("federation, census, treatment, dreamer", part, question=question) is True  # words it adds
    assert held_by("most common words", part + "the most common words", question=question) is None
    assert held_by("dreamer", part, question=question) is None  # one word: a choice the question offers
    assert held_by("fresh dreamer", part, question=question) is None


def test_the_names_a_question_asks_about_and_where_the_input_mentions_them() -> None:
    assert question_names("Some numbers are hidden in the text. What is the special magic number for "
                          "broken-conclusion mentioned in the text?") == ["broken-conclusion"]
    assert question_names("When were the Normans in Normandy? Ask ACME about order 10425 or user_id.") == [
        "Normans", "Normandy", "ACME", "10425", "user_id"]
    # short numbers are counts and list numbers, not names (recorded: RULER cwe's example list numbers 1 to 190)
    assert question_names("What are the 10 most common words? 100. apple 101. pear") == []
    key = "One of the special magic numbers for broken-conclusion is: 5679639."
    text = "\n".join(["Essays about work and play.", key, "Normandy " * 6, "A second broken-conclusion here."])
    mentions = question_mentions("What is the number for broken-conclusion, near Normandy?", text)
    # a name mentioned one to five times is quoted at each place; one mentioned more often is not where to look
    assert mentions == [("broken-conclusion", key), ("broken-conclusion", "A second broken-conclusion here.")]
    assert question_mentions("What is the number for quiet-lake?", text) == []


def test_a_sub_call_prompt_asks_only_the_question_when_it_adds_nothing_to_read() -> None:
    q = "What is the special magic number for tangy-midnight mentioned in the provided text?"
    recorded = "What is the special magic number for tangy-midnight mentioned in the provided text?"
    assert asks_only_the_question(recorded, len(recorded), q)
    assert asks_only_the_question("Re-read the text: what is the special magic number for tangy-midnight?", 70, q)
    # anything to read: a number or a word the question lacks, a prompt cut in the event, or a long prompt
    assert not asks_only_the_question(q + " The number 4015985 is in: the grass is green.", 200, q)
    assert not asks_only_the_question("Is this ticket about billing? 'refund please'", 45, "Which areas get billing complaints?")
    assert not asks_only_the_question(q, len(q) + 5000, q)
    assert not asks_only_the_question(q, len(q), "")
    assert not asks_only_the_question("hi", 2, "q") and not asks_only_the_question("hi", 2, "Say hi")  # not the question


def test_a_guess_said_again_after_an_output_that_happens_to_hold_it_stays_a_guess_for_the_fallback() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, on a562385): "... is 4." at turns 1, 4, 7 and 8 (the preview's
    # "at least 4 of these 5 mistakes"); turn 2 printed the text's head, which holds that 4, so the later ones
    # counted as findings and the fallback, shown them, answered "... is 4." though turn 6 printed the needle
    guess = "The special magic number for furtive-donation mentioned in the provided text is 4."
    head = code("text = inputs['text']\nprint(text[:60])")
    text = "April 2012. I could see myself making at least 4 of these 5 mistakes. " + haystack()

    root = ScriptedLM(fallback_copies_a_shown_4([guess, head, guess, FIND]), name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", repeat_asks=0).run(
        "What is the special magic number for furtive-donation?", text=text)
    assert "at least 4" in result.trajectory.of(CodeExecuted)[0].stdout
    assert result.status == "fallback" and result.answer == "4015985"
    assert guess not in str(root.requests[-1])




def test_a_boxed_list_whose_items_separate_outputs_showed_is_the_answer() -> None:
    # places of a text read alone give one item each; a reply boxing all of them has answered (any model)
    text = "filler " * 50 + "code one is 7975534. " + "filler " * 50 + "code two is 8816912. " + "filler " * 50
    result, _ = run([code("import re\nprint(re.findall(r'one is (\\d+)', inputs['text']))"),
                     code("print(re.findall(r'two is (\\d+)', inputs['text']))"),
                     "The codes are \\boxed{7975534, 8816912}"], text=text)
    assert result.status == "submitted" and result.answer == "7975534, 8816912"
    assert [(a.policy, a.action) for a in result.trajectory.of(PolicyActed)] == [("prose_answer", "answer")]
    result, _ = run([code("import re\nprint(re.findall(r'one is (\\d+)', inputs['text']))"),
                     "The codes are \\boxed{7975534, 1234567}", code("submit('7975534')")], text=text)
    assert result.answer == "7975534"  # one item nothing showed: not an answer in prose


def test_a_statement_of_shown_values_is_the_answer_and_a_plan_or_a_guess_is_not() -> None:
    # prose restating a printed value is an ordinary answer; a plan that cites one is not, nor a number nothing showed
    text = "filler " * 40 + "The code for the vault is 3119600. " + "filler " * 40
    shown = code("import re\nprint(re.findall(r'vault is (\\d+)', inputs['text']))")
    result, _ = run([shown, "The code for the vault mentioned in the text is 3119600."], text=text)
    assert result.status == "submitted" and "3119600" in result.answer
    assert [(a.policy, a.action) for a in result.trajectory.of(PolicyActed)] == [("prose_answer", "answer")]
    result, _ = run([shown, "It prints 3119600; I will check the rest of the text next.", code("submit('3119600')")],
                    text=text)
    assert result.answer == "3119600" and not result.trajectory.of(PolicyActed)
    result, _ = run([shown, "The code is 4242.", code("x = re.findall(r'vault is (\\d+)', inputs['text'])[0]\n"
                                                        "submit(x)")], text=text)
    assert result.answer == "3119600" and not result.trajectory.of(PolicyActed)
