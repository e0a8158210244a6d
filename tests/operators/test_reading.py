"""find_mentions and read_text: the reading strategies model code calls in the sandbox.

find_mentions is pure: its cases call it directly. read_text runs through RLM(...).run with a scripted root whose
code calls it and a scripted sub-model that answers from the text it is given, so every part passes the real
budget, limiter and events, and the sub-model's window reaches the sandbox as it does in a run; the contract
tests run in both sandboxes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb._operators import find_mentions, make_readers
from rlmnb._operators.reading import read_parts
from rlmnb._sandbox.base import RESERVED_NAMES
from rlmnb.events import BatchStarted, MapFinished, MapStarted, SubCallStarted
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")

SANDBOXES = ["local", pytest.param("kernel", marks=pytest.mark.integration)]


# ---- find_mentions ---------------------------------------------------------------------------------------------
LOG = ("2024-03-01 boot ok\n"
       "2024-03-02 disk sda1 at 91%\n"
       "2024-03-03 user Ada-Lovelace logged in from host ZX81\n"
       "2024-03-04 disk sda1 at 95%\n"
       "2024-03-05 disk sda1 at 99%\n"
       "2024-03-06 concatenate job done\n")


def test_passages_come_in_text_order_and_their_span_is_the_passage() -> None:
    found = find_mentions(LOG, ["ZX81", "boot"])
    assert [m["term"] for m in found] == ["boot", "ZX81"]
    for m in found:
        assert set(m) == {"term", "start", "end", "passage"}
        assert " ".join(LOG[m["start"]:m["end"]].split()) == m["passage"]
        assert m["term"].lower() in m["passage"].lower()


def test_a_term_named_more_than_rare_times_is_left_out() -> None:
    assert find_mentions(LOG, ["sda1"]) != []
    assert find_mentions(LOG, ["sda1"], rare=2) == []
    assert [m["term"] for m in find_mentions(LOG, ["sda1", "boot"], rare=2)] == ["boot"]


def test_terms_match_whole_words_ignoring_case() -> None:
    assert [m["passage"] for m in find_mentions(LOG, ["CONCATENATE"])] == ["2024-03-06 concatenate job done"]
    assert find_mentions(LOG, ["cat", "ate"]) == []


def test_a_question_as_terms_looks_for_the_names_it_asks_about() -> None:
    found = find_mentions(LOG, "From which host did Ada-Lovelace log in?")
    assert [m["term"] for m in found] == ["Ada-Lovelace"]
    assert "ZX81" in found[0]["passage"]


def test_two_terms_on_one_line_give_one_passage() -> None:
    found = find_mentions(LOG, ["Ada-Lovelace", "ZX81"])
    assert len(found) == 1 and "ZX81" in found[0]["passage"] and "Ada-Lovelace" in found[0]["passage"]


def test_width_bounds_a_passage_in_a_long_line() -> None:
    text = " ".join(f"word{i}" for i in range(400)) + " NEEDLE-7 " + " ".join(f"more{i}" for i in range(400))
    narrow, wide = find_mentions(text, ["NEEDLE-7"], width=40), find_mentions(text, ["NEEDLE-7"], width=400)
    assert len(narrow[0]["passage"]) < len(wide[0]["passage"]) <= 400 + 20
    assert all(m["end"] - m["start"] <= 440 for m in wide)


def test_without_terms_the_runs_question_is_used_when_the_sandbox_knows_it() -> None:
    readers = make_readers(bridge=None, run_question="Which host did Ada-Lovelace use?")
    assert [m["term"] for m in readers["find_mentions"](LOG)] == ["Ada-Lovelace"]
    with pytest.raises(ValueError):
        make_readers(bridge=None)["find_mentions"](LOG)


@pytest.mark.parametrize(("args", "kwargs", "error"), [
    ((b"bytes", ["x"]), {}, TypeError),
    ((LOG, 5), {}, TypeError),
    ((LOG, ["ok", 3]), {}, TypeError),
    ((LOG, []), {}, ValueError),
    ((LOG, ["  "]), {}, ValueError),
    ((LOG, "how many lines are there?"), {}, ValueError),  # a question without names
    ((LOG,), {}, ValueError),  # no terms and no question
    ((LOG, ["boot"]), {"width": 0}, ValueError),
    ((LOG, ["boot"]), {"rare": 0}, ValueError),
    ((LOG, ["boot"]), {"rare": True}, ValueError),
])
def test_bad_arguments_are_refused_in_one_sentence(args: tuple[Any, ...], kwargs: dict[str, Any],
                                                  error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        find_mentions(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and message.endswith(".")


def test_both_functions_are_reserved_sandbox_names() -> None:
    assert {"find_mentions", "read_text"} <= RESERVED_NAMES


# ---- the parts read_text reads ------------------------------------------------------------------------------
def test_parts_are_cut_at_line_breaks_and_cover_the_text_exactly() -> None:
    text = "".join(f"line {i} of a long log with some words in it\n" for i in range(200))
    spans = read_parts(text, 200, None)
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(text[end - 1] == "\n" for _, end in spans)
    assert len(read_parts(text, 200, len(spans) + 3)) == len(spans) + 3


@pytest.mark.parametrize("parts", [1, 20_000])
def test_parts_too_few_for_the_window_or_more_than_the_characters_are_refused(parts: int) -> None:
    text = "word " * 2_000
    with pytest.raises(ValueError):
        read_parts(text, 200, parts)


# ---- read_text through a run -----------------------------------------------------------------------------------
CODE = "73914"
QUESTION = "What is the access code for the vault?"
FILLER = "The staff met on a quiet morning and went through the plans for the new building, floor by floor.\n"


def document(lines: int = 60, at: int = 41) -> str:
    """A text of `lines` filler lines with the answer on line `at`."""
    body = [FILLER] * lines
    body[at] = f"Note: the access code for the vault is {CODE}.\n"
    return "".join(body)


def reader(messages: list[dict[str, Any]]) -> str:
    """A sub-model that answers from the text it is given: the code where its text holds one, else a made-up one."""
    prompt = str(messages[-1]["content"])
    text = re.search(r"<text>\n(.*)\n</text>", prompt, re.S)
    assert text is not None, prompt
    found = re.search(r"access code for the vault is (\d+)", text.group(1))
    return found.group(1) if found else "11111"


def run_reading(body: str, *, sandbox: str = "local", doc: str | None = None, **kw: Any) -> Any:
    """Run `body` as the root model's second step (the first only looks), submitting `out`."""
    root = ScriptedLM([code("print(len(inputs['doc']))"), code(body + "\nsubmit(out)")], name="root")
    sub = kw.pop("sub", None) or ScriptedLM(reader, name="sub")
    kw.setdefault("max_llm_calls", 100)
    rlm = RLM(root, sub, sandbox=sandbox, cache=False, **kw)
    result = rlm.run("Find the vault's access code.", doc=document() if doc is None else doc)
    assert result.status == "submitted", result
    return result


