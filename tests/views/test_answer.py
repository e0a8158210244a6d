"""Answers shown as what they are: Markdown text, tables, JSON in the run's own key order."""

from __future__ import annotations

import json

from rlmnb.views._answer import (
    TABLE_ROWS,
    answer_body_html,
    answer_json,
    answer_kind,
    as_table,
    markdown_html,
)
from rlmnb.views._mime import compact_trajectory

PRE = "white-space:pre-wrap"


def test_text_is_markdown_and_raw_html_stays_text() -> None:
    body = answer_body_html("**Billing** leads:\n\n- refunds\n- $5 fees <img src=x onerror=alert(1)>", pre_style=PRE)
    assert 'data-kind="markdown"' in body and "<strong>Billing</strong>" in body and "<li>refunds</li>" in body
    assert "<img" not in body and "&lt;img" in body  # hostile markup is shown, never run
    assert markdown_html("a | b\n--|--\n1 | 2") is not None and "<table>" in str(markdown_html("a | b\n--|--\n1 | 2"))


def test_records_and_columns_are_tables() -> None:
    records = [{"area": "billing", "n": 12}, {"area": "login", "n": 3, "note": "x"}]
    assert as_table(records) == (["area", "n", "note"], [["billing", 12, None], ["login", 3, "x"]])
    assert as_table({"area": ["a", "b"], "n": [1, 2]}) == (["area", "n"], [["a", 1], ["b", 2]])
    assert answer_kind(records) == "table" and answer_kind({"a": [1], "b": [1, 2]}) == "json"
    assert answer_kind([{"nested": {"x": 1}}]) == "json" and answer_kind(42) == "json"
    body = answer_body_html(records, pre_style=PRE)
    assert body.count("<tr>") == 3 and "<th" in body and "billing" in body and "text-align:right" in body
    many = answer_body_html([{"i": i} for i in range(TABLE_ROWS + 5)], pre_style=PRE)
    assert many.count("<tr>") == TABLE_ROWS + 1 and "5 more rows" in many


def test_json_keeps_the_runs_key_order_even_after_a_notebook_sorts_its_keys() -> None:
    answer = {"zeta": 1, "alpha": {"b": 2, "a": 1}}
    assert answer_json(answer).index("zeta") < answer_json(answer).index("alpha")
    body = answer_body_html(answer, pre_style=PRE)
    assert 'data-kind="json"' in body and body.index("zeta") < body.index("alpha")
    from rlmnb.events import EventBus, RunFinished, RunScope, RunStarted

    bus = EventBus()
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="m", sandbox="local")
    bus.emit(RunFinished, scope, status="submitted", answer=answer)
    saved = json.loads(json.dumps(compact_trajectory(bus.trajectory), sort_keys=True))  # as nbformat writes it
    finished = saved["events"][-1]
    assert list(finished["answer"]) == ["alpha", "zeta"]  # the notebook sorted the object...
    assert list(json.loads(finished["answer_json"])) == ["zeta", "alpha"]  # ...the text kept the run's order
