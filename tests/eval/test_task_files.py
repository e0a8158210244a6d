"""Tasks from rows: your own JSON Lines (`jsonl:PATH`) and the published benchmarks read from local copies
in their published schema (OOLONG synth and real, LongBench-v2, BrowseComp-Plus), scored as their papers
score; `rlmnb eval` over them end to end against the fake server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._eval import EvalSpec, Setup, plan
from rlmnb._eval.tasks import get_task
from rlmnb._eval.tasks.metrics import chosen_letter, get_metric
from rlmnb._ground.errors import ConfigError

FILLER = "Nothing to see in this line of filler text. " * 40


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_metrics() -> None:
    assert get_metric("exact")(["Paris", "paris, france"], "  paris. ") == 1.0
    assert get_metric("numeric")([10], "12") == pytest.approx(0.75 ** 2)
    assert get_metric("numeric")([10], "ten or eleven") == 0.0
    assert get_metric("contains")(["France"], "It is in France.") == 1.0
    assert get_metric("all")(["a1", "b2"], "a1 only") == 0.5
    assert [chosen_letter(t) for t in ("B", "(C)", "The correct answer is (D).", "D) the fourth", "a dog")] == [
        "B", "C", "D", "D", None]
    assert get_metric("choice")(["B"], "The correct answer is (B)") == 1.0
    with pytest.raises(ConfigError, match="unknown metric 'fuzzy'"):
        get_metric("fuzzy")


def test_jsonl_task_reads_context_files_and_paths(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("alpha text", encoding="utf-8")
    path = _write_jsonl(tmp_path / "mine.jsonl", [
        {"id": "q1", "question": "Which city?", "context": FILLER + "The city is Lyon.", "answers": "Lyon"},
        {"id": "q2", "question": "How many?", "files": {"x.txt": "1 2 3", "y.txt": "4"}, "answers": [4],
         "metric": "numeric", "source": "made up"},
        {"id": "q3", "question": "Which?", "files": ["docs/a.txt"], "answers": ["A"], "metric": "choice"},
    ])
    task = get_task(f"jsonl:{path}")
    first, second, third = (task.generate(8000, index=i) for i in range(3))
    assert first.inputs == {"context": FILLER + "The city is Lyon."} and first.answer == ["Lyon"]
    assert first.score("lyon") == 1.0 and first.score("Paris") == 0.0
    assert second.inputs == {"x.txt": "1 2 3", "y.txt": "4"} and second.meta == {"id": "q2", "source": "made up"}
    assert second.score(5) == 0.75 and "=== x.txt ===\n1 2 3" in second.text
    assert third.inputs == {"a.txt": "alpha text"} and third.score("The correct answer is (A)") == 1.0
    with pytest.raises(ConfigError, match="no instance 3"):
        task.generate(8000, index=3)


@pytest.mark.parametrize(("row", "message"), [
    ({"question": "q", "answers": ["a"]}, "exactly one of \"context\""),
    ({"question": "q", "context": "c"}, "no \"answers\""),
    ({"context": "c", "answers": ["a"]}, "no \"question\""),
    ({"question": "q", "context": "c", "answers": ["a"], "metric": "fuzzy"}, "unknown metric"),
    ({"question": "q", "files": ["missing.txt"], "answers": ["a"]}, "does not exist"),
])
def test_jsonl_rows_are_checked_with_the_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path = _write_jsonl(tmp_path / "bad.jsonl", [{"id": "ok", "question": "q", "context": "c", "answers": "a"}, row])
    with pytest.raises(ConfigError, match="line 2") as caught:
        get_task(f"jsonl:{path}").generate(8000)
    assert message in str(caught.value)


def test_jsonl_runs_once_at_the_first_size_and_dataset_bands_pick_rows(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "two.jsonl", [
        {"id": f"q{i}", "question": "q", "context": "c", "answers": "a"} for i in range(2)])
    spec = EvalSpec(tasks=[f"jsonl:{path}"], sizes=["8k", "32k"], methods=["direct"], setup=Setup("x"), n=5).checked()
    assert [(j.size, j.index) for j in plan(spec)] == [(8000, 0), (8000, 1)]


# ---- published benchmarks, from fixtures in their schema ------------------------------------------------
def _oolong_synth_rows() -> list[dict[str, Any]]:
    base = {"dataset": "trec_coarse", "context_window_id": 7, "task_group": "counting",
            "context_window_text": "Instances: Date: Jan 02, 2023 || User: 1 || Instance: what is a dog?\n" * 3,
            "context_window_text_with_labels": "... || Label: entity\n" * 3}
    return [
        {**base, "id": 1, "context_len": 5000, "question": "How many are labelled entity? Answer: <number>",
         "task": "TASK_TYPE.NUMERIC_ONE_CLASS", "answer": "[12]", "answer_type": "ANSWER_TYPE.NUMERIC"},
        {**base, "id": 2, "context_len": 6000, "question": "Most common label? Label: <label>",
         "task": "TASK_TYPE.MOST_FREQ", "answer": "['entity']", "answer_type": "ANSWER_TYPE.LABEL"},
        {**base, "id": 3, "context_len": 7000, "question": "Is entity more or less common than location?",
         "task": "TASK_TYPE.RELATIVE_FREQ", "answer": "['more common than']", "answer_type": "ANSWER_TYPE.COMPARISON"},
        {**base, "id": 4, "context_len": 30000, "question": "Latest date? Date: <date>", "task": "TASK_TYPE.X",
         "answer": "[datetime.date(2023, 1, 2)]", "answer_type": "ANSWER_TYPE.DATE"},
    ]


def test_oolong_synth_from_a_local_folder(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "oolong-synth" / "validation.jsonl", _oolong_synth_rows())
    task = get_task(f"oolong_synth:{tmp_path / 'oolong-synth'}")
    assert task.count(8000) == 3 and task.count(32000) == 1  # bands: (4k, 8k] and (16k, 32k]
    count, label, compare = (task.generate(8000, index=i) for i in range(3))
    assert count.inputs["context"].startswith("Instances:") and "Label:" not in count.inputs["context"]
    assert count.tokens == 5000 and count.meta["answer_type"] == "ANSWER_TYPE.NUMERIC"
    assert count.score("Answer: 12") == 1.0 and count.score("14") == pytest.approx(0.75 ** 2)
    assert count.score("many") == 0.0
    assert label.score("Label: entity") == 1.0 and label.score("location") == 0.0
    assert compare.score("Answer: more common") == 1.0 and compare.score("less common") == 0.0
    dated = task.generate(32000)
    assert dated.score("Date: 2023-01-02") == 1.0 and dated.score("Jan 2, 2023") == 1.0
    assert dated.score("2023-01-03") == 0.0
    with pytest.raises(ConfigError, match="0 row"):
        task.generate(64000)


def test_oolong_real_scored_as_dnd_process_response(tmp_path: Path) -> None:
    rows = [{"id": "r1", "context_window_id": 1, "context_window_text": FILLER * 10, "question": "How many rolls?",
             "answer": "84"},
            {"id": "r2", "context_window_id": 1, "context_window_text": FILLER * 10, "question": "Who cast spells?",
             "answer": "Vex, Percy, Keyleth"},
            {"id": "r3", "context_window_id": 1, "context_window_text": FILLER * 10, "question": "Which episode?",
             "answer": "Episode 12"}]
    _write_jsonl(tmp_path / "dnd" / "validation.jsonl", rows)
    task = get_task(f"oolong_real:{tmp_path}")
    tokens = task.generate(8000).tokens
    size = 8000 if tokens <= 8000 else 16000
    number, names, text = (task.generate(size, index=i) for i in range(3))
    assert number.score(r"\boxed{84}") == 1.0 and number.score("86") == pytest.approx(0.75 ** 2)
    assert names.score(r"\boxed{Vex, Percy}") == pytest.approx(2 / 3) and names.score(["Vex", "Percy", "Keyleth"]) == 1
    assert text.score("episode 12") == 1.0 and text.score("12") == 0.0


def test_longbench_v2_from_data_json(tmp_path: Path) -> None:
    record = {"_id": "66f36490821e116aacb2cc22", "domain": "Single-Document QA", "sub_domain": "Financial",
              "difficulty": "easy", "length": "short", "question": "What did the company report?",
              "choice_A": "A loss", "choice_B": "A profit", "choice_C": "Nothing", "choice_D": "A merger",
              "answer": "B", "context": FILLER * 12}
    (tmp_path / "data.json").write_text(json.dumps([record]), encoding="utf-8")
    task = get_task(f"longbench_v2:{tmp_path / 'data.json'}")
    instance = task.generate(8000 if task.count(8000) else 16000)
    assert "(B) A profit" in instance.question and "The correct answer is" in instance.question
    assert instance.score("The correct answer is (B)") == 1.0 and instance.score("(A)") == 0.0
    assert instance.meta["difficulty"] == "easy"


def test_browsecomp_plus_from_the_decrypted_jsonl(tmp_path: Path) -> None:
    doc = {"docid": "d1", "url": "https://example.org/a", "text": FILLER * 6 + "The river is the Tagus."}
    record = {"query_id": "769", "query": "Which river ...?", "answer": "Tagus", "evidence_docs": [doc],
              "gold_docs": [doc], "negative_docs": [{"docid": "d2", "url": "u", "text": FILLER * 6}]}
    _write_jsonl(tmp_path / "browsecomp_plus_decrypted.jsonl", [record])
    task = get_task(f"browsecomp_plus:{tmp_path}")
    instance = task.generate(8000 if task.count(8000) else 16000)
    assert instance.inputs["context"].count("Document d1") == 1 and "Document d2" in instance.inputs["context"]
    assert instance.score("tagus.") == 1.0 and instance.score("The Douro") == 0.0
    _write_jsonl(tmp_path / "hub" / "rows.jsonl", [{**record, "query": "c2VjcmV0", "canary": "BrowseComp-Plus"}])
    with pytest.raises(ConfigError, match="decrypt_dataset.py"):
        get_task(f"browsecomp_plus:{tmp_path / 'hub'}").generate(8000)


def test_missing_fields_and_hub_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_jsonl(tmp_path / "x.jsonl", [{"id": 1, "question": "q"}])
    with pytest.raises(ConfigError, match="no 'answer' field"):
        get_task(f"oolong_synth:{tmp_path}").generate(8000)
    import builtins

    real_import = builtins.__import__

    def no_datasets(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "datasets":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(ConfigError, match=r"pip install datasets\), or pass --data PATH"):
        get_task("longbench_v2").generate(8000)


def test_eval_cli_over_a_jsonl_task(fake_server_factory: Callable[..., Any], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from rlmnb._cli import main

    path = _write_jsonl(tmp_path / "mine.jsonl", [
        {"id": "q1", "question": "Which city? Answer with the city only.", "context": FILLER + "The city is Lyon.",
         "answers": ["Lyon"]}])
    server = fake_server_factory(responder=lambda messages: "Lyon")
    code = main(["eval", "--task", f"jsonl:{path}", "--sizes", "8k,32k", "--methods", "direct", "-m",
                 "openai/mine", "--api-base", server.url, "--api-key", "k", "-n", "3", "--out",
                 str(tmp_path / "out"), "--quiet", "--no-plot", "--context-window", "16000"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [(r["score"], r["size"], r["extra"]["meta"]["id"]) for r in rows] == [(1.0, 8000, "q1")]
