"""The ordinary questions (`rlmnb eval --task ordinary`): datasets made by seed, answers that hold, the
metrics that accept ordinary answer forms, and one row run end to end through the eval runner.

The checks recompute every answer with code of their own (plain Python over records, regular expressions
over the raw text), never with the family's answer functions.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from typing import Any

import pandas as pd
import pytest

from rlmnb._eval import EvalSpec, Setup, plan, run_eval
from rlmnb._eval.methods import DirectMethod
from rlmnb._eval.tasks import get_task
from rlmnb._eval.tasks.base import expand_tasks
from rlmnb._eval.tasks.metrics import get_metric
from rlmnb._eval.tasks.ordinary import AREAS, CODES, NAMES, QUESTIONS, contract, log, tickets
from rlmnb._eval.tasks.rows import Row
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.tokens import count_tokens
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM

SEEDS = (0, 1, 2)


def answers_of(seed: int) -> dict[str, Any]:
    """Question id -> the answer the task states for `seed`."""
    task = get_task("ordinary")
    out = {}
    for index in range(task.count(8000)):  # type: ignore[attr-defined]
        instance = task.generate(8000, seed=seed, index=index)
        (out[instance.meta["id"]],) = instance.answer
    return out


# ---- the task and its names ---------------------------------------------------------------------

def test_ordinary_names_twelve_questions_and_a_task_per_dataset() -> None:
    assert get_task("ordinary").count(32000) == 12  # type: ignore[attr-defined]
    assert [get_task(f"ordinary:{name}").count(32000) for name in NAMES] == [5, 3, 4]  # type: ignore[attr-defined]
    assert expand_tasks(["ordinary:all"]) == ["ordinary:tickets", "ordinary:contract", "ordinary:log"]
    spec = EvalSpec(tasks=["ordinary"], sizes=["8k", "32k"], methods=["rlm", "direct"], setup=Setup("x"),
                    n=20).checked()
    jobs = plan(spec)
    assert {(job.size, job.method) for job in jobs} == {(8000, "rlm"), (8000, "direct")}  # the first size only
    assert sorted(job.index for job in jobs if job.method == "rlm") == list(range(12))
    with pytest.raises(ConfigError):
        get_task("ordinary:weather")


def test_datasets_are_pure_functions_of_the_seed() -> None:
    pd.testing.assert_frame_equal(tickets(4), tickets(4))
    assert log(4) == log(4)
    assert contract.__wrapped__(4) == contract.__wrapped__(4)  # type: ignore[attr-defined]
    assert not tickets(4).equals(tickets(5))
    assert log(4) != log(5) and contract(4).text != contract(5).text
    assert answers_of(4) == answers_of(4)


# ---- the data holds what the answers say --------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_tickets_hold_the_answers(seed: int) -> None:
    frame = tickets(seed)
    records = frame.to_dict("records")
    assert list(frame.columns) == ["id", "area", "created", "priority", "text"] and len(records) == 200
    assert [r["id"] for r in records] == [f"T-{i:04d}" for i in range(1, 201)]
    assert {r["area"] for r in records} <= set(AREAS) and {r["priority"] for r in records} <= {1, 2, 3, 4, 5}
    days = [r["created"].date() for r in records]
    assert len(set(days)) == 200 and all(dt.date(2022, 1, 1) <= d <= dt.date(2023, 12, 31) for d in days)

    answers = answers_of(seed)
    assert answers["tickets-billing"] == sum(1 for r in records if r["area"] == "billing")
    (top, most), (_, second) = Counter(r["area"] for r in records).most_common(2)
    assert most > second and answers["tickets-top-area"] == top
    urgent = [r for r in records if r["priority"] == max(x["priority"] for x in records)]
    assert answers["tickets-first-urgent"] == min(urgent, key=lambda r: r["created"])["id"]
    assert answers["tickets-2021"] == ("yes" if any(d.year == 2021 for d in days) else "no") == "no"
    assert answers["tickets-earliest"] == min(days).isoformat()


@pytest.mark.parametrize("seed", SEEDS)
def test_contract_holds_the_answers(seed: int) -> None:
    text = contract(seed).text
    assert 30_000 <= count_tokens(text) <= 37_000
    headings = re.findall(r"^(\d+)\. .+$", text, re.M)
    assert [int(n) for n in headings] == list(range(1, len(headings) + 1)) and len(headings) > 50
    paragraphs = text.split("\n\n")
    about_refunds = [p for p in paragraphs if "refund" in p.lower()]
    assert len(about_refunds) == 1
    (days,) = re.findall(r"within (\d+) days", about_refunds[0])

    answers = answers_of(seed)
    assert answers["contract-refund-days"] == int(days) == 60
    quote = answers["contract-refund-quote"]
    assert quote in about_refunds[0] and f"within {days} days" in quote and "written request" in quote
    other_counts = {int(n) for p in paragraphs if p is not about_refunds[0] for n in re.findall(r"(\d+) days", p)}
    assert len(other_counts) >= 5 and int(days) not in other_counts  # distractors: other day counts elsewhere
    assert "crypto" not in text.lower() and answers["contract-crypto"] == []


@pytest.mark.parametrize("seed", SEEDS)
def test_log_holds_the_answers(seed: int) -> None:
    lines = log(seed).splitlines()
    errors = [line for line in lines if line.split()[2] == "ERROR"]
    others = [line for line in lines if line.split()[2] in ("INFO", "WARN")]
    assert len(errors) == 37 and 2_900 <= len(others) <= 3_100 and len(errors) + len(others) == len(lines)
    codes = [re.search(r"\bE\d{3}\b", line).group(0) for line in errors]  # type: ignore[union-attr]
    assert not any(re.search(r"\bE\d{3}\b", line) for line in others)
    assert set(codes) <= set(CODES) and 3 <= len(set(codes)) <= 5
    stamps = [line[:19] for line in lines]
    assert stamps == sorted(stamps)

    answers = answers_of(seed)
    assert answers["log-errors"] == len(errors) == 37
    assert answers["log-first-code"] == codes[0]
    assert answers["log-codes"] == sorted(set(codes))
    assert answers["log-share"] == round(100 * 37 / len(lines), 1)


# ---- binding --------------------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(12))
def test_every_row_binds_its_dataset(index: int) -> None:
    instance = get_task("ordinary").generate(32000, seed=0, index=index)
    dataset = instance.meta["dataset"]
    assert list(instance.inputs) == [dataset] and instance.tokens > 1_000
    fields, summary = bind_inputs(dict(instance.inputs), RLMConfig())
    (info,) = [f.info for f in fields]
    if dataset == "tickets":
        assert isinstance(instance.inputs["tickets"], pd.DataFrame)
        assert (info.kind, info.rows, info.columns) == ("table", 200, 5)
    else:
        assert info.kind == "text" and info.size_chars == len(instance.inputs[dataset])


def test_a_table_reaches_one_text_methods_as_csv() -> None:
    instance = get_task("ordinary:tickets").generate(8000, seed=0, index=0)
    frame = instance.inputs["tickets"]
    csv = frame.to_csv(index=False)
    assert instance.text == f"=== tickets ===\n{csv}" and instance.chars == len(csv)
    message, extra = DirectMethod().prompt(instance, Setup("x", context_window=200_000))
    assert extra["visible_fraction"] == 1 and all(ticket in message for ticket in frame["id"])


def test_a_row_refuses_an_input_that_is_neither_text_nor_table() -> None:
    with pytest.raises(TypeError):
        Row(id="r", question="q", inputs={"x": [1, 2]}, answers=[1])


# ---- scoring ordinary answer forms ----------------------------------------------------------------

def ordinary_forms(question_id: str, answer: Any) -> tuple[list[Any], list[Any]]:
    """Answers a person would give (right) and near misses (wrong) for a question whose answer is `answer`."""
    if question_id == "tickets-earliest":
        day = dt.date.fromisoformat(answer)
        other = day + dt.timedelta(days=1)
        return ([answer, f"{day:%B} {day.day}, {day.year}", f"The earliest ticket was created on {day.day} "
                 f"{day:%b} {day.year}.", f"{answer} 00:00:00", day],
                [other.isoformat(), f"{answer} or {other.isoformat()}", "January 2022"])
    if question_id == "tickets-2021":
        return (["No", "no", False, "No, there are none.", "There are no tickets from 2021."], ["Yes", True, "maybe"])
    if question_id == "contract-crypto":
        return ([[], "[]", "None", "No clause mentions cryptocurrency.", "None of the clauses mention it.",
                 "After reading every clause, none mentions cryptocurrency.", "I found no clause about it.",
                 "The contract doesn't mention cryptocurrency."],
                [[12], "Clause 12", "12, 40",
                 # claims first; a later negation does not make them empty answers (both given by a 1.5B root)
                 "The contract mentions cryptocurrency terms, but the specific terms and their positions are not "
                 "clear from the given text.",
                 "The contract mentions cryptocurrency in the following clauses:\n1. Term and termination: support\n"
                 "Either party may not terminate without notice."])
    if question_id == "log-codes":
        spoken = ", ".join(answer[:-1]) + " and " + answer[-1]
        return ([answer, list(reversed(answer)), str(answer), f"The codes are {spoken}."],
                [answer[:-1], [*answer, "E999"], f"The codes are {spoken} and E999."])
    if question_id == "contract-refund-quote":
        return ([answer, f'Clause: "{answer.replace(" days ", chr(10) + "days ")}"'],
                [answer.replace("60", "90"), "Refunds are due within 60 days."])
    if isinstance(answer, float):
        return ([answer, f"{answer}%", f"About {answer} per cent of the lines.", answer + 0.04],
                [answer + 0.1, f"{answer} or {answer + 1}"])
    if isinstance(answer, int):
        return ([answer, str(answer), f"There are {answer} of them.", float(answer), f"{answer:,}"],
                [answer + 1, f"{answer} or {answer + 1}", "many"])
    return ([answer, answer.upper(), f"{answer.capitalize()}, with many tickets.", f"It is {answer}."],
            [f"{answer}x", "none of them"])


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_each_question_accepts_ordinary_forms_and_refuses_near_misses(question: Any) -> None:
    task = get_task("ordinary")
    index = [q.id for q in QUESTIONS].index(question.id)
    instance = task.generate(8000, seed=0, index=index)
    (answer,) = instance.answer
    right, wrong = ordinary_forms(question.id, answer)
    assert [instance.score(p) for p in right] == [1.0] * len(right)
    assert [instance.score(p) for p in wrong] == [0.0] * len(wrong)
    assert instance.score(None) == 0.0 and instance.score({"answer": right[0]}) == 1.0


@pytest.mark.parametrize(("metric", "answers", "prediction", "score"), [
    ("number", [37], "12 or 37", 0.0),
    ("number", [503], "E503", 0.0),           # digits inside a code are not a number
    ("number", [1], "T-0001", 0.0),
    ("number", [3037], "3,037 lines", 1.0),
    ("number", [37], True, 0.0),
    ("number", [37], float("nan"), 0.0),
    ("word", ["T-0042"], "T-00421", 0.0),
    ("word", ["billing"], "BILLING", 1.0),
    ("yes_no", ["no"], "N/A", 0.0),
    ("yes_no", ["yes"], "It is true.", 1.0),
    ("date", ["2022-01-05"], "2022-13-45", 0.0),
    ("date", ["2022-01-05"], dt.datetime(2022, 1, 5, 9, 30), 1.0),
    ("date", ["2022-01-05"], "5th of January, 2022", 1.0),
    ("quote", ["Refunds are due."], "refunds are due.", 0.0),  # a quote keeps its case
    ("set", [["a1", "b2"]], {"b2", "a1"}, 1.0),
    ("set", [["E404"]], "E404, plus E500", 0.0),
])
def test_ordinary_metrics_edge_cases(metric: str, answers: list[Any], prediction: Any, score: float) -> None:
    assert get_metric(metric)(answers, prediction) == score


# ---- end to end -----------------------------------------------------------------------------------

def test_a_table_row_runs_end_to_end_and_scores_one() -> None:
    """The first question (billing tickets) through `run_eval`: the scripted root looks with sql() and submits
    what pandas computes, so the table is a table in the sandbox and the scorer takes a plain number."""
    root = ScriptedLM([
        "```python\nprint(sql(\"SELECT area, count(*) AS n FROM tickets GROUP BY area ORDER BY area\"))\n```",
        "```python\nsubmit(int((inputs['tickets']['area'] == 'billing').sum()))\n```",
    ], name="scripted-root")
    spec = EvalSpec(tasks=["ordinary"], sizes=["8k"], methods=["rlm"], setup=Setup(root, None, {"sandbox": "local"}),
                    n=1, seed=0)
    (row,) = run_eval(spec).rows
    assert (row.task, row.index, row.kind, row.status) == ("ordinary", 0, "number", "submitted")
    assert row.score == 1.0 and row.root_calls == 2
    assert row.extra["meta"]["id"] == "tickets-billing" and row.truth == f"[{answers_of(0)['tickets-billing']}]"
