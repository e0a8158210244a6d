"""`RLM.replay` reads a record as `rlmnb replay` does (issue 45): a journal's path, its number in `rlmnb runs`,
"last", its run id, a Journal, a saved RunResult; every reply comes from the record, and no journal is written
(a replay is not a new run). A reference to nothing is a ConfigError before any model call."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlmnb import RLM
from rlmnb._engine.journal import JournalNotFound, journal_paths, list_journals, read_journal
from rlmnb._ground.errors import ConfigError
from rlmnb.testing import ScriptedLM


def _root(code: str) -> ScriptedLM:
    return ScriptedLM(["```python\nprint(inputs['notes'][:40])\n```", f"```python\nsubmit('{code}')\n```"],
                      name="root")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A journal folder of its own, holding two finished runs over one file: '1111' then '2222' (the newest)."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(runs))
    notes = tmp_path / "notes.txt"
    notes.write_text("The codes are 1111 and 2222. " + "filler " * 40)
    for code in ("1111", "2222"):
        result = RLM(_root(code), sandbox="local", evidence_check=False).run("Which code?", notes=notes)
        assert result.status == "submitted" and result.journal is not None
    return runs


@pytest.mark.parametrize("how", ["path", "str path", "number", "int number", "last", "run id", "journal"])
def test_replay_reads_a_journal_as_the_cli_names_it_and_writes_none(how: str, folder: Path) -> None:
    newest = list_journals(folder)[0].path
    run_id = read_journal(newest).header["run_id"]
    source = {"path": newest, "str path": str(newest), "number": "1", "int number": 1, "last": "last",
              "run id": run_id, "journal": read_journal(newest)}[how]
    before = journal_paths(folder)
    result = RLM.replay(source)
    assert result.answer == "2222" and result.status == "submitted"
    assert result.usage.cost_usd == 0.0 and result.journal is None
    assert journal_paths(folder) == before  # no journal for a replay


def test_replay_reads_a_saved_result_and_the_second_newest_by_number(folder: Path, tmp_path: Path) -> None:
    older = RLM.replay(2)
    assert older.answer == "1111"
    saved = older.save(tmp_path / "older.json")
    assert RLM.replay(saved).answer == "1111" and RLM.replay(str(saved)).answer == "1111"
    assert len(journal_paths(folder)) == 2


@pytest.mark.parametrize("ref", ["3", "no-such-run", "/no/such/file.jsonl"])
def test_a_reference_to_nothing_is_a_config_error(ref: str, folder: Path) -> None:
    with pytest.raises(JournalNotFound):
        RLM.replay(ref)


def test_a_file_that_is_no_record_is_a_config_error(folder: Path, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text("[1, 2]")
    with pytest.raises(ConfigError):
        RLM.replay(bogus)
