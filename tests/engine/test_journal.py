"""The journal: a run's events on disk as they happen, read back after a crash (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._engine.journal import changed_inputs, fingerprint, list_journals, prune, read_journal
from rlmnb._ground.errors import ConfigError
from rlmnb.testing import ScriptedLM


def run_once(folder: Path, question: str = "What is the code word?", **settings: object) -> Path:
    root = ScriptedLM(["```python\nprint(len(inputs['notes']))\n```",
                       "```python\nsubmit(llm_query('word? ' + inputs['notes']))\n```"])
    sub = ScriptedLM(lambda m: "heron")
    result = RLM(root, sub, sandbox="local", journal=str(folder), **settings).run(question, notes="the word is heron")
    assert result.status == "submitted" and result.journal is not None
    return result.journal


def test_a_run_writes_every_event_and_reads_back(tmp_path: Path) -> None:
    path = run_once(tmp_path)
    journal = read_journal(path)
    assert not journal.torn
    assert journal.question == "What is the code word?"
    kinds = [e.kind for e in journal.trajectory]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("model_reply") == 2 and kinds.count("sub_call_finished") == 1
    assert [e.seq for e in journal.trajectory] == list(range(len(kinds)))
    assert journal.header["inputs"]["notes"]["digest"]


def test_journal_false_writes_nothing(tmp_path: Path) -> None:
    root = ScriptedLM(["```python\nprint(1)\n```", "```python\nsubmit(2)\n```"])
    result = RLM(root, sandbox="local", journal=False).run("q", x=1)
    assert result.journal is None
    with pytest.raises(ConfigError, match="journal must be"):
        RLM(root, sandbox="local", journal=3)


@pytest.mark.parametrize("damage", ["cut", "zeros", "cut_then_zeros"])
def test_a_torn_tail_is_ignored(tmp_path: Path, damage: str) -> None:
    path = run_once(tmp_path)
    whole = path.read_bytes()
    lines = whole.split(b"\n")
    keep = b"\n".join(lines[:5]) + b"\n"
    if damage == "cut":
        data = keep + lines[5][: len(lines[5]) // 2]
    elif damage == "zeros":
        data = keep + b"\x00" * 4096
    else:
        data = keep + lines[5][:10] + b"\x00" * 100
    path.write_bytes(data)
    journal = read_journal(path)
    assert len(journal.trajectory) == 4  # the header and four whole events
    assert journal.torn == (damage != "zeros")


def test_a_damaged_middle_line_ends_the_read_there(tmp_path: Path) -> None:
    path = run_once(tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[3] = b'{"kind": "turn_st'
    path.write_bytes(b"\n".join(lines))
    journal = read_journal(path)
    assert journal.torn and len(journal.trajectory) == 2


def test_not_a_journal_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"kind": "run_started"}\n')
    with pytest.raises(ValueError, match="not an rlmnb journal"):
        read_journal(bad)
    with pytest.raises(FileNotFoundError, match="No journal at"):
        read_journal(tmp_path / "missing.jsonl")


def test_secrets_never_reach_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-very-secret-value-123")
    root = ScriptedLM(["```python\nprint('key: sk-very-secret-value-123')\n```", "```python\nsubmit(1)\n```"])
    result = RLM(root, sandbox="local", journal=str(tmp_path)).run("q", x=1)
    assert result.journal is not None
    text = result.journal.read_text()
    assert "sk-very-secret-value-123" not in text and "key: ***" in text


def test_listing_and_retention(tmp_path: Path) -> None:
    for i in range(3):
        run_once(tmp_path, question=f"question {i}", journal_keep=2)
    runs = list_journals(tmp_path)
    assert [r.question for r in runs] == ["question 2", "question 1"]  # newest first, the oldest pruned
    assert runs[0].status == "submitted" and runs[0].cost_usd == 0.0
    assert "question 2" in runs[0].row()
    assert prune(tmp_path, 1) == [runs[1].path]


def test_fingerprints_see_changed_files_and_values(tmp_path: Path) -> None:
    data = tmp_path / "d.txt"
    data.write_text("one")
    before = {"d": fingerprint(data, [str(data)]), "t": fingerprint("abc")}
    assert changed_inputs(before, {"d": fingerprint(data, [str(data)]), "t": fingerprint("abc")}) == []
    data.write_text("one more")
    after = {"d": fingerprint(data, [str(data)]), "t": fingerprint("abd")}
    assert changed_inputs(before, after) == ["d's files changed (size or modification time)", "t changed"]
    assert json.dumps(before)  # serialisable into the header


def test_a_journal_deleted_while_the_folder_is_listed_is_skipped(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._engine.journal import journal_paths

    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    stat = Path.stat

    def vanishing(self: Path, **kw: Any) -> Any:  # another run's prune deleted b between listing and stat
        if self.name == "b.jsonl":
            raise FileNotFoundError(str(self))
        return stat(self, **kw)

    monkeypatch.setattr(Path, "stat", vanishing)
    assert sorted(p.name for p in journal_paths(tmp_path)) == ["a.jsonl", "c.jsonl"]
    assert len(prune(tmp_path, 1)) == 1
