"""Resume: a run continues from its journal, paying only for what the journal did not answer (issue 23)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._engine.journal import read_journal
from rlmnb._ground.errors import ConfigError
from rlmnb.events import ModelReply
from rlmnb.testing import ScriptedLM

FAN_OUT = ("```python\nanswers = llm_query_batched([f'item {i}: ' + inputs['words'][i] for i in range(20)])\n"
           "print(len(answers))\n```")
SUBMIT = "```python\nsubmit('|'.join(answers))\n```"
LOOK = "```python\nprint(inputs['words'][:3])\n```"


def root_model(script: list[str]) -> ScriptedLM:
    """A root model answering by the number of its turns so far, as the fake server's scripts do."""
    return ScriptedLM(lambda messages: script[sum(1 for m in messages if m.get("role") == "assistant")],
                      name="root")


def sub_model() -> ScriptedLM:
    return ScriptedLM(lambda messages: str(messages[-1]["content"]).split(": ", 1)[1].upper(), name="sub")


WORDS = [f"w{i}" for i in range(20)]
EXPECTED = "|".join(w.upper() for w in WORDS)


def cut_after(path: Path, kind: str, count: int, *, tail: bytes = b"") -> None:
    """Keep the journal up to the `count`-th event of `kind` (what a killed run would have left)."""
    lines = path.read_bytes().split(b"\n")
    seen = 0
    for number, line in enumerate(lines):
        if f'"kind": "{kind}"'.encode() in line:
            seen += 1
            if seen == count:
                path.write_bytes(b"\n".join(lines[: number + 1]) + b"\n" + tail)
                return
    raise AssertionError(f"fewer than {count} {kind} events")


def recorded(tmp_path: Path, script: list[str], **settings: Any) -> Any:
    settings.setdefault("journal", str(tmp_path))
    result = RLM(root_model(script), sub_model(), sandbox="local", **settings).run("Shout the words", words=WORDS)
    assert result.journal is not None
    return result


def test_resume_after_a_kill_pays_only_for_the_unanswered(tmp_path: Path) -> None:
    first = recorded(tmp_path, [LOOK, FAN_OUT, SUBMIT])
    assert first.answer == EXPECTED
    cut_after(first.journal, "sub_call_finished", 12, tail=b'{"kind": "sub_call_fin')  # torn mid-line
    root, sub = root_model([LOOK, FAN_OUT, SUBMIT]), sub_model()
    again = RLM(root, sub, sandbox="local", journal=str(tmp_path)).resume(first.journal, words=WORDS)
    assert again.status == "submitted" and again.answer == EXPECTED
    assert len(root.requests) == 1  # turns 1 and 2 were answered; only the submitting turn is asked
    assert len(sub.requests) == 8  # 12 of 20 sub-calls were answered
    answered = {row["prompt"] for row in read_journal(first.journal).trajectory.sub_calls() if row["reply"]}
    assert len(answered) == 12 and answered.isdisjoint(str(r[0]["content"]) for r in sub.requests)
    marks = [e for e in again.trajectory if e.kind == "run_resumed"]
    assert len(marks) == 1 and marks[0].served_sub == 12 and marks[0].served_root == 2 and marks[0].live
    assert again.journal is not None and read_journal(again.journal).header["resumed_from"] == str(first.journal)


def test_resume_with_more_turns_after_max_iterations(tmp_path: Path) -> None:
    first = recorded(tmp_path, [LOOK, FAN_OUT, "no code this time", SUBMIT], max_iterations=2)
    assert first.status == "fallback"
    root, sub = root_model([LOOK, FAN_OUT, SUBMIT]), sub_model()
    again = RLM(root, sub, sandbox="local", journal=str(tmp_path), max_iterations=4).resume(
        first.journal, words=WORDS)
    assert again.status == "submitted" and again.answer == EXPECTED
    assert len(root.requests) == 1 and sub.requests == []  # two turns and 20 sub-calls served


def test_a_finished_run_resumes_entirely_from_its_journal(tmp_path: Path) -> None:
    first = recorded(tmp_path, [LOOK, FAN_OUT, SUBMIT])
    root, sub = root_model([LOOK, FAN_OUT, SUBMIT]), sub_model()
    again = RLM(root, sub, sandbox="local").resume(first.journal, words=WORDS)
    assert again.answer == EXPECTED and root.requests == [] and sub.requests == []
    assert again.usage.cost_usd == 0.0
    marks = [e for e in again.trajectory if e.kind == "run_resumed"]  # marked where it ended: nothing went live
    assert len(marks) == 1 and not marks[0].live and (marks[0].served_root, marks[0].served_sub) == (3, 20)
    assert again.trajectory.events[-1] is marks[0]


def test_changed_inputs_are_refused_unless_forced(tmp_path: Path) -> None:
    first = recorded(tmp_path, [LOOK, FAN_OUT, SUBMIT])
    changed = [*WORDS[:-1], "other"]
    rlm = RLM(root_model([LOOK, FAN_OUT, SUBMIT]), sub_model(), sandbox="local")
    with pytest.raises(ConfigError, match=r"The inputs differ from the run's \(words changed\).*force=True"):
        rlm.resume(first.journal, words=changed)
    with pytest.raises(ConfigError, match=r"pass words \(list\)"):
        rlm.resume(first.journal)
    forced = rlm.resume(first.journal, force=True, words=changed)
    assert forced.answer == EXPECTED.replace("W19", "OTHER")


def test_changed_file_inputs_are_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("alpha beta\n")
    script = ["```python\nprint(inputs['notes'][:5])\n```", "```python\nsubmit(llm_query('x: ' + inputs['notes']))\n```"]
    first = RLM(root_model(script), sub_model(), sandbox="local", journal=str(tmp_path)).run("q", notes=notes)
    assert first.journal is not None
    notes.write_text("alpha beta gamma\n")
    with pytest.raises(ConfigError, match="notes's files changed"):
        RLM(root_model(script), sub_model(), sandbox="local").resume(first.journal)


def test_resume_after_a_ctrl_c(tmp_path: Path) -> None:
    import os
    import signal

    finished: list[int] = []

    def interrupt_at_the_tenth_answer(event: Any) -> None:
        if event.kind == "sub_call_finished":
            finished.append(1)
            if len(finished) == 10:
                os.kill(os.getpid(), signal.SIGINT)

    script = [LOOK, FAN_OUT, SUBMIT]
    first = RLM(root_model(script), ScriptedLM(lambda m: str(m[-1]["content"]).split(": ", 1)[1].upper(),
                                               name="sub", latency=0.01),
                sandbox="local", journal=str(tmp_path), max_concurrency=2, min_concurrency=2,
                on_event=interrupt_at_the_tenth_answer).run("Shout the words", words=WORDS)
    assert first.status == "interrupted" and first.journal is not None
    root_done = len(first.trajectory.of(ModelReply))
    sub_done = sum(1 for row in read_journal(first.journal).trajectory.sub_calls() if row["reply"])
    assert 10 <= sub_done < 20
    root, sub = root_model(script), sub_model()
    again = RLM(root, sub, sandbox="local").resume(first.journal, words=WORDS)
    assert again.status == "submitted" and again.answer == EXPECTED
    assert len(root.requests) == 3 - root_done and len(sub.requests) == 20 - sub_done
