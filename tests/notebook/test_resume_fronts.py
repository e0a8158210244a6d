"""Issue 23 in the front ends: `%rlm runs`, `%%rlm --resume [RUN]`, `rlmnb resume PATH`, %%rlm --max-cost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from rlmnb._cli import main
from rlmnb.testing import ScriptedLM

SCRIPT = ["```python\nprint(inputs['text'][:5])\n```", "```python\nsubmit(llm_query('shout: ' + inputs['text']))\n```"]


def root() -> ScriptedLM:
    return ScriptedLM(lambda m: SCRIPT[sum(1 for x in m if x.get("role") == "assistant")], name="root")


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(tmp_path / "runs"))
    sh = InteractiveShell.instance()
    sh.reset(new_session=False)
    sh.config.pop("RLMMagics", None)
    sh.run_line_magic("load_ext", "rlmnb")
    sh.magics_manager.registry["RLMMagics"].sandbox = "local"
    yield sh
    sh.run_line_magic("unload_ext", "rlmnb")
    sh.reset(new_session=False)


def test_runs_lists_and_resume_continues_the_newest(shell: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    sub = ScriptedLM(lambda m: str(m[-1]["content"]).upper(), name="sub")
    shell.user_ns.update(root=root(), sub=sub, text="hello")
    assert shell.run_cell_magic("rlm", "-m root -s sub -i text --quiet", "Shout it") == "SHOUT: HELLO"
    shell.run_line_magic("rlm", "runs")
    listing = capsys.readouterr().out
    assert "  1  " in listing and "submitted" in listing and "Shout it" in listing
    again_root, again_sub = root(), ScriptedLM(lambda m: "never asked", name="sub")
    shell.user_ns.update(root=again_root, sub=again_sub)
    assert shell.run_cell_magic("rlm", "-m root -s sub -i text --quiet --resume", "(resumed)") == "SHOUT: HELLO"
    assert again_root.requests == [] and again_sub.requests == []
    shell.user_ns["text"] = "changed"
    with pytest.raises(UsageError, match="The inputs differ"):
        shell.run_cell_magic("rlm", "-m root -s sub -i text --quiet --resume 2", "(resumed)")
    with pytest.raises(UsageError, match="nowhere.jsonl"):
        shell.run_cell_magic("rlm", "-m root -s sub -i text --quiet --resume nowhere.jsonl", "(resumed)")


def test_cli_runs_lists_a_stopped_run_and_resume_checks_its_path(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from rlmnb import RLM

    sub = ScriptedLM(lambda m: "LIVE", name="sub")
    first = RLM(root(), sub, sandbox="local", journal=str(tmp_path)).run("Shout it", text="hello")
    assert first.journal is not None
    lines = first.journal.read_text().split("\n")
    first.journal.write_text("\n".join(lines[:4]) + "\n")  # the header, run_started, turn 1, its reply: killed
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "stopped" in out and "Shout it" in out and json.loads(lines[0])["kind"] == "journal"
    assert main(["resume", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err  # one line naming what is not there


def test_the_magic_refuses_max_cost_with_an_unpriced_model(shell: InteractiveShell) -> None:
    model = "openai/rlmnb-unpriced-model"
    with pytest.raises(UsageError, match=f"max_cost needs a price for {model}"):
        shell.run_cell_magic("rlm", f"-m {model} --max-cost 0.01 --quiet", "What?")
