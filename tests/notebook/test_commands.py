"""The notebook-facing magic commands: %%rlm? help, abbreviations refused, %rlm config by topic,
%rlm models, %rlm export of more than the last run, a typo'd model variable, re-running a scripted cell."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from test_magic import cell, code, magics, models, shell  # noqa: F401  (shell is a fixture)

from rlmnb.events import Trajectory
from rlmnb.testing import ScriptedLM


def test_help_says_cell_magic_groups_options_and_gives_examples(shell: InteractiveShell) -> None:  # noqa: F811
    doc = magics(shell).rlm.__doc__
    assert doc.startswith("Usage: %%rlm [-m MODEL]") and "::" not in doc.split("\n")[0]
    assert not re.search(r"(?<!%)%rlm \[", doc)  # the usage never calls the cell magic %rlm
    for title in ("Models:", "Inputs:", "Limits:", "Where the code runs:", "Recursion and checking:",
                  "Results and sessions:", "Examples:", "Line commands:"):
        assert f"\n{title}\n" in doc, title
    assert "Other options:" not in doc  # every option sits in a group
    assert doc.count("\n  %%rlm ") == 3  # three examples
    assert max(len(line) for line in doc.splitlines()) <= 100


def test_abbreviated_options_are_refused(shell: InteractiveShell) -> None:  # noqa: F811
    models(shell)
    with pytest.raises(UsageError, match="unrecognized arguments: --max-iter"):
        cell(shell, "-m root -i text --max-iter 3 --quiet")
    assert cell(shell, "-m root -i text --max-iterations 3 --quiet") == "done"


def test_config_is_grouped_by_topic(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    shell.run_line_magic("config", "RLMMagics.max_cost = 2.5")
    shell.run_line_magic("rlm", "config")
    out = capsys.readouterr().out
    titles = re.findall(r"^(\S[^:\n]*):$", out, re.M)
    assert titles[:4] == ["Models", "Budget", "Sandbox", "Sub-calls"] and "Display" in titles
    budget = out.split("Budget:\n")[1].split("\n\n")[0].split("Sandbox:")[0]
    assert re.search(r"^  max_cost +2\.5  \(%config\)$", budget, re.M) and "max_iterations" in budget
    from rlmnb._ground.config import field_names

    for name in field_names():
        if name not in ("extra",):
            assert re.search(rf"^  {name} ", out, re.M), name


def test_models_lists_each_model_its_source_and_key_state(shell: InteractiveShell,  # noqa: F811
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("RLMNB_SUB_MODEL", "anthropic/claude-x")
    shell.run_line_magic("config", "RLMMagics.model = 'openai/gpt-5'")
    shell.run_line_magic("rlm", "models")
    out = capsys.readouterr().out
    assert re.search(r"root +openai/gpt-5 +from %config +OPENAI_API_KEY is set", out)
    assert re.search(r"sub +anthropic/claude-x +from \$RLMNB_SUB_MODEL +ANTHROPIC_API_KEY is NOT set", out)
    assert "sk-secret-value" not in out
    models(shell)
    cell(shell, "-m root -s sub -i text --quiet")
    shell.run_line_magic("rlm", "models")
    assert re.search(r"root \(last run\) +root +from the last run", capsys.readouterr().out)


def test_export_one_named_run_or_every_run(shell: InteractiveShell, tmp_path: Path) -> None:  # noqa: F811
    models(shell)
    cell(shell, "-m root -i text -o first --quiet")
    cell(shell, "-m root -i text --quiet")  # the script plays again: a re-run of the same cell works
    shell.run_line_magic("rlm", f"export {tmp_path / 'first.json'} first")
    assert Trajectory.load(tmp_path / "first.json").final().run_id == shell.user_ns["first"].run_id  # type: ignore[union-attr]
    shell.run_line_magic("rlm", f"export {tmp_path / 'all.json'} --all")
    runs = json.loads((tmp_path / "all.json").read_text())["runs"]
    assert [r["run_id"] for r in runs] == [shell.user_ns["first"].run_id, shell.user_ns["_rlm"].run_id]
    shell.run_line_magic("rlm", f"export {tmp_path / 'all.html'} --all")
    page = (tmp_path / "all.html").read_text()
    assert page.startswith("<!doctype html>") and "RLM run 1 of 2" in page and "RLM run 2 of 2" in page
    with pytest.raises(UsageError, match="no variable 'nope'"):
        shell.run_line_magic("rlm", f"export {tmp_path / 'x.json'} nope")
    shell.user_ns["number"] = 3
    with pytest.raises(UsageError, match="holds a int, not a RunResult"):
        shell.run_line_magic("rlm", f"export {tmp_path / 'x.json'} number")


def test_a_typod_model_variable_is_one_line_before_litellm_loads(shell: InteractiveShell) -> None:  # noqa: F811
    models(shell)
    loaded = "litellm" in sys.modules
    with pytest.raises(UsageError, match=r"-m roots: no variable 'roots'; did you mean 'root'\?"):
        cell(shell, "-m roots -i text")
    assert ("litellm" in sys.modules) == loaded and "_rlm" not in shell.user_ns


def test_rerunning_a_scripted_cell_replays_the_script(shell: InteractiveShell) -> None:  # noqa: F811
    root = models(shell, [code("x = llm_query('hi')"), code("submit(x)")])
    first = cell(shell, "-m root -s sub -i text --quiet")
    second = cell(shell, "-m root -s sub -i text --quiet")
    assert first == second == "sub:hi" and len(root.requests) == 4
    assert isinstance(shell.user_ns["root"], ScriptedLM)
