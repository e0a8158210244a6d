"""The first reading: before a small root model's first step the sub-model reads the text inputs with the question.

Issue 22's measurement: on RULER at 8K tokens the 1.5B model reading the text whole scored 0.54 and rlmnb 0.17;
its root wrote string code or guessed from the preview and never sent the text to the sub-model. These tests
script both models; the sub-model answers from the part it is given, as a real one would.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code, observations

from rlmnb import RLM, RunResult
from rlmnb._engine.evidence import restated
from rlmnb._engine.first_read import parts_of
from rlmnb._engine.replies import read_step, without_copied_head
from rlmnb._ground.errors import ConfigError
from rlmnb._models.base import Message
from rlmnb.events import BatchStarted, CodeExecuted, GuardRejected, ModelReply, SubCallFinished
from rlmnb.testing import ScriptedLM

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


def reading_of(root: ScriptedLM) -> str:
    text = opening(root)
    return text[text.index("First reading"):text.index("\n\nBudget:")] if "First reading" in text else ""


def test_a_small_root_sees_the_sub_models_whole_reading_and_may_submit_it_at_its_first_step() -> None:
    result, root, sub = run([code("submit('4015985')")], haystack(200))
    # the place naming the question's key read alone (NONE here), the reading, and the model asked plainly (the
    # eval's `direct` prompt)
    assert len(sub.requests) == 3
    asked = str(sub.requests[1][-1]["content"])
    assert NEEDLE in asked and QUESTION in asked
    # the question comes before the text as well as after it (a model reading 8K tokens knows what to look for)
    assert asked.index(QUESTION) < asked.index(NEEDLE) < asked.rindex(QUESTION)
    # a text read whole is not offered a NOT FOUND exit (recorded, RULER vt 8k: offered it, the reading took it)
    assert asked.rstrip().endswith("in a few words or a short list.") and "NOT FOUND" not in asked
    reading = reading_of(root)
    assert reading.startswith("First reading (made by the harness before your first step)")
    assert opening(root).rstrip().endswith("If the first reading answers the question, check it with one step of "
                                           "code (print the part of the input that holds it) and then submit it; "
                                           "otherwise start by exploring the inputs with code.")
    plainly = str(sub.requests[2][-1]["content"])
    assert plainly.startswith("Answer the question about the input below. Reply with the answer only")
    assert plainly.index(QUESTION) < plainly.index(NEEDLE) and plainly.rstrip().endswith("</context>")
    # both answered the same: one line says so
    assert '`inputs["text"]` whole, read twice (' in reading and ": 4015985" in reading
    assert "asked plainly" not in reading
    # the reading is output the root has seen: no first-turn refusal, and the evidence check finds the value
    assert not result.trajectory.of(GuardRejected)
    assert result.status == "submitted" and result.answer == "4015985"
    # the named place, the reading, then the plain asking (not made when the reading only echoes the question)
    assert [(b.turn, b.group, b.size) for b in result.trajectory.of(BatchStarted)] == [(0, "first reading", 1)] * 3
    assert result.usage.sub_calls == 3


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


def test_parts_answering_with_the_questions_worked_example_are_no_answer_to_restate() -> None:
    # recorded (RULER cwe at 32K, Qwen2.5-Coder 1.5B, four ~13K-token parts): every part answered "ketchup, fresh,
    # dreamer, adult, server", the answer of the worked example the question carries; the root counted the words with
    # code at turn 3 (ten words 30 times each), then sent `submit(['ketchup', ...])` without a code fence, which was
    # taken as prose restating the reading's answer (0.0). Such a reply is now a step (`replies._lone_submit`), and a
    # submission made of a marked answer's words goes back once (guard `marked`)
    question, text = _word_list_task(3000)
    root = ScriptedLM(["submit(['ketchup', 'fresh', 'dreamer', 'adult', 'server'])",
                       code("from collections import Counter\nimport re\n"
                            "top = Counter(re.findall(r'[a-z]+', inputs['text'])).most_common(5)\n"
                            "submit([w for w, _ in top])")], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda messages: "ketchup, fresh, dreamer, adult, server", name="sub", context_window=8_192,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    reading = reading_of(root)
    assert reading.count("ketchup, fresh, dreamer, adult, server [not in this part's text]") == 1, reading
    assert result.status == "submitted" and len(root.requests) == 2  # the marked answer did not end the run
    assert [g.guard for g in result.trajectory.of(GuardRejected)] == ["marked"]
    assert result.answer[0] == "census"
    # the part 1 answer is only the question's words: the other parts, asked the same, are not read (recorded: each
    # of the four ~13K-token parts gave the worked example); the opening says so and asks for code
    assert len(sub.requests) == 1 and "part 1 of 3" in reading
    assert "Only part 1 was read: its answer is only the question's own words" in reading
    assert "so they were not read (2 parts, ~" in reading and "Find the answer with code on the input" in reading
    # a first part that answers from its text has the others read, in one batch after it
    sub = ScriptedLM(lambda messages: "census, federation, treatment", name="sub", context_window=8_192,
                     max_output_tokens=120)
    root = ScriptedLM([code("submit('census')")], name="root", context_window=16_384, max_output_tokens=400)
    RLM(root, sub, sandbox="local").run(question, text=text)
    reading = reading_of(root)
    assert len(sub.requests) == 3 and "part 3 of 3" in reading and "Only part 1" not in reading


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
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    assert result.status == "fallback" and "repeated turn 3's" in result.reason
    request = root.requests[-1]
    said = "\n".join(str(m["content"]) for m in request if m["role"] == "assistant")
    assert stated in said and example not in said  # said after the count printed it / before any output
    last = str(request[-1]["content"])
    assert "The first reading answered" not in last and "census" in last  # the marked line is left out


def test_a_whole_text_answered_with_the_questions_worked_example_is_marked_and_no_answer_to_restate() -> None:
    # the same reading as above on a list that fits the sub-model's window, read whole: a whole text's answer is not
    # looked for in the text (it may be a count the text never states), but one copied from the question is marked
    question, text = _word_list_task(600)  # fits the sub-model's window

    def run(said: str) -> tuple[str, RunResult]:
        root = ScriptedLM([f"The 5 most common words are {said}.",
                           code("from collections import Counter\nimport re\n"
                                "top = Counter(re.findall(r'[a-z]+', inputs['text'])).most_common(5)\n"
                                "submit([w for w, _ in top])")], name="root", context_window=16_384,
                          max_output_tokens=400)
        sub = ScriptedLM(lambda messages: said, name="sub", context_window=16_384, max_output_tokens=120)
        result = RLM(root, sub, sandbox="local").run(question, text=text)
        subs.append(len(sub.requests))
        return reading_of(root), result

    subs: list[int] = []
    reading, result = run("ketchup, fresh, dreamer, adult, server")
    assert "whole (" in reading and "ketchup, fresh, dreamer, adult, server [not in the text: the question's own words]" \
        in reading, reading
    # recorded (RULER cwe at 8K, on f1f6590): the plain asking gave the worked example too, ~10,600 tokens more;
    # a reading that echoes the question is not followed by it
    assert subs == [1] and "so the text was not asked again in other words" in reading
    assert result.status == "submitted" and result.answer[0] == "census"  # the restatement did not end the run
    reading, result = run("census, balloon, federation, treatment, weapon")  # words the text holds: not marked
    assert "census, balloon, federation, treatment, weapon\n" in reading and "[not in" not in reading, reading
    assert result.status == "submitted" and result.answer == "census, balloon, federation, treatment, weapon"


def test_a_submission_quoting_a_reading_line_with_its_made_up_mark_goes_back_once() -> None:
    # recorded (RULER cwe at 8K, instance 1, on 9beaedc): the whole reading answered five words of the question's
    # worked example, marked as the question's own words; at turn 6 the root submitted the reading line, mark and all
    question, text = _word_list_task(600)
    line = "inputs['text'] whole (2,000 tokens): ketchup, fresh, dreamer [not in the text: the question's own words]"
    count = code("from collections import Counter\nimport re\n"
                 "submit([w for w, _ in Counter(re.findall(r'[a-z]+', inputs['text'])).most_common(5)])")
    root = ScriptedLM([code("print(inputs['text'][:40])"), code(f"submit({line!r})"), count], name="root",
                      context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(lambda messages: "ketchup, fresh, dreamer, adult, server", name="sub", context_window=16_384,
                     max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    rejected = result.trajectory.of(GuardRejected)
    assert [r.guard for r in rejected] == ["marked"]
    assert "it quotes a reading the harness marked [not in the text: the question's own words]" in rejected[0].reason
    assert result.status == "submitted" and result.answer[0] == "census"
    # once per run: the same submission again is accepted (the model decides)
    root = ScriptedLM([code("print(inputs['text'][:40])"), code(f"submit({line!r})"), code(f"submit([{line!r}])")],
                      name="root", context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    assert result.status == "submitted" and result.answer == [line]


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

    root = ScriptedLM(["The special magic number for furtive-donation is 4015985.", code("submit('never')")],
                      name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(parts_then_passages(first_key_seen), name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=text)
    reading = reading_of(root)
    named = reading[reading.index("Where the input names what the question asks about"):reading.index("Its answers:")]
    assert f'- "furtive-donation" in `inputs["text"]`: "{NEEDLE}"' in named
    assert "each place where the input names what the question asks about, alone, in 1 sub-call(s)" in reading
    # the place answered: the parts were not read (one short sub-call instead of three of ~10K tokens)
    assert len(sub.requests) == 1 and "part 1 of 3" not in reading and "5118725" not in reading
    assert "Its answers:\n- where the input names what the question asks about, each place read alone: 4015985\n" \
        in reading
    assert re.search(r"Only those places were read, not the rest of the text \(3 parts, ~[\d,]+ tokens\)", reading)
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 1
    # where no place answers, the parts are read after the places and their answers are checked against each part
    sub = ScriptedLM(parts_then_passages(first_key_seen, places=False), name="sub", context_window=16_384,
                     max_output_tokens=120)
    root = ScriptedLM([code("submit('4015985')")], name="root", context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=text)
    reading = reading_of(root)
    assert len(sub.requests) == 1 + 3 and "part 1 of 3 (" in reading and "Only those places" not in reading
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
    root = ScriptedLM(["The numbers are 7975534, 8816912, 2044645.", code("submit('never')")], name="root",
                      context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run("What are all the special magic numbers for furtive-donation?",
                                                 text=text)
    assert len(sub.requests) == 3  # three places read alone; the parts are not read
    assert "each place read alone: 7975534, 8816912, 2044645\n" in reading_of(root)
    assert result.status == "submitted" and result.answer == "7975534, 8816912, 2044645"
    # recorded (the same task at 32K, instance 0, on 551bea1): the root restated the places' list with an "and"
    said = "The special magic numbers for furtive-donation mentioned in the text are 7975534, 8816912, and 2044645."
    root = ScriptedLM([said, code("submit('never')")], name="root", context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local").run("What are all the special magic numbers for furtive-donation?",
                                                 text=text)
    assert result.status == "submitted" and result.answer == "7975534, 8816912, 2044645" and len(root.requests) == 1


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
    # recorded (RULER niah_multivalue at 32K, instance 0, on fef5449): the reading listed all four numbers first; turn
    # 1 reasoned over it in 1,127 characters, no code, ending in \\boxed{...} with all four; told it had no code and
    # asked again, the root submitted the question's own key
    values = ("7975534", "8816912", "2044645")
    lines = [f"One of the special magic numbers for furtive-donation is: {v}.\n" for v in values]
    text = FILLER * 200 + lines[0] + FILLER * 500 + lines[1] + FILLER * 100 + lines[2] + FILLER * 500
    reasoned = ("To find the special magic numbers for furtive-donation mentioned in the provided text, we need to "
                "look at the text and identify the numbers that are explicitly stated.\n\n1. **Identify the relevant "
                "parts of the text:**\n   - The text mentions \"furtive-donation\" multiple times.\n" + "".join(
                    f'   - A part mentions "One of the special magic numbers for furtive-donation is: {v}."\n'
                    for v in values)
                + "\nTherefore, the special magic numbers for furtive-donation mentioned in the provided text are "
                "\\(\\boxed{7975534, 8816912, 2044645}\\).")
    for reply, answer in ((reasoned, "7975534, 8816912, 2044645"),
                          (reasoned.replace("8816912, 2044645}", "1234567}"), "x")):  # a boxed value nothing showed
        sub = ScriptedLM(parts_then_passages(lambda part: ", ".join(re.findall(r"is: (\d+)", part)) or "None"),
                         name="sub", context_window=16_384, max_output_tokens=120)
        root = ScriptedLM([reply, code("print(1)"), code("submit('x')")], name="root", context_window=16_384,
                          max_output_tokens=400)
        result = RLM(root, sub, sandbox="local", evidence_check=False).run(
            "What are all the special magic numbers for furtive-donation?", text=text)
        assert len(reply) > 400 and result.status == "submitted" and result.answer == answer


FOUR = ("7381734", "1098919", "9002392", "6901533")
FIRST_OCCURRENCE = (  # recorded, turn 1 (no code), cut to its gist
    "To find the special magic numbers for \"furtive-donation\" in the provided text, we need to look at the text "
    "and identify the numbers mentioned. Let's break it down step by step.\n\n1. **Identify the relevant part of "
    "the text:**\n   The text mentions \"special magic numbers for furtive-donation\" multiple times. We will focus "
    "on the first occurrence for simplicity.\n\n2. **Extract the relevant information:**\n   One of the special "
    "magic numbers for \"furtive-donation\" is: 1098919\n\nTherefore, the special magic numbers for "
    "\"furtive-donation\" mentioned in the provided text are \\(\\boxed{1098919}\\).")


def four_places() -> str:
    lines = [f"One of the special magic numbers for furtive-donation is: {v}.\n" for v in FOUR]
    return (FILLER * 150 + lines[0] + FILLER * 300 + lines[1] + FILLER * 100 + lines[2] + FILLER * 300 + lines[3]
            + FILLER * 400)


@pytest.mark.parametrize("then", ["all", "same"])
def test_an_answer_holding_some_of_the_named_places_answers_goes_back_once_with_all_of_them(then: str) -> None:
    # recorded (RULER niah_multivalue at 32K, instance 1, on d6de7b0): the parts answered "None mentioned",
    # "1098919, 9002392, 6901533" and "7381734"; each of the key's four places read alone gave its number and the
    # reading listed all four first; turn 1 focused "on the first occurrence for simplicity" and boxed one (0.25)
    question = "What are all the special magic numbers for furtive-donation mentioned in the provided text?"
    sub = ScriptedLM(parts_then_passages(lambda part: ", ".join(re.findall(r"is: (\d+)", part)) or "None mentioned"),
                     name="sub", context_window=16_384, max_output_tokens=120)
    second = code(f"submit({list(FOUR)!r})") if then == "all" else FIRST_OCCURRENCE
    root = ScriptedLM([FIRST_OCCURRENCE, second, code("submit('never')")], name="root", context_window=16_384,
                      max_output_tokens=400)
    result = RLM(root, sub, sandbox="local").run(question, text=four_places())
    assert "each place read alone: 7381734, 1098919, 9002392, 6901533\n" in reading_of(root)
    # asked again at once, as a repeat is: the request shows none of the model's replies (shown the note after its
    # reply, the model sent that reply again nearly word for word, boxing the same one), then the ask
    reask = root.requests[1]
    assert all(m["role"] != "assistant" for m in reask) and "for simplicity" not in str(reask)
    assert str(reask[-1]["content"]).endswith(
        "Not accepted yet: your answer '1098919' holds 1 of the 4 answers the first reading found where the input "
        "names what the question asks about (each place read alone): 7381734, 1098919, 9002392, 6901533. If the "
        "question asks for all of them, submit them all; if it asks for one, submit that one.")
    rejected = result.trajectory.of(GuardRejected)
    assert [r.guard for r in rejected] == ["partial"] and len(root.requests) == 2
    # all four submitted; or the same one again, which the model chose knowing the others: it stands
    assert result.status == "submitted" and result.answer == (list(FOUR) if then == "all" else "1098919")


def test_an_answer_holding_all_or_none_of_the_named_answers_is_not_sent_back() -> None:
    from rlmnb._engine.evidence import partly_holds
    assert partly_holds("1098919", FOUR) == ("1098919",)
    assert partly_holds([1098919, "9002392"], FOUR) == ("1098919", "9002392")
    assert partly_holds("7381734, 1098919, 9002392 and 6901533", FOUR) is None  # all
    assert partly_holds("5555555", FOUR) is None  # none: another answer, the evidence check's business
    assert partly_holds("1098919", FOUR[:1]) is None  # one place's answer: nothing left out


def test_submitting_the_input_itself_goes_back_every_time() -> None:
    # recorded (RULER vt at 32K, instance 1, on d6de7b0): turn 3 ran `if "97939" in inputs["context"]:
    # submit(inputs["context"])`; RULER's string_match_all, counting the references the answer holds, scored the
    # 28,000-character text 1.0. Recorded (RULER cwe at 8K, instance 0, on 1704f9e): sent back once at turn 5, the
    # same submission came again at turn 7 and was taken (and scored 1.0 the same way)
    text = haystack(400)
    steps = [code("if '4015985' in inputs['text']:\n    submit(inputs['text'])"), code("submit(inputs['text'][100:3000])"),
             code("submit('4015985')")]
    result, root, _ = run(steps, text)
    rejected = result.trajectory.of(GuardRejected)
    assert [r.guard for r in rejected] == ["copy", "copy"]
    assert rejected[0].reason.startswith(f"submit() was not accepted: its value is {len(text.strip()):,} "
                                         "characters copied from `inputs[\"text\"]`, not an answer.")
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 3
    # on the last turn too: the fallback answers instead
    result, root, _ = run([code("submit(inputs['text'])"), "4015985"], text, max_iterations=1)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["copy"]
    assert result.status == "fallback" and result.answer == "4015985"
    short, _, _ = run([code("submit(inputs['text'][:1999])")] * 2, text)  # the first goes back: no reading's answer
    assert short.status == "submitted" and "copy" not in [g.guard for g in short.trajectory.of(GuardRejected)]


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
    for window, sub_window, mode, text in [
        (128_000, 128_000, "auto", haystack(200)),     # a large root: its own code is the strategy
        (None, 16_384, "auto", haystack(200)),         # root window unknown
        (16_384, None, "on", haystack(200)),           # the sub-model's window unknown: parts cannot be sized
        (16_384, 16_384, "off", haystack(200)),        # turned off
        (16_384, 16_384, "auto", haystack(6_000)),     # ~110K tokens: more than four parts
    ]:
        result, root, sub = run([look, code("submit('x')")], text, window=window, sub_window=sub_window,
                                first_read=mode, evidence_check=False)
        assert not sub.requests, (window, sub_window, mode)
        assert not reading_of(root) and opening(root).endswith("Start by exploring the inputs with code.")
    result, root, sub = run([code("submit('4015985')")], haystack(200), window=128_000, sub_window=128_000,
                            first_read="on")
    assert len(sub.requests) == 3 and result.status == "submitted"


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
    # room for one reading call only: the text is read, not also asked plainly
    result, root, sub = run([code("submit('4015985')")], haystack(200), max_llm_calls=3)
    assert len(sub.requests) == 1 and result.answer == "4015985"


def _chain_task() -> tuple[str, str]:
    """A variable-tracking text (RULER's vt shape, made here): five names bound to one value in a chain."""
    lines = [FILLER] * 40
    names = ["HZYVC", "KPQZE", "AMLRT", "WOXNB", "JDFUS"]
    lines[5] = f"VAR {names[0]} = 41551\n"
    for i, (a, b) in enumerate(zip(names, names[1:], strict=False)):
        lines[10 + 6 * i] = f"VAR {b} = VAR {a}\n"
    question = "Find all variables that are assigned the value 41551 in the text above."
    return "".join(lines), question


def test_a_text_that_fits_one_call_is_also_asked_plainly_and_a_different_answer_is_shown_beside_the_reading() -> None:
    # recorded (RULER vt at 8K, Qwen2.5-Coder 1.5B, temperature 0): the reading prompt answered "ZYVC" (part of one
    # name of five) on both instances and rlmnb scored 0.0 and 0.0; the same model given the eval's `direct` prompt
    # named all five (1.0, 0.8). Both prompts now go in one batch; the root sees both answers.
    text, question = _chain_task()

    def sub_model(messages: list[Message]) -> str:
        prompt = str(messages[-1]["content"])
        return "HZYVC, KPQZE, AMLRT, WOXNB, JDFUS" if prompt.startswith("Answer the question") else "ZYVC"

    said = "The variables assigned 41551 are HZYVC, KPQZE, AMLRT, WOXNB, JDFUS."
    root = ScriptedLM([said, code("submit('never')")], name="root", context_window=16_384, max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    reading = reading_of(root)
    assert '`inputs["text"]` whole (' in reading and ": ZYVC" in reading
    assert '`inputs["text"]` whole, asked plainly (' in reading and "HZYVC, KPQZE, AMLRT, WOXNB, JDFUS" in reading
    # prose restating the plain asking's answer whole is the answer, as for any reading answer
    assert result.status == "submitted" and result.answer == "HZYVC, KPQZE, AMLRT, WOXNB, JDFUS"
    assert len(root.requests) == 1
    # the items the readings list (numbers, codes in capitals) that the text holds: an answer holding some of them
    # goes back once with the list (recorded on e3f3a65, vt 8K instance 0: the root's regex found the variable assigned
    # directly, `['HZYVC']`, and the run went on without the other four)
    direct_only = code("import re\nprint(re.findall(r'VAR (\\w+) = 41551', inputs['text']))")
    every = code("submit(['HZYVC', 'KPQZE', 'AMLRT', 'WOXNB', 'JDFUS'])")
    root = ScriptedLM([direct_only, code("submit(['HZYVC'])"), every], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(sub_model, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(question, text=text)
    rejected = result.trajectory.of(GuardRejected)
    assert [g.guard for g in rejected] == ["partial"]
    assert "holds 1 of the 5 answers the first reading found reading the whole text: HZYVC, KPQZE" in rejected[0].reason
    assert result.answer == ["HZYVC", "KPQZE", "AMLRT", "WOXNB", "JDFUS"]
    # the output that showed one of them said so when it was shown (recorded on a562385, the same instance: after
    # `['HZYVC']` the root said no variable matched and never submitted); a rejected submission's note is its own
    first, second = observations(root)[:2]
    assert first.endswith("[note] This output shows 1 of the 5 answers the first reading found reading the whole "
                          "text (HZYVC), not KPQZE, AMLRT, WOXNB, JDFUS. If the question asks for all of them, check "
                          "those with code or submit all 5.")
    assert "This output shows" not in second
    # an echo of the question's words is marked on the plain line too, and is no answer
    sub = ScriptedLM(lambda m: "ZYVC" if str(m[-1]["content"]).startswith("Read") else "variables assigned value",
                     name="sub", context_window=16_384, max_output_tokens=120)
    root = ScriptedLM([code("submit('x')")], name="root", context_window=16_384, max_output_tokens=400)
    RLM(root, sub, sandbox="local", evidence_check=False).run(question, text=text)
    assert "asked plainly" in reading_of(root) and "[not in the text: the question's own words]" in reading_of(root)


def test_a_failed_reading_leaves_the_run_as_without_it() -> None:
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("server down")

    root = ScriptedLM([code("print(1)"), code("submit('x')")], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(broken, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local", evidence_check=False, max_retries=0).run(QUESTION, text=haystack(200))
    assert not reading_of(root)
    assert result.status == "submitted"
    assert len(result.trajectory.of(SubCallFinished)) == 3  # the named place, the reading, the plain asking: all failed


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
    result, root, _ = run(["1234567", code("print(1)"), code("submit('x')")], haystack(200), evidence_check=False)
    assert result.answer == "x"  # a bare value the reading did not give is not an answer


def test_the_fallback_shows_the_first_reading_beside_the_outputs() -> None:
    # recorded (RULER niah_single_2, 8k): the reading answered 7067228, the root looped on a comment-only step and
    # the fallback, shown only the essay's first lines, answered "5"
    idle = code("# No output needed for this step\npass")
    result, root, _ = run([code("print(inputs['text'][:30])"), idle, idle, idle, "4015985"], haystack(200),
                          max_iterations=3, repeat_asks=1)
    assert result.status == "fallback"
    last = str(root.requests[-1][-1]["content"])
    assert "The first reading answered:\n- `inputs[\"text\"]` whole" in last and "4015985" in last
    assert last.startswith("Your reply repeated turn 2's again")  # asked again, it sent the step again
    reask = str(root.requests[3][-1]["content"])  # turn 3 sent turn 2's code: asked again, shown the reading
    ask = reask[reask.index("Do not send the code of turn 2 again"):]
    assert "[note] The first reading answered:" in ask
    # a failing step sent again runs (the retry may be the point): its stall note shows the reading too
    bad = code("print(inputs['report'])")
    result, root, _ = run([code("print(inputs['text'][:30])"), bad, bad, "4015985"], haystack(200), max_iterations=3)
    stalled = str(root.requests[3][-2]["content"])
    assert "same code as turn 2" in stalled and "[note] The first reading answered:" in stalled
    assert "If one of these answers the question, submit it." in stalled
    assert str(root.requests[3][-1]["content"]).startswith("You have used all 3 steps.")


def test_prose_restating_the_readings_answer_is_the_answer() -> None:
    # recorded (RULER niah_single_2 and niah_multikey_1, 8k): turn 1 replied "The special magic number for
    # tangy-midnight mentioned in the provided text is 7067228.", the reading's answer; it was told its value was a
    # guess, then ran the example first step seven times, and only the fallback gave the number
    sentence = "The special magic number for furtive-donation mentioned in the provided text is 4015985."
    result, root, _ = run([sentence, code("submit('never')")], haystack(200))
    # the answer is the reading's, not the sentence around it (recorded, `rlmnb eval` niah 8k: "The special magic
    # number for scarlet jackal is 1892269." for "Answer with the 7-digit number only" scored 0 by exact match)
    assert result.status == "submitted" and result.answer == "4015985" and len(root.requests) == 1
    assert restated(sentence, ["4015985"]) == "4015985"
    assert restated("Both: 4015985 and 7067228.", ["4015985", "7067228"]) == "Both: 4015985 and 7067228."
    assert restated("It is 4015985.", ["NOT FOUND", "4015985", " 4015985 "]) == "4015985"
    assert restated("It is 1234567.", ["4015985"]) is None and restated("x" * 500 + " 4015985", ["4015985"]) is None
    # prose stating another value is not an answer; its note says how to submit rather than calling it a guess
    other = "The special magic number is 1234567, I think."
    result, root, _ = run([other, code("print(1)"), code("submit('x')")], haystack(200), evidence_check=False)
    assert result.answer == "x"
    # a part that said NOT FOUND gives nothing to restate
    result, root, _ = run(["NOT FOUND", code("print(1)"), code("submit('x')")], haystack(900), evidence_check=False)
    assert result.answer == "x"


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


def test_a_run_out_of_time_after_its_reading_answers_with_the_reading_when_its_answers_agree() -> None:
    # recorded (bench/realmodel.py's needle on 31f41fc, max_time 300 s, Qwen2.5-Coder 1.5B on this CPU): the reading
    # and the plain asking both said "2204211" in 454 s; the root's first call was refused and the run had no answer
    import time

    def slow(reply: str) -> Any:
        def answer(messages: list[Message]) -> str:
            prompt = str(messages[-1]["content"])
            if prompt.startswith("A passage taken from a long text"):
                return "NONE"  # the named place does not answer: the text is read
            time.sleep(0.7)  # the two together take longer than the run's max_time: the root's first call is refused
            return "4015985" if prompt.startswith("Read") or reply == "same" else reply
        return answer

    result, root, sub = run([code("submit('never')")], haystack(200), sub_model=slow("same"), max_time=1.2)
    assert not root.requests and len(sub.requests) == 3
    assert result.status == "fallback" and result.answer == "4015985"
    assert "The answer is the first reading's; the model did not check it." in result.reason
    assert "Time budget exhausted" in result.reason
    # readings that disagree give no answer
    result, root, sub = run([code("submit('never')")], haystack(200), sub_model=slow("1234567"), max_time=1.2)
    assert result.status == "budget_exhausted" and result.answer is None and not root.requests


def test_an_answer_without_the_answer_a_text_read_twice_gave_goes_back_once() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, on 879f369): both readings said "7067228"; turn 1 guessed "is 4"
    # from the preview, turn 3 counted the word "regrets" and printed "... is: 4", turn 4 submitted that count, which
    # the evidence check lets through (the code computed it)
    guess = "The special magic number for furtive-donation is 4."
    count = code("import re\nspecial_magic_number = len(re.findall(r'\\bgreen\\b', inputs['text'][:300]))\n"
                 "print(f'The special magic number for furtive-donation is: {special_magic_number}')")
    steps = [guess, count, code("submit(special_magic_number)"), code("submit('4015985')")]
    result, root, _ = run(steps, haystack(200))
    rejected = result.trajectory.of(GuardRejected)
    assert [r.guard for r in rejected] == ["reading"]
    assert rejected[0].reason.startswith("submit() was not accepted yet: the first reading read the whole text twice, "
                                         "with two different prompts, and both times answered `4015985`; your "
                                         "answer 4 does not hold it.")
    assert result.status == "submitted" and result.answer == "4015985"
    # once per run: sent again, the code's answer stands (it may have shown the reading wrong)
    result, _, _ = run([count, code("submit(special_magic_number)"), code("submit(special_magic_number)")],
                       haystack(200))
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["reading"] and result.answer == 4
    # an answer holding the reading's, or readings that disagree, are not sent back
    result, _, _ = run([code("submit('4015985')")], haystack(200))
    assert not result.trajectory.of(GuardRejected) and result.status == "submitted"
    plain = parts_then_passages(lambda part: "4015985" if NEEDLE in part else "None", places=False)
    differ = lambda messages: "1234567" if "Answer the question" in str(messages[-1]["content"]) else plain(messages)  # noqa: E731
    root = ScriptedLM([count, code("submit(special_magic_number)")], name="root", context_window=16_384,
                      max_output_tokens=400)
    sub = ScriptedLM(differ, name="sub", context_window=16_384, max_output_tokens=120)
    result = RLM(root, sub, sandbox="local").run(QUESTION, text=haystack(200))
    assert not result.trajectory.of(GuardRejected) and result.answer == 4


def test_an_answer_from_a_sub_call_given_only_the_question_goes_back_once() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, resumed on d92f852): sent back by guard `reading`, turn 5 ran
    # llm_query() on the question reworded, with none of the text; the sub-model said "... is 12", the step printed
    # it and turn 6 submitted 12, which the evidence check let through (a sub-call's reply counted as evidence)
    def guessing(messages: list[Message]) -> str:
        prompt = str(messages[-1]["content"])
        return "The special magic number for furtive-donation is 12." if len(prompt) < 200 else reader(messages)

    count = code("import re\nspecial_magic_number = len(re.findall(r'\\bgreen\\b', inputs['text'][:300]))\n"
                 "print(f'The special magic number for furtive-donation is: {special_magic_number}')")
    ask = code('new_prompt = "What is the special magic number for furtive-donation mentioned in the provided text?"\n'
               "new_answer = llm_query(new_prompt)\nprint(f'The new answer from the re-read is: {new_answer}')")
    steps = [count, code("submit(special_magic_number)"), ask, code("submit(12)"), code("submit('4015985')")]
    result, root, _ = run(steps, haystack(200), sub_model=guessing)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["reading", "guessed"]
    assert "[note] This step's sub-model call had only the question in its prompt." in observations(root)[2]
    assert result.trajectory.of(GuardRejected)[1].reason.startswith(
        "submit(12) was not accepted yet: that value came from the sub-model call at turn 3, whose prompt held only "
        "the question and none of the input")
    assert result.status == "submitted" and result.answer == "4015985"
    # without a reading (window unknown): computed, not typed, it goes back the same way; once per run, so sent
    # again it is taken
    steps = [ask, code("submit(int(new_answer.rstrip('.').split()[-1]))"), code("submit(12)")]
    result, _, _ = run(steps, haystack(200), sub_model=guessing, window=None)
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["guessed"] and result.answer == 12
    # stated in prose, it is no answer real output showed: the run goes on
    find = code("i = inputs['text'].find('furtive-donation is')\nprint(inputs['text'][i:i + 40])")
    result, _, _ = run([ask, "12", find, code("submit(4015985)")], haystack(200), sub_model=guessing, window=None)
    assert result.answer == 4015985 and not result.trajectory.of(GuardRejected)
    # a prompt carrying a part of the text is a reading, and its reply is evidence
    read = code("new_answer = llm_query('What is the special magic number for furtive-donation? ' + "
                "inputs['text'][-3000:])\nprint(new_answer)")
    result, root, _ = run([read, code("submit(new_answer)")], haystack(200), sub_model=guessing, window=None)
    assert not result.trajectory.of(GuardRejected) and "had only the question" not in observations(root)[0]


FIND_CODE = code("i = inputs['text'].find('furtive-donation is')\nprint(inputs['text'][i:i + 40])")


def test_a_reply_without_code_holding_none_of_the_readings_answers_is_shown_them_again_last() -> None:
    # recorded (RULER niah_single_2 at 8K, instance 0, on a562385): both readings said "7067228"; the root said the
    # number "is 4" (from the preview) in prose at turns 1, 4, 7 and 8, told each time only that prose is a guess
    guess = "The special magic number for furtive-donation is 4."
    result, root, _ = run([guess, "Let me look at the text first.", code("submit('4015985')")], haystack(200))
    first, second = observations(root)[:2]
    for obs in (first, second):
        tail = obs.splitlines()[-3:]
        assert tail[0] == "[note] The first reading answered:" and "read twice" in tail[1] and "4015985" in tail[1]
        assert tail[2] == "If one of these answers the question, submit it."
    assert result.answer == "4015985"
    # without code, a reply that holds no answer of a reading that has none is not shown it (nothing to show)
    result, root, _ = run(["Let me look at the text first.", FIND_CODE, code("submit('4015985')")], haystack(200),
                          sub_model=lambda m: "NOT FOUND")
    assert "The first reading answered" not in observations(root)[0] and result.answer == "4015985"


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
