"""Policy `first_read`: before a small root model's first step the sub-model reads the text inputs with the question.

Issue 22's measurement: on RULER at 8K tokens the 1.5B model reading the text whole scored 0.54 and rlmnb 0.17;
its root wrote string code or guessed from the preview and never sent the text to the sub-model. The reading is
evidence the root sees (the places naming the question's names, each read alone; else the text whole or in parts,
each part's answer marked held or not held by its part), never an answer of its own (issue 44). These tests script
both models; the sub-model answers from the part it is given, as a real one would.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ordinary_data import EVERY_POLICY
from sandbox_support import code

from rlmnb import RLM
from rlmnb._engine.policies.first_read import NAMED
from rlmnb._engine.replies import read_step, without_copied_head
from rlmnb._ground.config import POLICIES, PROFILES
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.prompts import load
from rlmnb._ground.text import parts_of
from rlmnb._models.base import Message
from rlmnb.events import (
    BatchStarted,
    CodeExecuted,
    GuardRejected,
    ModelReply,
    PolicyActed,
    SubCallFinished,
    Trajectory,
)
from rlmnb.testing import ScriptedLM

WITH_BREAKER = ("repeat_breaker", *PROFILES["small"])  # the policy these tests are about, beside its profile

NEEDLE = "One of the special magic numbers for furtive-donation is: 4015985."
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
QUESTION = "What is the special magic number for furtive-donation?"


def haystack(repeats: int) -> str:
    half = FILLER * (repeats // 2)
    return half + NEEDLE + "\n" + half


def reader(messages: list[Message]) -> str:
    """A sub-model that finds the needle when its part holds it, and says NONE for the one place naming the
    question's key read alone (so that the text is read: `test_a_place_that_answers_spares_reading_the_text`)."""
    text = str(messages[-1]["content"])
    if text.startswith("A passage taken from a long text"):
        return "NONE"
    found = re.search(r"furtive-donation is: (\d+)", text)
    return found.group(1) if found else "NOT FOUND"


