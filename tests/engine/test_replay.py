"""Replay: a recorded run re-runs offline with every reply served from the record (issue 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlmnb import RLM, ReplayDivergence, Trajectory
from rlmnb._ground.errors import ConfigError
from rlmnb.testing import ScriptedLM
from rlmnb.testing.scenarios import needle_scenario


def recorded(tmp_path: Path) -> tuple[Path, str, str]:
    scenario = needle_scenario(200_000, chunks=8)
    result = RLM(scenario.root, scenario.sub, **scenario.settings).run(scenario.question, **scenario.inputs)
    assert result.status == "submitted"
    path = result.save(tmp_path / "needle.json")
    return path, scenario.inputs["text"], result.answer


def test_replay_reproduces_the_answer_at_zero_cost(tmp_path: Path) -> None:
    path, text, answer = recorded(tmp_path)
    again = RLM.replay(path, text=text)
    assert again.status == "submitted" and again.answer == answer
    assert again.usage.cost_usd == 0.0
    assert again.usage.sub_calls == 8 and again.usage.root_calls == 4


def test_replay_from_a_trajectory_object(tmp_path: Path) -> None:
    path, text, answer = recorded(tmp_path)
    assert RLM.replay(Trajectory.load(path), text=text).answer == answer


def test_changed_inputs_diverge_naming_the_call(tmp_path: Path) -> None:
    path, text, _ = recorded(tmp_path)
    with pytest.raises(ReplayDivergence, match="replay diverged at"):
        RLM.replay(path, text=text.replace("a", "o"))


def test_missing_in_memory_inputs_are_named(tmp_path: Path) -> None:
    path, _, _ = recorded(tmp_path)
    with pytest.raises(ConfigError, match=r"pass text \(text\)"):
        RLM.replay(path)


def test_file_inputs_are_reread_from_their_paths(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the code word is heron\n")
    root = ScriptedLM(["```python\nprint(inputs['notes'][:40])\n```",
                       "```python\nsubmit(llm_query('word? ' + inputs['notes']))\n```"])
    sub = ScriptedLM(lambda m: "heron")
    result = RLM(root, sub).run("What is the code word?", notes=notes)
    path = result.save(tmp_path / "run.json")
    again = RLM.replay(path)
    assert again.answer == "heron"
    notes.write_text("the code word is swan\n")
    with pytest.raises(ReplayDivergence):
        RLM.replay(path)


def test_recorded_sub_call_errors_replay_as_the_same_slots(tmp_path: Path) -> None:
    def flaky(messages: list[dict[str, str]]) -> str:
        if "bad" in messages[0]["content"]:
            raise ValueError("cannot read this")
        return "fine"

    root = ScriptedLM(["```python\nr = llm_query_batched(['good', 'bad'])\nprint(r)\n```",
                       "```python\nsubmit(r)\n```"])
    result = RLM(root, ScriptedLM(flaky)).run("q", text="t")
    assert result.answer == ["fine", "[error] ValueError: cannot read this"]
    again = RLM.replay(result.save(tmp_path / "r.json"), text="t")
    assert again.answer == result.answer


def test_custom_guards_must_be_passed_again_and_then_replay_exactly(tmp_path: Path) -> None:
    scores = iter([0.1, 0.9])

    def picky(answer: object, context: dict[str, object]) -> float:
        return next(scores)

    root = ScriptedLM(["```python\nprint(1)\n```", "```python\nsubmit('a')\n```", "```python\nsubmit('b')\n```"])
    result = RLM(root, verify=picky, sandbox="local", evidence_check=False).run("q", text="t")
    assert result.answer == "b" and result.verified
    path = result.save(tmp_path / "v.json")
    with pytest.raises(ConfigError, match="pass the same guard again"):
        RLM.replay(path, text="t")
    replay_scores = iter([0.1, 0.9])
    again = RLM.replay(path, verify=lambda a, c: next(replay_scores), text="t")
    assert again.answer == "b" and again.usage.root_calls == 3
