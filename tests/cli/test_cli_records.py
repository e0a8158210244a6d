"""The CLI reads the records it lists: `rlmnb runs` numbers the journals, and `view`, `replay` and `resume` take
each of them by path, by number and by run id; any other file fails in one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlmnb import RLM
from rlmnb._cli import main
from rlmnb._engine.journal import list_journals
from rlmnb.testing import ScriptedLM
from rlmnb.testing.fake_server import FakeServer

ROOT = ["```python\nprint(inputs['notes'][:40])\n```", "```python\nsubmit('4242')\n```"]


@pytest.fixture
def journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A journal folder of its own, and a file input the runs read."""
    folder = tmp_path / "runs"
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(folder))
    (tmp_path / "notes.txt").write_text("The code is 4242. " + "filler " * 50)
    return folder


def scripted_run(notes: Path) -> str:
    """One finished, journaled run over a file input; its run id."""
    result = RLM(ScriptedLM(list(ROOT)), sandbox="local", evidence_check=False).run("What is the code?", notes=notes)
    assert result.status == "submitted"
    return result.run_id


def refs(folder: Path, run_id: str) -> dict[str, str]:
    path = next(s.path for s in list_journals(folder) if s.path.stem.endswith(run_id))
    return {"path": str(path), "number": "1", "run id": run_id, "last": "last"}


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_runs_numbers_the_journals(journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = scripted_run(journals.parent / "notes.txt")
    assert main(["runs"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("1 ")]
    assert len(rows) == 1 and run_id in rows[0] and "submitted" in rows[0]


@pytest.mark.parametrize("how", ["path", "number", "run id", "last"])
def test_view_and_replay_read_a_journal_runs_lists(how: str, journals: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run_id = scripted_run(tmp_path / "notes.txt")
    ref = refs(journals, run_id)[how]
    page = tmp_path / "view.html"
    assert main(["view", ref, "-o", str(page)]) == 0
    assert page.read_text().lower().startswith("<!doctype html>") and "4242" in page.read_text()
    capsys.readouterr()
    assert main(["replay", ref, "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["answer"] == "4242" and replayed["status"] == "submitted"
    assert replayed["usage"]["cost_usd"] == 0.0


def test_resume_reads_a_journal_by_number_and_pays_only_for_what_it_lacks(
        journals: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    with FakeServer(script={"root": list(ROOT)}) as server:
        assert main(["run", "-m", "openai/root", "--api-base", server.url, "--sandbox", "local", "-f",
                     f"notes={notes}", "--json", "What is the code?"]) == 0
        first = json.loads(capsys.readouterr().out)
        path = next(s.path for s in list_journals(journals) if s.path.stem.endswith(first["run_id"]))
        lines = path.read_text().splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if json.loads(line).get("kind") == "code_executed")
        path.write_text("".join(lines[:cut + 1]))  # the run as a crash after its first turn left it
        server.reset()
        assert main(["resume", "1", "--api-base", server.url, "--json"]) == 0
        resumed = json.loads(capsys.readouterr().out)
        assert resumed["answer"] == "4242" and resumed["status"] == "submitted"
        assert server.stats()["requests"] == 1  # turn 1 came from the journal; only turn 2 was asked


def test_resume_of_a_scripted_run_says_how_to_resume_it(journals: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    scripted_run(tmp_path / "notes.txt")
    assert main(["resume", "1"]) == 2
    err = one_line_error(capsys)
    assert "'scripted'" in err and "needs api_base" not in err


def test_replay_of_a_run_over_in_memory_inputs_says_how(journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    RLM(ScriptedLM(list(ROOT)), sandbox="local", evidence_check=False).run("What is the code?", notes="code 4242")
    assert main(["replay", "1"]) == 2
    assert "notes" in one_line_error(capsys)


@pytest.mark.parametrize("content", [b'{"a": 1}', b"[1, 2]", b'{"kind": "run_started"}\n{"kind": "x"}\n',
                                     b"\x89PNG\r\n\x1a\n\x00\x00", b""])
@pytest.mark.parametrize("command", ["view", "replay", "resume"])
def test_any_other_file_fails_in_one_line(command: str, content: bytes, journals: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_bytes(content)
    assert main([command, str(bogus)]) == 2
    one_line_error(capsys)


@pytest.mark.parametrize("ref", ["7", "no-such-run", "/no/such/file.jsonl"])
@pytest.mark.parametrize("command", ["view", "replay", "resume"])
def test_a_reference_to_nothing_fails_in_one_line(command: str, ref: str, journals: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    scripted_run(tmp_path / "notes.txt")
    assert main([command, ref]) == 2
    one_line_error(capsys)