def run(replies: Any, text: str, *, window: int | None = 16_384, sub_window: int | None = 16_384,
        sub_model: Any = reader, **kw: Any) -> tuple[Any, ScriptedLM, ScriptedLM]:
    root = ScriptedLM(replies, name="root", context_window=window, max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=sub_window, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local", **kw).run(QUESTION, text=text)
    return result, root, sub


def opening(root: ScriptedLM) -> str:
    """The root's first user message: the question, its summary, and the reading when there is one."""
    return str(root.requests[0][1]["content"])


def acted(trajectory: Trajectory) -> list[tuple[int, str, str]]:
    """(turn, policy, action) of every `PolicyActed` event of a run, in order (turn 0: before the first turn)."""
    return [(e.turn, e.policy, e.action) for e in trajectory.of(PolicyActed)]


def reading_of(root: ScriptedLM) -> str:
    text = opening(root)
    return text[text.index("First reading"):text.index("\n\nBudget:")] if "First reading" in text else ""


def test_a_small_root_sees_the_sub_models_whole_reading_and_may_submit_it_at_its_first_step() -> None:
    result, root, sub = run([code("submit('4015985')")], haystack(200))
    # the place naming the question's key read alone (NONE here), then the text read whole
    assert len(sub.requests) == 2
    asked = str(sub.requests[1][-1]["content"])
    assert NEEDLE in asked and QUESTION in asked
    # the question comes before the text as well as after it (a model reading 8K tokens knows what to look for)
    assert asked.index(QUESTION) < asked.index(NEEDLE) < asked.rindex(QUESTION)
    # a text read whole is not offered a NOT FOUND exit (recorded, RULER vt 8k: offered it, the reading took it)
    assert "NOT FOUND" not in asked
    reading = reading_of(root)
    assert reading and opening(root).rstrip().endswith(load("first_read_start").rstrip())
    # a whole text's answer is shown as it was given: not looked for in the text (it may be a count it never states)
    assert '`inputs["text"]` whole (' in reading and reading.count(": 4015985\n") == 1
    assert "(the part says" not in reading and "[not in" not in reading
    assert acted(result.trajectory) == [(0, "first_read", "read_first")]
    # the reading is output the root has seen: no first-turn send-back, and the evidence check finds the value
    assert not result.trajectory.of(GuardRejected)
    assert result.status == "submitted" and result.answer == "4015985"
    # the named place, then the reading: sub-calls at turn 0, budgeted as any other
    assert [(b.turn, b.group, b.size) for b in result.trajectory.of(BatchStarted)] == [(0, "first reading", 1)] * 2
    assert result.usage.sub_calls == 2


def parts_then_passages(part_reply: Any, *, places: bool = True) -> Any:
    """A sub-model: `part_reply(part)` for a part of the reading; for one named place read alone, the number the
    passage gives for the question's key, else NONE (a small model reads one short passage well); with
    `places=False`, NONE for every place (so that the parts are read)."""
    def reply(messages: list[Message]) -> str:
        prompt = str(messages[-1]["content"])
        if prompt.startswith("A passage taken from a long text"):
            found = re.search(r"for furtive-donation is: (\d+)", prompt) if places else None
            return found.group(1) if found else "NONE"
        return str(part_reply(re.search(r"Text:\n(.*)\n\nQuestion:", prompt, re.S).group(1)))  # type: ignore[union-attr]
    return reply


def test_a_text_larger_than_the_sub_window_is_read_in_parts_and_each_answer_is_checked_against_its_part() -> None:
    # recorded (RULER niah_single_2 at 32K, instance 1, three ~10K-token parts): offered "If this part of the text
    # does not hold the answer, reply exactly: NOT FOUND", all three parts took it, the needle's part too. Asked
    # without it, the needle's part answered "4194548"; the others "10" (a footnote mark their text holds) and
    # "3.65" (a CEO's pay in millions). A part not holding the needle here answers a number it makes up.
    text = FILLER * 200 + NEEDLE + "\n" + FILLER * 500 + "CEO pay in 2002 was $3.65 million.\n" + FILLER * 650
    sub_model = parts_then_passages(lambda part: "4015985" if NEEDLE in part else "3.65" if "$3.65" in part
                                    else "9999999", places=False)
    root = ScriptedLM(["The special magic number is 9999999.", code("submit('4015985')")], name="root",
                      context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=text)
    assert len(sub.requests) == 4  # the one place naming the question's key, read alone (NONE), then three parts
    sent = "".join(re.search(r"Text:\n(.*)\n\nQuestion:", str(r[-1]["content"]), re.S).group(1)  # type: ignore[union-attr]
                   for r in sub.requests[1:])
    assert sent == text  # the parts cover the text exactly, in order
    assert not any("NOT FOUND" in str(r[-1]["content"]) for r in sub.requests)  # no exit to take
    reading = reading_of(root)
    assert 'part 1 of 3 (' in reading and ('tokens): 4015985 (the part says: "' + NEEDLE + '")') in reading
    assert 'tokens): 3.65 (the part says: "CEO pay in 2002 was $3.65 million.")' in reading
    assert "tokens): 9999999 [not in this part's text]" in reading
    assert "an answer marked [not in this part's text] was made up" in reading
    # the place that names the question's "furtive-donation", read alone first; it did not answer
    alone = str(sub.requests[0][-1]["content"])
    assert alone.startswith(f'A passage taken from a long text:\n"{NEEDLE}"\n') and alone.rstrip().endswith("NONE")
    assert f'- "furtive-donation" in `inputs["text"]`: "{NEEDLE}"' in reading and "each place read alone" not in reading
    # prose restating the made-up answer is not taken as the answer; the root goes on and submits the needle
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 2


def _word_list_task(items: int) -> tuple[str, str]:
    """A common-words question carrying a worked example (as RULER's cwe does) and a numbered list of `items` words
    in which "census" is the most common; none of the example's words is in the list."""
    example = ("Below is a numbered list of words. Memorize the ones that appear most often.\n1. dreamer 2. server "
               "3. ketchup 4. adult 5. fresh 6. dreamer\nQuestion: What are the 5 most common words in the above "
               "list? Answer: The top 5 words that appear most often in the list are: 1. ketchup 2. fresh 3. dreamer "
               "4. adult 5. server\n")
    question = example + "Below is a numbered list of words.\nQuestion: What are the 5 most common words in the list?"
    words = ["balloon", "census", "federation", "treatment", "weapon", "mailman", "sweat"]
    return question, " ".join(f"{i + 1}. {words[i % 7] if i % 3 else 'census'}" for i in range(items))


def test_parts_answering_with_the_questions_worked_example_are_marked_as_not_held() -> None:
    # recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B, four ~13K-token parts): every part answered "ketchup, fresh,
    # dreamer, adult, server", the answer of the worked example the question carries; no part holds those words
    question, text = _word_list_task(3000)
    count = code("from collections import Counter\nimport re\n"
                 "top = Counter(re.findall(r'[a-z]+', inputs['text'])).most_common(5)\nsubmit([w for w, _ in top])")
    root = ScriptedLM([count], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda messages: "ketchup, fresh, dreamer, adult, server", name="sub", context_window=8_192,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    reading = reading_of(root)
    assert len(sub.requests) == 3 and "part 3 of 3" in reading  # every part read, in one batch
    assert [(b.turn, b.size) for b in result.trajectory.of(BatchStarted)] == [(0, 3)]
    assert reading.count("ketchup, fresh, dreamer, adult, server [not in this part's text]") == 3, reading
    # the reading is evidence only: the root's computed answer stands
    assert result.status == "submitted" and result.answer[0] == "census" and len(root.requests) == 1
    assert acted(result.trajectory) == [(0, "first_read", "read_first")]
    # parts whose answer their text holds are quoted where they hold it, unmarked
    sub = ScriptedLM(lambda messages: "census, federation, treatment", name="sub", context_window=8_192,
                     max_output_tokens=120)
    root = ScriptedLM([code("submit('census')")], name="root", context_window=16_384, max_output_tokens=400)
    RLM(root, sub, sandbox="local").run(question, text=text)
    reading = reading_of(root)
    assert len(sub.requests) == 3 and reading.count('(the part says: "') == 3
    assert not any(line.endswith("[not in this part's text]") for line in reading.splitlines())


def test_the_fallback_keeps_a_statement_of_a_count_and_leaves_out_guesses_and_marked_answers() -> None:
    # recorded (RULER cwe at 32K, instance 0, resumed on 70a5c5a): the reading's part 1 answered the worked example
    # (marked); turn 2 stated the worked example in prose, turn 3 counted with code, turn 4 stated the count, turn 5
    # sent turn 3's code again after two asks; the fallback, shown the marked reading line first and none of the
    # prose, answered the worked example. A statement of what earlier output held is kept, a guess is not
    question, text = _word_list_task(3000)
    example = "The top 5 words that appear most often in the list are: ketchup, fresh, dreamer, adult, server."
    count = code("from collections import Counter\nimport re\n"
                 "print(Counter(re.findall(r'[a-z]+', inputs['text'])).most_common(5))")
    stated = "The top 5 words that appear most often in the list are: census, balloon, federation, treatment, weapon."
    look = code("print(inputs['text'][:80])")
    root = ScriptedLM([look, example, count, stated, count, count, count, "census"], name="root",
                      context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda messages: "ketchup, fresh, dreamer, adult, server", name="sub", context_window=8_192,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local", policies=WITH_BREAKER).run(question, text=text)
    assert result.status == "fallback" and "repeated turn 3's" in result.reason
    request = root.requests[-1]
    said = "\n".join(str(m["content"]) for m in request if m["role"] == "assistant")
    assert stated in said and example not in said  # said after the count printed it / before any output
    last = str(request[-1]["content"])
    assert "The first reading answered" not in last and "census" in last  # the marked line is left out


def test_where_the_input_names_the_questions_key_is_quoted_and_each_place_read_alone() -> None:
    # recorded (RULER niah_multikey_1 at 32K, instance 0, on 86bdcea): the parts answered "4", "5118725" (the
    # number of another key, "illegal-physical") and "5502929" (another key again, from the part that also held the
    # asked key's number); the root restated the first 7-digit answer at turn 1 and that ended the run, wrong
    others = ("One of the special magic numbers for illegal-physical is: 5118725.\n",
              "One of the special magic numbers for youthful-contention is: 5502929.\n")
    text = (FILLER * 200 + "Chapter 4 begins.\n" + FILLER * 450 + others[0] + FILLER * 450 + others[1]
            + FILLER * 20 + NEEDLE + "\n" + FILLER * 200)

    def first_key_seen(part: str) -> str:
        found = re.search(r"special magic numbers for [\w-]+ is: (\d+)", part)
        return found.group(1) if found else "4"

    root = ScriptedLM([code("submit('4015985')")], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(parts_then_passages(first_key_seen), name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=text)
    reading = reading_of(root)
    named = reading[reading.index("Where the input names what the question asks about"):reading.index("Its answers:")]
    assert f'- "furtive-donation" in `inputs["text"]`: "{NEEDLE}"' in named
    # the place answered: the parts were not read (one short sub-call instead of three of ~10K tokens)
    assert len(sub.requests) == 1 and "part 1 of 3" not in reading and "5118725" not in reading
    assert f"- {NAMED}: 4015985\n" in reading
    assert re.search(r"\(3 parts, ~[\d,]+ tokens\)", reading)  # the opening says how much was left unread
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 1
    # where no place answers, the parts are read after the places and their answers are checked against each part
    sub = ScriptedLM(parts_then_passages(first_key_seen, places=False), name="sub", context_window=16_384,
                     max_output_tokens=120)
    root = ScriptedLM([code("submit('4015985')")], name="root", context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=text)
    reading = reading_of(root)
    assert len(sub.requests) == 1 + 3 and "part 1 of 3 (" in reading and f"- {NAMED}:" not in reading
    assert "tokens): 5118725 (the part says" in reading and "tokens): 5502929 (the part says" in reading
    assert result.answer == "4015985"


def test_every_place_naming_the_key_is_read_alone_and_all_their_answers_are_listed() -> None:
    # recorded (RULER niah_multivalue at 32K, instance 0, on b3a4e5b): the parts named all four numbers between them;
    # the quoted passages read together in one call gave two ("7975534, 8816912"), which the root restated. Probe:
    # each of the key's four places read alone gave its number
    values = ("7975534", "8816912", "2044645")
    lines = [f"One of the special magic numbers for furtive-donation is: {v}.\n" for v in values]
    text = FILLER * 200 + lines[0] + FILLER * 500 + lines[1] + FILLER * 100 + lines[2] + FILLER * 500
    sub_model = parts_then_passages(lambda part: ", ".join(re.findall(r"is: (\d+)", part)) or "None")
    root = ScriptedLM([code("import re\nsubmit(re.findall(r'furtive-donation is: (\\d+)', inputs['text']))")],
                      name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run("What are all the special magic numbers for furtive-donation?",
                                                 text=text)
    assert len(sub.requests) == 3  # three places read alone; the parts are not read
    assert f"- {NAMED}: 7975534, 8816912, 2044645\n" in reading_of(root)
    assert result.status == "submitted" and result.answer == list(values)


def test_a_sentence_the_models_own_code_printed_said_twice_is_no_answer() -> None:
    # recorded (RULER niah_multivalue at 32K, instance 1, on 8adb350): the places gave all four numbers; turn 1
    # searched for the singular "special magic number for ..." and printed its own "was not found" sentence; turns 2
    # and 3 said that sentence, which ended the run as the answer (0.0)
    values = ("7975534", "8816912", "2044645")
    lines = [f"One of the special magic numbers for furtive-donation is: {v}.\n" for v in values]
    text = FILLER * 200 + lines[0] + FILLER * 500 + lines[1] + FILLER * 100 + lines[2] + FILLER * 500
    said = "The phrase 'special magic number for furtive-donation' was not found in the input."
    search = code("phrase = 'special magic number for furtive-donation'\nif phrase in inputs['text']:\n"
                  "    print(inputs['text'].index(phrase))\nelse:\n"
                  "    print(\"The phrase 'special magic number for furtive-donation' was not found in the input.\")")
    found = code("import re\nsubmit(re.findall(r'furtive-donation is: (\\d+)', inputs['text']))")
    root = ScriptedLM([search, said, said, found], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(parts_then_passages(lambda part: "None"), name="sub", context_window=16_384,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run("What are all the special magic numbers for furtive-donation?",
                                                 text=text)
    assert said in result.trajectory.of(CodeExecuted)[0].stdout
    assert result.status == "submitted" and result.answer == list(values) and len(root.requests) == 4


def test_prose_ending_in_a_boxed_value_the_reading_showed_is_the_answer() -> None:
    # recorded (RULER niah_multivalue at 32K, instance 0, on fef5449): turn 1 reasoned over the reading in 1,127
    # characters, no code, ending in \\boxed{...}; told it had no code and asked again, the root submitted the
    # question's own key. Policy `prose_answer` takes a boxed value that a sub-call reply of the reading showed
    reasoned = ("To find the special magic number for furtive-donation mentioned in the provided text, we need to "
                "look at the text and identify the number that is explicitly stated.\n\n1. **Identify the relevant "
                "part of the text:**\n   - The text mentions \"furtive-donation\" once.\n   - It says \"One of the "
                "special magic numbers for furtive-donation is: 4015985.\"\n\nTherefore, the special magic number "
                "for furtive-donation mentioned in the provided text is \\(\\boxed{4015985}\\).")
    result, root, _ = run([reasoned, code("print(1)"), code("submit('x')")], haystack(200), evidence_check=False)
    assert len(reasoned) > 400 and result.status == "submitted" and result.answer == "4015985"
    assert acted(result.trajectory) == [(0, "first_read", "read_first"), (1, "prose_answer", "answer")]
    assert len(root.requests) == 1
    # a boxed value nothing showed is no answer: the reply is a turn without code and the run goes on
    result, root, _ = run([reasoned.replace("{4015985}", "{1234567}"), code("print(1)"), code("submit('x')")],
                          haystack(200), evidence_check=False)
    assert result.status == "submitted" and result.answer == "x" and len(root.requests) == 3
    assert acted(result.trajectory) == [(0, "first_read", "read_first")]


def test_submitting_the_input_itself_goes_back_once_even_on_the_last_turn() -> None:
    # recorded (RULER vt at 32K, instance 1, on d6de7b0): turn 3 ran `if "97939" in inputs["context"]:
    # submit(inputs["context"])`; RULER's string_match_all, counting the references the answer holds, scored the
    # 28,000-character text 1.0. Policy `whole_copy` sends such an answer back once a run
    text = haystack(400)
    whole = code("if '4015985' in inputs['text']:\n    submit(inputs['text'])")
    result, root, _ = run([whole, code("submit('4015985')")], text, policies=POLICIES)
    assert [(r.turn, r.guard) for r in result.trajectory.of(GuardRejected)] == [(1, "whole_copy")]
    assert acted(result.trajectory) == [(0, "first_read", "read_first"), (1, "whole_copy", "send_back")]
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 2
    # once a run: sent again, it is taken (the model decides)
    result, root, _ = run([whole, whole], text, policies=POLICIES)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["whole_copy"]
    assert result.status == "submitted" and result.answer == text and len(root.requests) == 2
    # on the last turn too: the final answer comes from the fallback instead
    result, root, _ = run([code("submit(inputs['text'])"), "4015985"], text, max_iterations=1, policies=POLICIES)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["whole_copy"]
    assert result.status == "fallback" and result.answer == "4015985"
    # a part of the input, however long, is an answer (a clause the question asked for), and so is a short copy
    for part in ("inputs['text'][100:3000]", "inputs['text'][:1999]"):
        result, root, _ = run([code(f"submit({part})")], text, policies=POLICIES)
        assert result.status == "submitted" and not result.trajectory.of(GuardRejected) and len(root.requests) == 1


def test_a_part_that_says_it_found_nothing_is_shown_as_it_said_and_is_no_answer() -> None:
    # recorded (RULER vt at 32K, instance 0, on b3a4e5b): three of four parts answered "None"
    sub_model = parts_then_passages(lambda part: "4015985" if NEEDLE in part else "None", places=False)
    root = ScriptedLM(["None", code("submit('4015985')")], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=haystack(900))
    reading = reading_of(root)
    assert "tokens): None\n" in reading and "text]\n" not in reading  # shown, not marked
    assert result.answer == "4015985" and len(root.requests) == 2  # "None" restated is not the answer


def test_no_first_reading_for_a_large_root_model_unknown_windows_off_or_too_many_parts() -> None:
    look = code("print(len(inputs['text']))")
    for window, sub_window, settings, text in [
        (128_000, 128_000, {}, haystack(200)),                        # a large root: its own code is the strategy
        (None, 16_384, {}, haystack(200)),                            # root window unknown
        (16_384, None, {"first_read": "on"}, haystack(200)),          # the sub-model's window unknown: no parts
        (16_384, 16_384, {"first_read": "off"}, haystack(200)),       # turned off
        (16_384, 16_384, {"policies": "default"}, haystack(200)),     # a profile without it
        (16_384, 16_384, {"policies": "paper"}, haystack(200)),       # the paper's loop
        (16_384, 16_384, {}, haystack(6_000)),                        # ~110K tokens: more than four parts
    ]:
        result, root, sub = run([look, code("submit('x')")], text, window=window, sub_window=sub_window,
                                evidence_check=False, **settings)
        assert not sub.requests, (window, sub_window, settings)
        assert not reading_of(root) and opening(root).endswith("Start by exploring the inputs with code.")
        assert ("first_read", "read_first") not in [(p, a) for _, p, a in acted(result.trajectory)]
    # asked for by name, a large root gets one too
    for settings in ({"first_read": "on"}, {"policies": ["first_read"]}):
        result, root, sub = run([code("submit('4015985')")], haystack(200), window=128_000, sub_window=128_000,
                                **settings)
        assert len(sub.requests) == 2 and reading_of(root) and result.status == "submitted"
        assert acted(result.trajectory) == [(0, "first_read", "read_first")]


def test_no_first_reading_for_tables_or_when_the_sub_call_budget_is_tiny() -> None:
    import pandas as pd

    root = ScriptedLM([code("print(len(inputs['t']))"), code("submit(3)")], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(reader, name="sub", context_window=16_384, max_output_tokens=120)
    RLM(root, sub, sandbox="local").run("How many rows?", t=pd.DataFrame({"a": [1, 2, 3]}))
    assert not sub.requests
    result, root, sub = run([code("print(1)"), code("submit('x')")], haystack(200), max_llm_calls=1,
                            evidence_check=False)
    assert not sub.requests
    # room for one reading call only: the text is read whole, and no place is read alone
    result, root, sub = run([code("submit('4015985')")], haystack(200), max_llm_calls=3)
    assert len(sub.requests) == 1 and result.answer == "4015985"


def test_a_failed_reading_leaves_the_run_as_without_it() -> None:
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("server down")

    root = ScriptedLM([code("print(1)"), code("submit('x')")], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(broken, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local", evidence_check=False, max_retries=0).run(QUESTION, text=haystack(200))
    assert not reading_of(root) and acted(result.trajectory) == []
    assert result.status == "submitted"
    assert len(result.trajectory.of(SubCallFinished)) == 2  # the named place and the reading: both failed


def test_first_read_takes_only_its_three_modes() -> None:
    with pytest.raises(ConfigError, match="first_read must be one of auto, on, off"):
        RLM(ScriptedLM([]), first_read="yes")


def test_parts_are_even_cut_at_a_line_and_cover_the_text() -> None:
    text = haystack(3_000)
    spans = parts_of(text, 10_000)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(text[end - 1] == "\n" for _, end in spans[:-1])
    sizes = [end - start for start, end in spans]
    assert max(sizes) - min(sizes) < 200


def test_a_resumed_run_gets_its_first_reading_from_the_journal_and_the_same_opening(tmp_path: Path) -> None:
    look = code("print(inputs['text'][:40])")
    text = haystack(900)  # two parts
    parts = parts_then_passages(lambda part: "4015985" if NEEDLE in part else "None", places=False)
    first, root, sub = run([look, code("print(2)"), "no code"], text, max_iterations=2, journal=str(tmp_path),
                           sub_model=parts)
    assert first.status == "fallback" and len(sub.requests) == 3  # the named place read alone, then two parts
    root2 = ScriptedLM([code("submit('4015985')")], name="root", context_window=16_384, max_output_tokens=400)
    sub2 = ScriptedLM(parts, name="sub", context_window=16_384, max_output_tokens=120)
    again = RLM(root2, sub2, sandbox="local", journal=str(tmp_path), max_iterations=4).resume(first.journal,
                                                                                            text=text)
    assert again.status == "submitted" and again.answer == "4015985"
    assert sub2.requests == []  # both parts and the named place answered by the journal
    assert len(root2.requests) == 1  # turns 1 and 2 served: the opening (reading included) hashed the same
    assert reading_of(root2) == reading_of(root) and "part 2 of 2" in reading_of(root)


def test_a_bare_answer_the_reading_gave_ends_the_run_at_its_first_step() -> None:
    # recorded (bench/realmodel.py, needle, with a first reading): the model replied "2204211" alone, three turns
    # running, each told its reply had no code, until the fallback gave the same number
    result, root, _ = run(["4015985", code("submit('never')")], haystack(200))
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 1
    assert acted(result.trajectory) == [(0, "first_read", "read_first"), (1, "prose_answer", "answer")]
    result, root, _ = run(["1234567", code("print(1)"), code("submit('x')")], haystack(200), evidence_check=False)
    assert result.answer == "x"  # a bare value the reading did not give is not an answer
    assert acted(result.trajectory) == [(0, "first_read", "read_first")]


def test_the_fallback_shows_the_first_reading_beside_the_outputs() -> None:
    # recorded (RULER niah_single_2, 8k): the reading answered 7067228, the root looped on a comment-only step and
    # the fallback, shown only the essay's first lines, answered "5"
    idle = code("# No output needed for this step\npass")
    result, root, _ = run([code("print(inputs['text'][:30])"), idle, idle, idle, "4015985"], haystack(200),
                          policies=WITH_BREAKER, max_iterations=3, repeat_asks=1)
    assert result.status == "fallback" and result.answer == "4015985"
    # turn 3 sent turn 2's step: asked again, it sent the step again, which ended the turns
    assert acted(result.trajectory) == [(0, "first_read", "read_first"), (3, "repeat_breaker", "ask_again"),
                                        (3, "repeat_breaker", "end_turns"), (3, "final_answer", "end_turns")]
    last = str(root.requests[-1][-1]["content"])
    assert "The first reading answered:\n- `inputs[\"text\"]` whole" in last and "4015985" in last
    # a reading answer marked as not held by its part is left out of the final answer's request
    parts = parts_then_passages(lambda part: "4015985" if NEEDLE in part else "1234567", places=False)
    result, root, _ = run([code("print(inputs['text'][:30])"), "4015985"], haystack(900), max_iterations=1,
                          sub_model=parts)
    last = str(root.requests[-1][-1]["content"])
    assert "The first reading answered:" in last and "4015985" in last and "1234567" not in last
    assert result.status == "fallback" and result.answer == "4015985"


@pytest.mark.parametrize("lead_in", [True, False])
def test_a_reply_opening_with_a_copy_of_the_reading_keeps_only_its_own_text(lead_in: bool) -> None:
    # recorded (`rlmnb eval` oolong_pairs and RULER vt, 8k): turn 1 opened with the reading's message copied, then
    # its plan and code; turn 2 opened with the same copy, following its own reply in the history. On 104805a the
    # copy's first line came back without its lead-in: "The sub-model read the text inputs with the question, ..."
    plan = "To find the number, we search the text:\n\n"
    step = code("print(inputs['text'].count('furtive'))")

    def copying(messages: list[Message]) -> str:
        if sum(1 for m in messages if m["role"] == "assistant"):
            return code("submit('4015985')")
        text = str(messages[1]["content"])
        copy = text[text.index("First reading"):text.index("\n\nBudget:")]
        if not lead_in:
            copy = "The " + copy[copy.index(": the sub-model") + 6:]
        return copy + "\n\n" + plan + step

    result, root, _ = run(copying, haystack(200))
    turn1 = result.trajectory.of(ModelReply)[0]
    assert turn1.text.startswith("First reading" if lead_in else "The sub-model read the text inputs with the")
    assert turn1.notes[-1].startswith("copied_head_removed:")
    kept = str(root.requests[1][2]["content"])  # turn 1's reply as turn 2's request shows it
    assert kept == plan + step and "sub-model read" not in kept
    assert result.status == "submitted" and result.answer == "4015985"


def test_without_copied_head_leaves_code_single_lines_and_all_copy_replies() -> None:
    given = "Rules.\nUse code.\n```python\nprint(1)\n```"
    body = "```python\nprint(1)\n```"
    assert without_copied_head(read_step("Rules.\n\nUse code.\nMine.\n" + body), given).kept == "Mine.\n" + body
    assert without_copied_head(read_step("Rules.\nMine.\n" + body), given).head_removed == 0  # one line only
    assert without_copied_head(read_step(body), given).kept == body  # a copied fence is never cut into
    assert without_copied_head(read_step("Rules.\nUse code.\n" + body), given).kept == body
    assert without_copied_head(read_step("Rules.\nUse code."), given).kept == "Rules.\nUse code."  # no code: kept
    long = "Every step runs in the sandbox and prints what it finds, one block a reply."
    given = f"Rules: {long}\nUse code."
    assert without_copied_head(read_step(f"{long.upper()}\nUse code.\n{body}"), given).kept == body  # found inside
    short = without_copied_head(read_step(f"code.\nUse code.\n{body}"), given)  # a short piece of a line is no copy
    assert short.head_removed == 0


def test_an_answer_from_a_sub_call_given_only_the_question_goes_back_once() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, resumed on d92f852): turn 5 ran llm_query() on the question
    # reworded, with none of the text; the sub-model said "... is 12", the step printed it and turn 6 submitted 12,
    # which the evidence check let through (a sub-call's reply counted as evidence)
    def guessing(messages: list[Message]) -> str:
        prompt = str(messages[-1]["content"])
        return "The special magic number for furtive-donation is 12." if len(prompt) < 200 else reader(messages)

    ask = code('new_prompt = "What is the special magic number for furtive-donation mentioned in the provided text?"\n'
               "new_answer = llm_query(new_prompt)\nprint(f'The new answer from the re-read is: {new_answer}')")
    result, root, _ = run([ask, code("submit(12)"), code("submit('4015985')")], haystack(200), sub_model=guessing,
                          policies=POLICIES)
    # the step's bare sub-call gets a note (`guess_note`); its value goes back once (`unshown_value`)
    assert acted(result.trajectory) == [(0, "first_read", "read_first"), (1, "guess_note", "note"),
                                        (2, "unshown_value", "send_back")]
    assert [(r.turn, r.guard) for r in result.trajectory.of(GuardRejected)] == [(2, "unshown_value")]
    assert result.status == "submitted" and result.answer == "4015985"
    # without a reading (window unknown): computed, not typed, it goes back the same way; once per run, so sent
    # again it is taken
    steps = [ask, code("submit(int(new_answer.rstrip('.').split()[-1]))"), code("submit(12)")]
    result, _, _ = run(steps, haystack(200), sub_model=guessing, window=None, policies=EVERY_POLICY)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["unshown_value"] and result.answer == 12
    # stated in prose, it is no answer real output showed: the run goes on
    find = code("i = inputs['text'].find('furtive-donation is')\nprint(inputs['text'][i:i + 40])")
    result, _, _ = run([ask, "12", find, code("submit(4015985)")], haystack(200), sub_model=guessing, window=None,
                       policies=EVERY_POLICY)
    assert result.answer == 4015985 and not result.trajectory.of(GuardRejected)
    assert "prose_answer" not in [p for _, p, _ in acted(result.trajectory)]
    # a prompt carrying a part of the text is a reading, and its reply is evidence
    read = code("new_answer = llm_query('What is the special magic number for furtive-donation? ' + "
                "inputs['text'][-3000:])\nprint(new_answer)")
    result, root, _ = run([read, code("submit(new_answer)")], haystack(200), sub_model=guessing, window=None,
                          policies=EVERY_POLICY)
    assert not result.trajectory.of(GuardRejected) and acted(result.trajectory) == []


def test_a_place_that_answers_spares_reading_the_text() -> None:
    # measured at 32K (RULER needle tasks, Qwen2.5-Coder 1.5B): the places naming the question's key, each read alone,
    # answered all six instances right in ~3,400 tokens, where the parts cost ~34,000. A text that fits one call is
    # now treated the same: at 8K reading it whole twice cost ~15,000 tokens, and on niah_multivalue (instance 1,
    # on a562385) the two readings named two of the key's four numbers
    text = haystack(200) + "One of the special magic numbers for furtive-donation is: 7273233.\n" + FILLER * 100
    result, root, sub = run([code("submit('4015985, 7273233')")], text, sub_model=parts_then_passages(lambda p: "x"))
    assert len(sub.requests) == 2 and all(str(r[-1]["content"]).startswith("A passage") for r in sub.requests)
    reading = reading_of(root)
    assert "- where the input names what the question asks about, each place read alone: 4015985, 7273233" in reading
    assert re.search(r"Only those places were read, not the rest of the text \(~[\d,]+ tokens\)", reading)
    assert result.status == "submitted" and not result.trajectory.of(GuardRejected)
