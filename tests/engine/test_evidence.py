"""The harness defences issue 22's small-model trajectories call for, with replies shaped like the recorded ones
(Qwen2.5-Coder 1.5B on llama.cpp, RULER needle and multikey tasks): the stall breaker on repeated steps, the
evidence check on submit(), the fallback answered from real outputs, and the directive after a prose guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb._engine.evidence import (
    Step,
    answer_strings,
    asks_only_the_question,
    found_before,
    found_in,
    held_by,
    holding_excerpt,
    latest_other,
    listed_items,
    output_tails,
    prints_positions,
    question_mentions,
    question_names,
    same_words,
    short_answer,
    states_shown_value,
    typed_at,
    typed_data,
)
from rlmnb.events import CodeExecuted, Fallback, GuardRejected, ModelReply, Submitted
from rlmnb.testing import ScriptedLM

NEEDLE = "One of the special magic numbers for furtive-donation is: 4015985."
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


def haystack(repeats: int = 120) -> str:
    half = FILLER * (repeats // 2)
    return half + NEEDLE + " " + half


def run(replies: list[Any], *, text: str | None = None, **kw: Any) -> tuple[Any, ScriptedLM]:
    root = ScriptedLM(replies, name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local", **kw)
    return rlm.run("What is the special magic number for furtive-donation?", text=text or haystack()), root


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
    obs = observations(root)[4]
    assert "IndexError" in obs.splitlines()[1] or "IndexError" in obs  # the output is shown again
    assert "same code as turn 4 and printed the same output again, so it changed nothing" in obs
    pointer = obs[obs.index("most recent different output"):]
    assert pointer.startswith("most recent different output (turn 3) ended with:")
    assert "for furtive-donation is: 4015985" in pointer and "call `submit(value)`" in pointer
    assert "different approach" in pointer
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
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=8).run(
        "What are the 3 most common words in the above list?", text=text)
    replies = result.trajectory.of(ModelReply)
    assert [(r.turn, r.purpose, r.notes) for r in replies] == [
        (1, "turn", []), (2, "turn", ["repeat_reasked"]), (2, "turn", []), (3, "turn", ["repeat_reasked"]),
        (3, "turn", ["repeat_ended"]), (3, "fallback", [])]
    assert [e.turn for e in result.trajectory.of(CodeExecuted)] == [1, 2]  # the count once, then the head
    assert result.status == "fallback" and set(result.answer.split(", ")) == set(words)
    assert result.reason == ("no submit(): the reply at turn 3 repeated turn 1's after the model was asked for "
                             "another step 2 times")
    prompt = str(root.requests[-1][-1]["content"])
    assert prompt.startswith("Your reply repeated turn 1's again after you were asked for a different step, so the "
                             "steps end here. Do not write code.")
    assert "hip: 30" in prompt and "count" not in prompt.split("Do not write code")[0]
    # with one ask, a re-ask answered with the same step again ends the turns at once
    root = ScriptedLM([count, count, count, "hip, gossip, family"], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", repeat_asks=1).run(
        "What are the 3 most common words in the above list?", text=text)
    assert [r.notes for r in result.trajectory.of(ModelReply)][:3] == [[], ["repeat_reasked"], ["repeat_ended"]]
    assert result.status == "fallback" and result.answer == "hip, gossip, family" and len(root.requests) == 4
    assert result.reason.endswith("after the model was asked for another step once")
    # repeat_asks: how many asks a run has before a repeat ends it (0: the first repeat does)
    root = ScriptedLM([count, count, "hip, gossip, family"], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", repeat_asks=0).run(
        "What are the 3 most common words in the above list?", text=text)
    assert result.reason == "no submit(): the reply at turn 2 repeated turn 1's (repeat_asks=0)"
    assert [r.notes for r in result.trajectory.of(ModelReply)][:2] == [[], ["repeat_ended"]]


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
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local")
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    runs = result.trajectory.of(CodeExecuted)
    assert [e.code.splitlines()[0] for e in runs] == ['data = inputs["text"]', look.splitlines()[0], "submit(4015985)"]
    assert "furtive-donation is: 4015985" in runs[1].stdout
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3] and replies[1].notes == ["repeat_reasked"]
    reask, before = root.requests[2], root.requests[1]
    # the re-ask shows none of the model's replies, and the step's code nowhere (the system prompt's example is this
    # step): recorded (vt, cwe) it copied whatever earlier step the request showed, even a placeholder line
    assert [m["role"] for m in reask] == ["system", "user"]
    assert "print(str(data)[:500])" in str(before[0]["content"]) and "print(str(data)[:500])" in str(before[2]["content"])
    assert "print(str(data)[:500])" not in str(reask[0]["content"]) + str(reask[1]["content"])
    assert "(left out: this step was run already)" in str(reask[0]["content"])
    said = str(reask[1]["content"])
    assert said.startswith(str(before[1]["content"])) and str(before[3]["content"]) in said  # opening, turn 1's output
    assert said.endswith("on the part of the data that holds the answer.")
    assert [p.get("temperature") for p in root.request_params] == [None, None, 0.7, None]
    assert [p.get("seed") for p in root.request_params] == [None, None, 1, None]  # seeded: a re-run samples the same
    # the turn keeps the reply that ran; the repeat and the re-ask are in no later request
    later = "\n".join(str(m["content"]) for m in root.requests[3][1:])  # after the system prompt
    assert "Do not send the code" not in later and later.count("print(str(data)[:500])") == 1
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
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "Find all variables that are assigned the value 64268 in the text.", text=text)
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3] and replies[1].notes == ["repeat_reasked"]
    reask = root.requests[2]
    assert [m["role"] for m in reask] == ["system", "user"] and "VAR KNRWU" not in str(reask[0]["content"])
    assert str(reask[1]["content"]).endswith("Do not send turn 1's reply again: it ran no code, and the same words "
                                             "run nothing again. Write one step as a ```python block that works on "
                                             "`inputs[...]`. If a value shown so far answers the question, call "
                                             "`submit(value)` with it.")
    assert [p.get("temperature") for p in root.request_params] == [None, None, 0.7, None]
    assert all("seed" not in p for p in root.request_params)  # a model that takes no seed is sent none
    assert "['KNRWU']" in result.trajectory.of(CodeExecuted)[0].stdout
    assert result.status == "submitted" and result.answer == "KNRWU"
    # short prose said twice in a row is still the model's answer, not asked again (`_stated_again`)
    short = "The variables are `KNRWU`."
    root = ScriptedLM([find, short, short], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "Find all variables that are assigned the value 64268 in the text.", text=text)
    assert not any("repeat_reasked" in r.notes for r in result.trajectory.of(ModelReply))
    assert result.status == "submitted" and len(root.requests) == 3


def test_the_same_statement_of_shown_values_said_again_after_a_code_step_is_the_answer() -> None:
    # recorded (RULER cwe at 8K, instance 0, on 9beaedc): turn 2 counted the words with code and printed ten of
    # them; turn 3 stated those ten in prose; turn 4 ran a check; turn 5 stated the same ten again; turn 6 submitted
    # a list of its own making (the text's list numbers, "1.", "2.", ...)
    count = code("from collections import Counter\nfor w, n in Counter(inputs['text'].split()[1::2]).most_common(2):\n"
                 "    print(f'{w}: {n}')")
    said = "The top 2 words that appear most often in the list are:\n- census: 20\n- wind: 19"
    check = code("print(inputs['text'][:30])\nif 'ham' in inputs['text']:\n    submit('ham')\n"
                 "print('No top words found in the input')")
    root = ScriptedLM([count, said, check, said, code("submit(['1.', '2.'])")], name="root")
    text = " ".join(f"{i}. {'census' if i % 2 else 'wind'}" for i in range(1, 40))
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "What are the 2 most common words in the above list?", text=text)
    assert result.status == "submitted" and result.answer == said and len(root.requests) == 4
    assert result.reason == "stated the same answer in prose twice, with values real output showed"
    # the counts are numbers a question with a numbered worked example gives too; the listed words are the values
    example = " ".join(f"{i}. {'dreamer' if i % 3 else 'server'}" for i in range(1, 41))
    asked = f"{example}\nQuestion: What are the 2 most common words in the above list?"
    root = ScriptedLM([count, said, check, said, code("submit(['1.', '2.'])")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(asked, text=text)
    assert result.status == "submitted" and result.answer == said and len(root.requests) == 4
    # the same with the words in one comma-separated line (recorded, RULER cwe at 8K instance 0, on 1704f9e: turns 2
    # and 4 said "... are: sermon, lapdog, underground, ..." after turn 1's count printed the ten)
    inline = "The top 2 words that appear most often in the list are: census, wind."
    root = ScriptedLM([count, inline, check, inline, code("submit(['1.', '2.'])")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "What are the 2 most common words in the above list?", text=text)
    assert result.status == "submitted" and result.answer == inline and len(root.requests) == 4
    # another statement between the two is no repeat: the later one is the model's latest, said once
    other = "The most common word is `wind`: 19."
    root = ScriptedLM([count, said, other, said, code("submit('census')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "What are the 2 most common words in the above list?", text=text)
    assert result.answer == "census" and len(root.requests) == 5


def test_a_refusal_said_twice_is_no_answer_because_of_a_number_the_question_gives() -> None:
    # recorded (RULER cwe at 32K, on 2aa15ec): after its count printed ten words, the root said this twice in a row;
    # the question's "10" counted as a value the outputs ("10. enchanting") showed, so it ended the run as the answer
    refusal = ("I'm sorry, but the text provided does not contain any words to count or rank. The question asks for "
               "the 10 most common words in a list, but there are no words listed in the input. Therefore, I cannot "
               "generate an answer based on the given information.")
    look = code("print(inputs['text'][:90])")
    count = code("from collections import Counter\nprint(Counter(inputs['text'].split()[1::2]).most_common(2))")
    root = ScriptedLM([look, refusal, refusal, count, code("submit(['census', 'wind'])")], name="root")
    text = " ".join(f"{i}. {'census' if i % 2 else 'wind'}" for i in range(1, 40))
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "What are the 10 most common words in the above list?", text=text)
    assert "10. wind" in result.trajectory.of(CodeExecuted)[0].stdout  # the outputs show "10"
    assert result.status == "submitted" and result.answer == ["census", "wind"] and len(root.requests) == 5
    # a value the question does not give still counts (`_stated_again`, as before)
    trajectory = result.trajectory
    assert states_shown_value("The words are `census` and `wind`.", trajectory=trajectory,
                              run_id=result.run_id, question="What are the 10 most common words?")
    assert not states_shown_value(refusal, trajectory=trajectory, run_id=result.run_id,
                                  question="What are the 10 most common words?")

def test_a_position_a_step_printed_is_no_value_the_input_holds() -> None:
    # recorded (RULER niah_multivalue at 8K, on 31f41fc): the root's step printed where the key starts ("939"),
    # then it said "The special magic number for deranged-asparagus ... is 939." twice, which ended the run as the
    # answer; a position is not shown as a value (the stated-twice rule, the evidence check) and the step is told so
    body = 'import re\n\ntext = inputs["text"]\nmagic_number = re.search(r"furtive-donation", text).start()\n'
    where = code(body + "print(magic_number)")
    position = re.search("furtive-donation", haystack()).start()
    said = f"The special magic number for furtive-donation mentioned in the provided text is {position}."
    result, root = run([where, said, said, FIND, code("submit(4015985)")])
    assert str(position) in result.trajectory.of(CodeExecuted)[0].stdout
    assert "[note] This step printed only positions" in observations(root)[0]
    assert result.status == "submitted" and result.answer == 4015985 and len(root.requests) == 5
    # typed into submit(), the position is a guess the evidence check sends back
    result, root = run([where, code(f"submit({position})"), FIND, code("submit(4015985)")])
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["evidence"] and result.answer == 4015985
    # what decides is the code: text around a found place, a length or a count is shown as before
    assert prints_positions(body + "print(magic_number)") and prints_positions("m = re.search('a', t)\nprint('at', m.end())")
    assert prints_positions("i = t.find('a')\nprint(f'at {i}')") and prints_positions("i = t.index('a')\ni")
    assert not prints_positions("i = t.find('a')\nprint(t[i - 40:i + 60])")
    assert not prints_positions("print(len(t))") and not prints_positions("print('none found')")
    assert not prints_positions("i = t.find('a')\nprint(f'at {t[i:i + 9]}')")


def test_a_re_ask_keeps_the_models_own_sampling_and_skips_steps_that_failed() -> None:
    # a model built without a temperature is not sent one (reasoning models refuse it)
    result, root = run([LOOK, SPLIT, LOOK, FIND, code("submit(4015985)")])
    assert "repeat_reasked" in result.trajectory.of(ModelReply)[2].notes
    assert all("temperature" not in p for p in root.request_params)
    # the re-ask shows no step that already ran, the repeated one or another (recorded, vt: asked again about its
    # example step, the model sent its first step again): only their outputs
    reask = root.requests[3]
    assert [m["role"] for m in reask] == ["system", "user"]
    assert "Turn 1/20\n10867\n\nTurn 2/20\n6 chunks\n\nDo not send the code of turn 1 again" in str(reask[1]["content"])
    # code whose run raised (or printed a failed sub-call) may be worth running again: it runs, with the stall note
    broken = code("print(inputs['report'])")
    result, root = run([broken, broken, FIND, code("submit(4015985)")])
    assert [e.repeat_of for e in result.trajectory.of(CodeExecuted)] == [None, 1, None, None]
    assert not any("repeat_reasked" in r.notes for r in result.trajectory.of(ModelReply))
    # a submission the evidence check sent back is meant to be sent again: it is not asked about
    result, root = run([LOOK, code("submit(4015985)"), code("submit(4015985)")])
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["evidence"]
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
    rlm = RLM(root, ScriptedLM(lambda m: "2", name="sub"), sandbox="local")
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    runs = result.trajectory.of(CodeExecuted)
    assert [e.turn for e in runs] == [1, 2, 3, 4, 5, 6]
    assert [e.error_type for e in runs] == [None, "TypeError", None, "TypeError", None, None]
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 3, 4, 5, 5, 6]
    assert replies[4].notes == ["repeat_reasked"] and not any("repeat_reasked" in r.notes for r in replies[:4])
    ask = str(root.requests[5][-1]["content"])
    assert "Do not send the code of turn 4 again: it failed the same way twice" in ask
    assert "llm_map() takes a list of items" in ask  # the error it must avoid is in view, its code is not
    assert "# Define the custom instruction" not in ask + str(root.requests[5][0]["content"])
    assert result.status == "submitted" and result.answer == 4015985
    # a failure is retried once unasked; after two alike the next send is asked about, even past another step
    other = code("print(inputs['report'])")
    result, root = run([other, other, code("print(inputs['text'][10**9])"), other, LOOK, FIND, code("submit(4015985)")])
    assert [r.notes for r in result.trajectory.of(ModelReply)][3] == ["repeat_reasked"]
    assert [e.error_type for e in result.trajectory.of(CodeExecuted)] == ["KeyError", "KeyError", "IndexError", None,
                                                                           None, None]
    assert result.status == "submitted"
    # a failure of another kind in between is no second identical failure
    result, root = run([other, code("print(inputs['text'][10**9])"), other, LOOK, FIND, code("submit(4015985)")])
    assert not any(r.notes for r in result.trajectory.of(ModelReply)) and result.status == "submitted"
    # a submission a guard sent back is never asked about, however often it comes back the same
    unjsonable = code("submit(object())")
    result, root = run([LOOK, unjsonable, unjsonable, unjsonable, FIND, code("submit(4015985)")])
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["jsonable"] * 3
    assert not any(r.notes for r in result.trajectory.of(ModelReply)) and result.status == "submitted"
    # the same code failing with another message each time is no stall either
    flaky = code("tries = globals().get('tries', 0) + 1\nraise ValueError(f'try {tries}')")
    result, root = run([flaky, flaky, flaky, LOOK, FIND, code("submit(4015985)")])
    assert not any(r.notes for r in result.trajectory.of(ModelReply)) and result.status == "submitted"

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
    obs = observations(root)
    note = f"The line `{bad}` raised this same error at turn 1 too: the code around it changed, that line did not."
    assert note not in obs[0] and note in obs[1]
    assert "raised this same error at turn 2 too" in obs[3]  # the latest earlier turn, past a different error
    assert not any("raised this same error" in o for o in obs[2:3] + obs[4:])
    assert result.status == "submitted"
    # the same code failing the same way is the stall rule's case, not this note's; another message is not the same
    again = code(f"text = inputs['text']\n{bad}")
    result, root = run([again, again, code(f"text = 'x'\n{bad.replace('no_such_method', 'other_missing')}"), FIND,
                        code("submit(4015985)")])
    assert not any("raised this same error" in o for o in observations(root))


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
    assert [r.guard for r in rejected] == ["evidence"]
    obs = observations(root)[1]
    assert "submit('4742018') was not accepted yet: you wrote this value into your code at turn 1" in obs
    assert "Show where it comes from" in obs
    assert result.status == "submitted" and result.answer == 4015985


def test_the_second_submission_is_accepted_whatever_it_is() -> None:
    result, _ = run([GUESS, code("submit(special_magic_number)"), code("submit('4742018')")])
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["evidence"]
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
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=5).run("Which number?",
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
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", repeat_asks=0).run(
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
    positions = Step(4, "print(text.find('tangy'))", "7067228")
    assert not found_before("It is 7067228.", 5, [positions], question=q)  # a position shows no value


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
    first = observations(root)[0]
    assert "had no ```python block, so nothing ran" in first and "a value written without running code is a guess" in first
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["evidence"]
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


def test_a_bare_value_nothing_showed_or_only_the_preview_showed_is_a_guess() -> None:
    from rlmnb._engine.evidence import prose_answer
    from rlmnb.events import Trajectory

    result, root = run([LOOK, "4742018", code("submit(4015985)")], evidence_check=False)
    assert result.answer == 4015985 and "a value written without running code is a guess" in observations(root)[1]
    # the preview shows the needle at its head: a bare value read there is not found by the run
    result, root = run([LOOK, "4015985", FIND, code("submit(4015985)")], text=NEEDLE + " " + haystack())
    assert result.trajectory.of(Submitted)[0].turn == 4
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


def test_prose_stating_a_printed_value_is_told_how_to_submit_it_not_called_a_guess() -> None:
    # recorded (bench/realmodel.py, refunds): turn 1's SQL printed "east 136"; turn 2 replied "The area with the
    # most refunds is `east`, which has 136 occurrences." and was told a value written without code is a guess
    sentence = "The special magic number for furtive-donation is `4015985`, as printed above."
    result, root = run([LOOK, FIND, sentence, code("submit(4015985)")])
    note = observations(root)[2]
    assert "If your reply states the final answer, end the run with one block that calls submit" in note
    assert "guess" not in note and result.status == "submitted"
    result, root = run([LOOK, "The magic number is probably 7777777.", code("submit(1)")], evidence_check=False)
    assert "a value written without running code is a guess" in observations(root)[1]


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


def test_code_that_works_on_a_typed_copy_of_the_preview_is_told_so() -> None:
    # recorded (RULER vt, 8k): the root pasted eight preview lines into `text = """..."""`, searched that copy for
    # the value and printed 0; nothing said the count was of its own copy
    pasted = "text = '''\n" + FILLER.strip() + "\n" + FILLER.strip() + "\n" + FILLER.strip() + "\n'''\n"
    counted = code(pasted + "print(text.count('41551'))")
    result, root = run([counted, FIND.replace("text.find", "inputs['text'].find").replace("print(text", "print(inputs['text']"),
                        code("submit(4015985)")])
    first, second = observations(root)[:2]
    assert re.search(r"This code typed 2\d\d characters of text you were shown \(the preview or an earlier output\) "
                     r"into a string literal", first)
    assert "Work on `inputs[...]` itself." in first and "typed" not in second
    assert result.status == "submitted"


def test_typed_data_counts_only_long_literals_of_text_the_model_was_shown() -> None:
    opening = ["Question: what?\nPreview:\n" + FILLER * 3]
    assert 200 <= typed_data("x = '''" + (FILLER.strip() + "\n") * 3 + "'''", opening) <= 3 * len(FILLER)
    # recorded (cwe, 8k): the copy was of an earlier output (500 characters of a numbered word list), one long line
    printed = " ".join(f"{i}. word{i % 7}" for i in range(1, 60))
    assert typed_data(f"context = {printed[3:]!r}", [opening[0], "<class 'str'> 18557\n" + printed]) >= 400
    assert typed_data("x = '" + "a" * 300 + "'", opening) == 0  # long, but not the data
    assert typed_data("x = '" + FILLER.strip() + "'", opening) == 0  # one line: below the threshold
    assert typed_data("x = (", opening) == 0  # does not parse


# ---- prose stated twice, and replies that copy the request ---------------------------------------------------
MULTI = "What are all the special magic numbers for abashed-aftershave mentioned in the provided text?"


def multivalue_text() -> str:
    lines = [FILLER * 20 + f"One of the special magic numbers for abashed-aftershave is: {n}.\n"
             for n in ("3997281", "9398441", "9517485", "5418934")]
    return "".join(lines) + FILLER * 20


def test_the_same_prose_answer_twice_in_a_row_is_the_answer() -> None:
    # recorded (RULER niah_multivalue 8k): the reading named all four numbers; the root's regex printed [], then it
    # stated three of them in prose at turn 2, was told to submit, and sent the same sentence at turns 3 to 6
    said = ("The special magic numbers for abashed-aftershave mentioned in the provided text are: 9398441, 9517485, "
            "5418934.")
    regex = code("import re\nprint(re.findall(r'abashed-aftershave: (\\d+)', inputs['text']))")
    root = ScriptedLM([regex, said, said, said], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda m: "3997281, 9398441, 9517485, 5418934", name="sub", context_window=16_384,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(MULTI, text=multivalue_text())
    assert result.status == "submitted" and result.answer == said and len(root.requests) == 3
    assert "stated the same answer in prose twice" in result.reason
    # once is not enough (the note asks for submit()), nor prose stating nothing shown, said twice or more
    other = "I am not sure yet, let me look again at 1234567."
    root = ScriptedLM([regex, said, other, code("print(1)"), other, other, "9398441"], name="root",
                      context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local", max_iterations=6).run(MULTI, text=multivalue_text())
    assert result.status == "fallback"


def test_an_answer_that_says_nothing_was_found_goes_back_once_when_the_reading_found_one() -> None:
    # recorded (RULER niah_multivalue 8k, instance 1): the reading answered "9897858, 3710343"; the root printed a
    # string of its own ("No special magic numbers found."), then `print("None")` and `submit(None)`, accepted
    said = code("print(\"No special magic numbers found.\")")
    nothing = code("print(\"None\")\nsubmit(None)")
    search = code("import re\nprint(re.findall(r\"abashed-aftershave is: (\\d+)\", inputs[\"text\"]))")
    found = code("submit([\"3997281\", \"9398441\", \"9517485\", \"5418934\"])")
    root = ScriptedLM([said, nothing, search, found], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda m: "9398441, 9517485", name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(MULTI, text=multivalue_text())
    assert result.status == "submitted" and result.answer == ["3997281", "9398441", "9517485", "5418934"]
    (rejected,) = result.trajectory.of(GuardRejected)
    assert rejected.guard == "evidence" and rejected.turn == 2
    assert rejected.reason.startswith("submit(None) was not accepted yet: it says nothing was found, but the first "
                                      "reading found this:\n- `inputs[\"text\"]` whole")
    assert rejected.reason.endswith(": 9398441, 9517485\nCheck it with code: search the data for it and print the "
                                    "lines that hold it. Then submit what the data shows.")
    first = observations(root)[0]
    assert first.startswith("Turn 1/20\nNo special magic numbers found.\n")
    assert ("[note] This step only printed text written in its own code; it read no data, so its output says "
            "nothing about the input.") in first
    assert "read no data" not in observations(root)[2]  # the search read the input
    # without a reading that found something, or when the answer says something, None is accepted as before
    for reading, expected in (("NOT FOUND", None), ("9398441", None)):
        root = ScriptedLM([said, nothing, nothing], name="root", context_window=16_384, max_output_tokens=400)
        sub = ScriptedLM(lambda m, r=reading: r, name="sub", context_window=16_384, max_output_tokens=120)
        result = RLM(root, sub, sandbox="local").run(MULTI, text=multivalue_text())
        assert result.status == "submitted" and result.answer is expected
        assert len(result.trajectory.of(GuardRejected)) == (0 if reading == "NOT FOUND" else 1)


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
        if last.startswith("Your reply only copied"):
            return FIND
        if "furtive-donation is: 4015985" in last:
            return code("submit(4015985)")
        return copy(messages)

    root = ScriptedLM(root_reply, name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local")
    result = rlm.run("What is the special magic number for furtive-donation?", text=haystack())
    replies = result.trajectory.of(ModelReply)
    assert [r.turn for r in replies] == [1, 2, 2, 3]
    assert replies[1].notes == ["empty", "echo", "echo_retried"] and replies[1].text.startswith(starts)
    assert str(root.requests[2][-1]["content"]) == ("Your reply only copied text you were given. Write your own "
                                                    "next step: one ```python block.")
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
    root = ScriptedLM([count, count, said, said, code("submit('never')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="local").run(
        "What are the 2 most common words in the above list?", text=text)
    assert result.trajectory.of(CodeExecuted)[0].stdout.strip() == said
    replies = result.trajectory.of(ModelReply)
    assert "repeat_reasked" in replies[1].notes and "echo" not in replies[2].notes
    assert "If your reply states the final answer, end the run with one block" in observations(root)[-1]
    assert result.status == "submitted" and result.answer == said and len(root.requests) == 4


def test_prints_own_text_is_a_step_that_prints_only_its_own_literals() -> None:
    from rlmnb._engine.evidence import prints_own_text

    for own in ('print("No special magic numbers found.")', 'print("None")', "[]", "x = 'none'\nprint('found:', x)",
                "found = []\nprint(found)", "pass\nprint({'a': [1, 2]})"):
        assert prints_own_text(own), own
    for reads in ("print(inputs['text'][:100])", "print(len(text))", "x = 'a'", "import re\nprint(re.findall('a', 'a'))",
                  "print(llm_query('hi'))", "x = inputs\nprint('ok')", "print('a'", "for i in range(3):\n    print(i)"):
        assert not prints_own_text(reads), reads


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


def test_same_words_and_the_strings_of_an_answer() -> None:
    assert same_words("ketchup, fresh, dreamer", " ".join(["Ketchup", "fresh", "dreamer."]))
    assert not same_words("fresh, ketchup", "ketchup, fresh") and not same_words("", "")
    assert answer_strings(["a", 1, "b"]) == ["a", "b"] and answer_strings({"k": "v"}) == ["v"]
    assert answer_strings("x") == ["x"] and answer_strings(3) == []


def test_listed_items_are_numbers_and_capital_codes_the_text_holds_and_the_question_does_not_give() -> None:
    question = "Find all variables assigned the value 41551. Example answer: they are JUP AGD"
    text = "VAR HZYVC = 41551 ... VAR FQZBI = VAR HZYVC; numbers 7975534, 8816912 and 1,234; the 10th JUP"
    plain = "According to the chain, 5 variables are assigned the value 41551, they are: HZYVC FQZBI NOPE"
    assert listed_items(["ZYVC", plain], text, question=question) == ("HZYVC", "FQZBI")  # not in text: no item
    assert listed_items(["7975534, 8816912", "1,234", "JUP"], text, question=question) == ("7975534", "8816912")
    # ordinary words and short numbers are no items: a sentence is not a list
    assert listed_items(["from the 10th century", "The Grass Is Green"], text, question=question) == ()


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


def test_a_printed_tables_row_labels_are_no_values_it_showed() -> None:
    # recorded (bench/realmodel.py billing, on f9d7749): the root printed the billing rows of a 2,000-row frame and
    # said "The filtered DataFrame has 15 rows" twice; 15, one printed row's label, ended the run as a shown value
    printed = ("      ticket_id   area category  \\\n1             2  south  billing   \n15           16   west  billing   \n"
               "...         ...    ...      ...   \n1998       1999  north  billing   \n\n[624 rows x 4 columns]")
    assert not found_in(15, [printed]) and not found_in("15", [printed]) and not found_in(1998, [printed])
    assert found_in(624, [printed]) and found_in(16, [printed]) and found_in(1999, [printed])  # cells, the shape
    assert found_in(15, ["15\n"]) and found_in(15, ["count: 15"]) and found_in(12, ["east     12\nwest     15"])
    # the recorded run: said twice after the printed frame, "15 rows" no longer ends it; the count does
    import pandas as pd

    frame = pd.DataFrame({"ticket_id": range(1, 2001),
                          "category": ["billing", "account", "shipping", "other", "refund"] * 400})  # 15 is billing
    show = code("frame = inputs['tickets']\nfiltered = frame[frame['category'] == 'billing']\nprint(filtered)")
    said = "The filtered DataFrame has 15 rows, which is less than the budget of 4 steps."
    root = ScriptedLM([show, said, said, code("print(len(filtered))"), code("submit(len(filtered))")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local").run("How many tickets have the category 'billing'?",
                                                                      tickets=frame)
    assert "\n15 " in result.trajectory.of(CodeExecuted)[0].stdout  # the printed frame shows the row labelled 15
    assert result.status == "submitted" and result.answer == 400
