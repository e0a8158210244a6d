"""Where runs are journaled is said once per process and folder, by the first run that writes there (issue 45):
by `%%rlm` in its live view (never on the cell's stderr, nor in the saved output nbval compares) and by `RLM.run`
to the "rlmnb" logger at INFO; the default `.rlmnb` folder gets a `.gitignore` of `*` either way."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_magic import cell, models, shell  # noqa: F401  (shell is a fixture)

from rlmnb import RLM
from rlmnb.testing import ScriptedLM

pytest.importorskip("ipywidgets")


def _rows_naming(text: str) -> list[Any]:
    """The live widgets' HTML rows that name `text`."""
    from ipywidgets import HTML
    from ipywidgets.widgets.widget import _instances

    return [w for w in list(_instances.values()) if isinstance(w, HTML) and text in w.value]


def test_the_magic_says_the_folder_once_in_its_live_view_only(shell: InteractiveShell,  # noqa: F811
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RLMNB_JOURNAL_DIR")
    monkeypatch.chdir(tmp_path)  # the default folder: .rlmnb/runs under the working folder
    folder = str(tmp_path / ".rlmnb" / "runs")
    models(shell)
    assert cell(shell, "-m root -i text") == "done"
    assert len(_rows_naming(folder)) == 1
    assert (tmp_path / ".rlmnb" / ".gitignore").read_text().splitlines()[-1] == "*"
    saved = [str(message["data"].get(key, "")) for message in shell.published for key in ("text/plain", "text/html")]
    assert not [text for text in saved if folder in text]  # the saved output is as before: nbval compares it
    assert folder not in capfd.readouterr().err
    models(shell)
    assert cell(shell, "-m root -i text") == "done"
    assert len(_rows_naming(folder)) == 1  # said once: the second run's view has no such row
    assert len(list((tmp_path / ".rlmnb" / "runs").glob("*.jsonl"))) == 2


def test_run_says_the_folder_once_to_the_rlmnb_logger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RLMNB_JOURNAL_DIR")
    monkeypatch.chdir(tmp_path)
    folder = str(tmp_path / ".rlmnb" / "runs")

    def run() -> None:
        root = ScriptedLM(["```python\nprint(inputs['text'])\n```", "```python\nsubmit('alpha')\n```"])
        assert RLM(root, sandbox="local").run("Which word?", text="alpha").ok

    with caplog.at_level(logging.INFO, logger="rlmnb"):
        run()
        run()
    said = [r for r in caplog.records if r.name == "rlmnb" and folder in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO]
    assert (tmp_path / ".rlmnb" / ".gitignore").is_file()
    assert folder not in capfd.readouterr().err


def test_no_journal_no_notice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = ScriptedLM(["```python\nprint(inputs['text'])\n```", "```python\nsubmit('alpha')\n```"])
    with caplog.at_level(logging.INFO, logger="rlmnb"):
        assert RLM(root, sandbox="local", journal=False).run("Which word?", text="alpha").journal is None
    assert not [r for r in caplog.records if "journal" in r.getMessage()]
