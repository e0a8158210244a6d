"""Offline proofs of the evaluation harness with oracle models that know the generators.

- an oracle root (real code: slicing, llm_query_batched, aggregation) and oracle sub-model score 100 %;
- a sub-model that mislabels a known, seeded fraction of records gives the score those errors imply;
- `direct` with a small window scores what the visible prefix allows;
- `rlm_no_sub` on OOLONG reaches no more than the best keyword rule (code alone).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rlmnb._eval import EvalSpec, Setup, format_table, plan, plot_summary, read_rows, run_eval, summarise
from rlmnb._eval.methods import DirectMethod, RLMMethod
from rlmnb._eval.oracles import OracleModel, mislabelled, parse_question, read_answer, wrong_label
from rlmnb._eval.runner import run_one
from rlmnb._eval.tasks import TASK_NAMES, generate
from rlmnb._eval.tasks.oolong import LABELS, answer_for, category_words, pairs_for, parse_line
from rlmnb.events import PolicyActed
from rlmnb.testing import ScriptedLM


def oracle_setup(error_rate: float = 0.0, window: int | None = None) -> Setup:
    oracle = OracleModel(error_rate=error_rate)
    return Setup(ScriptedLM(oracle, name="oracle-root"), ScriptedLM(oracle, name="oracle-sub"),
                 {"sandbox": "local"}, context_window=window)


@pytest.mark.parametrize("size", ["8k", "256k"])
def test_oracle_rlm_scores_100_percent_on_every_task(size: str) -> None:
    spec = EvalSpec(tasks=TASK_NAMES, sizes=[size], methods=["rlm"], setup=oracle_setup(), n=2, seed=7)
    report = run_eval(spec)
    assert len(report.rows) == len(TASK_NAMES) * 2
    for row in report.rows:
        assert row.status == "submitted", row
        assert row.score == 1.0, row
        assert row.sub_calls >= 1 and row.root_calls == 3


def test_oracle_rlm_scores_100_percent_at_one_million_tokens() -> None:
    spec = EvalSpec(tasks=["oolong", "multihop"], sizes=["1m"], methods=["rlm"], setup=oracle_setup(), n=1)
    assert [row.score for row in run_eval(spec).rows] == [1.0, 1.0]


def test_erring_sub_model_gives_the_score_its_errors_imply() -> None:
    """10 % of records mislabelled (seeded): scores match the answers those labels give, exactly.

    Tolerance stated: the realised error fraction is within 3 sigma of 10 % (binomial), and each
    score equals the scorer applied to the answer computed from the erred labels (to 1e-9).
    """
    rate = 0.1
    setup = oracle_setup(error_rate=rate)
    for task, index in (("oolong", 0), ("oolong", 1), ("oolong_pairs", 0), ("oolong_pairs", 2)):
        inst = generate(task, "32k", seed=5, index=index)
        records = inst.data
        truth = records.label_names()
        erred = [wrong_label(t) if mislabelled(i, rate) else t for i, t in zip(records.ids.tolist(), truth,
                                                                                   strict=True)]
        wrong = sum(a != b for a, b in zip(truth, erred, strict=True)) / len(truth)
        sigma = (rate * (1 - rate) / len(truth)) ** 0.5
        assert abs(wrong - rate) < 3 * sigma
        params = inst.meta["params"]
        if task == "oolong":
            expected_answer = answer_for(inst.kind, {lab: erred.count(lab) for lab in LABELS}, dict(params))
        else:
            expected_answer = pairs_for(records.ids.tolist(), records.users.tolist(), erred, params["a"], params["b"])
        row = run_one(RLMMethod(), inst, EvalSpec(["x"], [8000], ["rlm"], setup))
        assert row.score == pytest.approx(inst.score(expected_answer), abs=1e-9)
        if task == "oolong_pairs":  # pairs need both labels right: F1 falls to roughly (1 - rate) ** 2
            assert 0.6 < row.score < 0.95


def test_direct_with_a_small_window_scores_as_the_cut_predicts() -> None:
    window = 6_000
    setup = oracle_setup(window=window)
    method = DirectMethod()
    seen_cut = seen_whole = 0
    for task in TASK_NAMES:
        for index in range(3):
            inst = generate(task, "24k", seed=11, index=index)
            row = run_one(method, inst, EvalSpec(["x"], [8000], ["direct"], setup))
            visible = inst.inputs["context"][: row.extra["visible_chars"]]
            assert row.extra["visible_fraction"] < 0.35 and row.input_tokens <= window
            found = parse_question(inst.question)
            assert found is not None
            predicted = inst.score(read_answer(*found, visible))
            assert row.score == pytest.approx(predicted)
            if task == "niah":
                inside = inst.meta["position"] + 60 <= len(visible)
                assert row.score == (1.0 if inside else 0.0)
                seen_cut += not inside
                seen_whole += inside
    assert seen_cut >= 1  # the needle fell outside the cut at least once, and then direct failed


def test_direct_prompt_says_it_was_cut() -> None:
    inst = generate("oolong", "24k", seed=0, index=0)
    message, extra = DirectMethod().prompt(inst, Setup("x", context_window=6_000))
    assert "CUT to its first" in message and extra["visible_fraction"] < 1
    whole, extra = DirectMethod().prompt(inst, Setup("x", context_window=200_000))
    assert "all of it" in whole and extra["visible_fraction"] == 1


def test_rlm_no_sub_cannot_beat_code_alone_on_oolong() -> None:
    spec = EvalSpec(tasks=["oolong"], sizes=["32k"], methods=["rlm", "rlm_no_sub"], setup=oracle_setup(), n=8,
                    seed=3)
    rows = run_eval(spec).rows
    no_sub = [r for r in rows if r.method == "rlm_no_sub"]
    assert all(r.sub_calls == 0 for r in no_sub)
    assert all(r.score == 1.0 for r in rows if r.method == "rlm")
    for row in no_sub:  # it scores exactly what the first-keyword rule gives, which is chance-level per record
        inst = generate("oolong", row.size, seed=3, index=row.index)
        notes = [p for p in map(parse_line, inst.inputs["context"].split("\n")) if p]
        keyword = [category_words(note)[0] for _, _, note in notes]
        counts = {label: keyword.count(label) for label in LABELS}
        assert row.score == pytest.approx(inst.score(answer_for(inst.kind, counts, dict(inst.meta["params"]))), abs=1e-9)
    counts_rows = [r for r in no_sub if r.kind == "count"]
    assert sum(r.score for r in no_sub) / len(no_sub) < 0.6
    assert all(r.score < 0.05 for r in counts_rows)


def test_results_resume_without_redoing_finished_runs(tmp_path: Path) -> None:
    spec = EvalSpec(tasks=["niah"], sizes=["8k"], methods=["rlm", "direct"], setup=oracle_setup(), n=3,
                    out=tmp_path)
    calls = {"n": 0}

    def stop_after_three(row: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_eval(spec, on_row=stop_after_three)
    first = list(read_rows(tmp_path / "results.jsonl"))
    assert len(first) == 3
    with (tmp_path / "results.jsonl").open("a") as fh:
        fh.write('{"task": "niah", "size": 80')  # a torn last line from a kill mid-write
    report = run_eval(spec)
    assert report.skipped == 3 and report.ran == 3
    rows = list(read_rows(tmp_path / "results.jsonl"))
    assert len({r.key for r in rows}) == len(plan(spec.checked())) == 6
    assert [r.finished_at for r in rows[:3]] == [r.finished_at for r in first]
    assert run_eval(spec).ran == 0


def test_summary_table_plot_and_progress(tmp_path: Path) -> None:
    spec = EvalSpec(tasks=["niah", "oolong"], sizes=["8k", "16k"], methods=["rlm", "direct"],
                    setup=oracle_setup(window=6_000), n=1)
    stream = io.StringIO()
    report = run_eval(spec, progress=stream)
    assert "\r[" in stream.getvalue() and "8/8" in stream.getvalue()
    summary = summarise(report.rows)
    assert len(summary) == 8
    table = format_table(summary)
    assert table.splitlines()[0].startswith("| task") and "100.0%" in table
    pytest.importorskip("matplotlib")
    png = plot_summary(summary, tmp_path / "plot.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps([s.to_dict() for s in summary])


def test_a_first_reading_never_sends_the_prompt_of_the_evals_direct_method() -> None:
    # issue 44: nothing from the eval (its prompts, its task shapes) is inside the product; the first reading once
    # sent `direct`'s prompt byte-identical ("asked plainly")
    from rlmnb import RLM

    inst = generate("niah", "8k", seed=0, index=0)
    message, extra = DirectMethod().prompt(inst, Setup("x", context_window=16_384))
    assert extra["visible_fraction"] == 1
    sub = ScriptedLM(lambda messages: "none", name="sub", context_window=16_384, max_output_tokens=120)
    root = ScriptedLM(["print(1)", "submit('x')"], name="root", context_window=16_384, max_output_tokens=400)
    result = RLM(root, sub, sandbox="local", evidence_check=False, max_iterations=2).run(inst.question, **inst.inputs)
    assert sub.requests and ("first_read", "read_first") in [(e.policy, e.action) for e in result.trajectory.of(
        PolicyActed)]  # a first reading was made
    assert message not in [m[-1]["content"] for m in sub.requests]
