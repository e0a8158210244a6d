"""`rlmnb.saved_run`, what inserted cells call: a renamed notebook's run is found without its old name (in the
journal, or in the working folder's notebooks), and a run found nowhere is one line that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import code

from rlmnb import RLM, RunResult, saved_run
from rlmnb._notebook.saved_runs import RunNotFound
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import write_run_notebook
from rlmnb.views import mime_bundle


def _run(journal: str | bool) -> RunResult:
    return RLM(ScriptedLM([code("print(inputs['text'])"), code("submit('done')")], name="root"),
               sandbox="local", evidence_check=False, journal=journal).run("q", text="done")


def test_a_renamed_notebooks_run_is_found_in_the_working_folder(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(False)
    write_run_notebook(tmp_path / "analysis.ipynb", mime_bundle(run.trajectory))
    (tmp_path / "analysis.ipynb").rename(tmp_path / "renamed.ipynb")
    monkeypatch.chdir(tmp_path)  # a fresh kernel of the renamed notebook: its folder, no run in memory
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    found = saved_run(run.run_id, notebook="analysis.ipynb")  # the name the inserted cell was written with
    assert found.answer == "done" and found.to_frame().equals(run.to_frame())


def test_a_run_is_found_in_its_journal_without_any_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journals = tmp_path / "journals"
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(journals))
    run = _run(True)
    monkeypatch.chdir(tmp_path)
    found = saved_run(run.run_id)
    assert found.status == "submitted" and found.answer == "done" and found.run_id == run.run_id


def test_a_run_found_nowhere_is_one_line_saying_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(tmp_path / "none"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunNotFound) as caught:
        saved_run("0123456789ab", notebook="gone.ipynb")
    shown = caught.value._render_traceback_()
    assert len(shown) == 1 and "\n" not in shown[0] and "notebook=" in shown[0]