def prompts_of(result: Any) -> list[str]:
    return [e.prompt for e in result.trajectory.of(SubCallStarted)]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_parts_fit_the_sub_models_window_cover_the_text_and_go_in_one_batch(sandbox: str) -> None:
    doc = document()
    result = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})", sandbox=sandbox,
                         max_sub_prompt_tokens=500)
    parts = result.answer
    assert len(parts) > 1 and [p["part"] for p in parts] == list(range(1, len(parts) + 1))
    assert all(p["of"] == len(parts) for p in parts)
    assert parts[0]["start"] == 0 and parts[-1]["end"] == len(doc)
    assert all(a["end"] == b["start"] for a, b in zip(parts, parts[1:], strict=False))
    holding = [p for p in parts if CODE in doc[p["start"]:p["end"]]]
    assert [(p["answer"], p["held"]) for p in holding] == [(CODE, True)]
    assert all(p["answer"] == "11111" and p["held"] is False for p in parts if p not in holding)
    trajectory = result.trajectory
    assert len(trajectory.of(BatchStarted)) == 1 and len(prompts_of(result)) == len(parts)
    assert [e.operator for e in trajectory.of(MapStarted)] == ["read_text"]
    finished = trajectory.of(MapFinished)
    assert [(e.items, e.calls, e.failures, e.stopped) for e in finished] == [(len(parts), len(parts), 0, None)]


def test_the_window_of_the_sub_model_itself_sets_the_parts() -> None:
    doc = document(lines=200, at=150)
    small = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})", doc=doc,
                        sub=ScriptedLM(reader, name="sub", context_window=1_500))
    large = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})", doc=doc,
                        sub=ScriptedLM(reader, name="sub", context_window=20_000))
    assert len(small.answer) > 1 and len(large.answer) == 1
    assert [p["answer"] for p in large.answer] == [CODE] and large.answer[0]["held"] is True
    assert any(p["held"] for p in small.answer)


def test_each_prompt_states_the_question_before_and_after_the_text() -> None:
    result = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})", max_sub_prompt_tokens=500)
    doc = document()
    for prompt, part in zip(prompts_of(result), result.answer, strict=True):
        body = doc[part["start"]:part["end"]]
        at = prompt.index(body)
        assert QUESTION in prompt[:at] and QUESTION in prompt[at + len(body):]


def test_parts_given_cut_the_text_into_exactly_that_many() -> None:
    result = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r}, parts=3)")
    assert [(p["part"], p["of"]) for p in result.answer] == [(1, 3), (2, 3), (3, 3)]
    assert len(prompts_of(result)) == 3


def test_a_text_that_fits_is_read_whole_in_one_call() -> None:
    result = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})")
    assert [(p["part"], p["of"], p["answer"], p["held"]) for p in result.answer] == [(1, 1, CODE, True)]


def test_a_failed_part_is_an_error_string_with_nothing_to_check() -> None:
    def failing(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("the server is down")

    result = run_reading(f"out = read_text(inputs['doc'], {QUESTION!r})", sub=ScriptedLM(failing, name="sub"))
    [part] = result.answer
    assert part["answer"].startswith("[error]") and part["held"] is None
    assert [e.failures for e in result.trajectory.of(MapFinished)] == [1]


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize(("call", "error"), [
    ("read_text(123, 'What is the code?')", "TypeError"),
    ("read_text(inputs['doc'], '  ')", "ValueError"),
    ("read_text(inputs['doc'], ['What is the code?'])", "TypeError"),
    ("read_text(inputs['doc'], 'What is the code?', parts=0)", "ValueError"),
    ("read_text(inputs['doc'], 'What is the code?', parts='2')", "ValueError"),
    ("read_text(inputs['doc'], 'What is the code?', parts=1)", "ValueError"),  # fewer than the window needs
    ("find_mentions(inputs['doc'], 7)", "TypeError"),
])
def test_bad_arguments_fail_before_any_sub_call(sandbox: str, call: str, error: str) -> None:
    body = (f"try:\n    {call}\n    out = 'no error'\nexcept Exception as exc:\n"
            "    out = [type(exc).__name__, str(exc)]")
    result = run_reading(body, sandbox=sandbox, max_sub_prompt_tokens=500)
    kind, message = result.answer
    assert kind == error and "\n" not in message.strip()
    assert prompts_of(result) == []
