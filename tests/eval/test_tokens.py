"""Tokens per answer as a first-class figure: root input, root output and sub-call tokens per instance,
in the result rows, the summary table and JSON, and the plot; real usage through the fake server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._eval import EvalSpec, Setup, format_table, plot_summary, read_rows, run_eval, summarise
from rlmnb._eval.oracles import OracleModel
from rlmnb._eval.results import ResultRow
from rlmnb._eval.tokens import TokenSplit
from rlmnb._ground.usage import Usage


def test_split_from_usage_is_certain_only_without_sub_calls() -> None:
    assert TokenSplit.from_usage(Usage(root_calls=1, input_tokens=900, output_tokens=30)) == TokenSplit(900, 30, 0)
    assert TokenSplit.from_usage(Usage(root_calls=2, sub_calls=3, input_tokens=900, output_tokens=30)) is None
    split = TokenSplit.from_sub_usages(Usage(input_tokens=1000, output_tokens=100),
                                       [{"input_tokens": 300, "output_tokens": 20}, {"prompt_tokens": 100,
                                                                                      "completion_tokens": 5}])
    assert split == TokenSplit(600, 75, 425)


def test_old_result_rows_load_without_a_split() -> None:
    row = ResultRow.from_dict({"task": "niah", "size": 8000, "method": "rlms", "index": 0, "seed": 0, "model": "m",
                               "sub_model": "m", "input_tokens": 5})
    assert row.root_input_tokens is None and row.sub_tokens is None


def test_tokens_per_answer_in_rows_table_json_and_plot(fake_server_factory: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    server = fake_server_factory(responder=OracleModel())
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/tok-root", api_base=server.url, api_key="k")
    sub = LiteLLM("openai/tok-sub", api_base=server.url, api_key="k")
    spec = EvalSpec(tasks=["niah", "oolong"], sizes=["8k"], methods=["rlm", "rlm_no_sub", "direct"],
                    setup=Setup(root, sub, {"sandbox": "local"}, context_window=32_000), n=1, out=tmp_path)
    report = run_eval(spec)
    rows = {(r.task, r.method): r for r in read_rows(tmp_path / "results.jsonl")}
    assert len(rows) == 6 and all(r.score == 1.0 for r in rows.values())
    for row in rows.values():
        assert row.root_input_tokens is not None and row.root_output_tokens is not None and row.sub_tokens is not None
        assert row.root_input_tokens + row.root_output_tokens + row.sub_tokens == row.input_tokens + row.output_tokens
        assert row.root_input_tokens > 0 and row.root_output_tokens > 0
    assert rows[("oolong", "rlm")].sub_tokens > 0 and rows[("oolong", "rlm")].sub_calls >= 1
    assert rows[("niah", "direct")].sub_tokens == 0 and rows[("oolong", "rlm_no_sub")].sub_tokens == 0
    # the server's own count agrees with the rows' total (every request was one of these runs)
    stats = server.stats()
    assert stats["prompt_tokens"] == sum(r.input_tokens for r in rows.values())
    assert stats["completion_tokens"] == sum(r.output_tokens for r in rows.values())
    summary = summarise(report.rows)
    table = format_table(summary)
    head = table.splitlines()[0]
    assert "root in" in head and "root out" in head and "sub tokens" in head
    cell = next(s for s in summary if s.task == "oolong" and s.method == "rlm")
    assert cell.sub_tokens == rows[("oolong", "rlm")].sub_tokens
    assert json.loads(json.dumps([s.to_dict() for s in summary]))[0]["root_input"] is not None
    pytest.importorskip("matplotlib")
    assert plot_summary(summary, tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_table_shows_a_dash_where_a_peer_has_no_split() -> None:
    row = ResultRow(task="niah", size=8000, method="rlms", index=0, seed=0, model="m", sub_model="m", score=1.0,
                    status="submitted", root_calls=0, sub_calls=4, input_tokens=900, output_tokens=40)
    line = format_table(summarise([row])).splitlines()[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[7:12] == ["940", "940", "-", "-", "-"], cells


def test_tokens_per_point_is_what_one_right_answer_cost() -> None:
    def row(index: int, score: float, tokens: int) -> ResultRow:
        return ResultRow(task="niah", size=8000, method="rlm", index=index, seed=0, model="m", sub_model="m",
                         score=score, status="submitted", input_tokens=tokens)
    cell, = summarise([row(0, 1.0, 3_000), row(1, 0.5, 1_500), row(2, 0.0, 1_500)])
    assert cell.tokens == 2_000 and cell.tokens_per_point == 4_000  # 6,000 tokens for 1.5 points
    nothing, = summarise([row(0, 0.0, 900)])
    assert nothing.tokens_per_point is None
    cells = [c.strip() for c in format_table([nothing]).splitlines()[2].strip("|").split("|")]
    assert cells[7:9] == ["900", "-"], cells
