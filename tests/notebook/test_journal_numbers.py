"""One numbering of the journals (issue 45): `%rlm runs`, `%%rlm --resume N`, `%%rlm --replay N`, `rlmnb runs`,
`rlmnb replay N`, `rlmnb resume N` and `RLM.replay(N)` all mean the same file by N, though the folder also holds
files that are no journal (a cut header, an empty file, another tool's lines); and a replay writes no journal."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_magic import shell  # noqa: F401  (a fixture)

from rlmnb import RLM
from rlmnb._cli import main
from rlmnb._engine.journal import journal_paths, read_journal
from rlmnb.testing import ScriptedLM


def _root(code: str) -> ScriptedLM:
    return ScriptedLM(["```python\nprint(inputs['notes'][:40])\n```", f"```python\nsubmit('{code}')\n```"],
                      name="root")


@pytest.fixture
def folder(shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """Two finished %%rlm runs over a file ('1111', then '2222'), and three newer files that are no journal."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(runs))
    (tmp_path / "notes.txt").write_text("The codes are 1111 and 2222. " + "filler " * 40)
    for code in ("1111", "2222"):
        shell.user_ns["root"] = _root(code)
        assert shell.run_cell_magic("rlm", f"-m root -f notes={tmp_path / 'notes.txt'} --quiet", "Which code?") \
            == code
    newest = max(path.stat().st_mtime for path in journal_paths(runs))
    for age, (name, body) in enumerate([("20990101-000000-cut.jsonl", b'{"kind": "journal", "ver'),
                                        ("20990101-000001-empty.jsonl", b""),
                                        ("20990101-000002-other.jsonl", b'{"kind": "log"}\n{"a": 1}\n')], 1):
        (runs / name).write_bytes(body)
        os.utime(runs / name, (newest + age, newest + age))  # newer than every journal
    return runs


def _numbered(listing: str) -> dict[int, str]:
    """Number -> the journal file name of each row of a `runs` listing."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)\s.*?(\S+\.jsonl)", listing, re.M)}


def test_every_front_end_numbers_the_journals_alike(shell: InteractiveShell, folder: Path,  # noqa: F811
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs"]) == 0
    cli = _numbered(capsys.readouterr().out)
    shell.run_line_magic("rlm", "runs")
    magic = _numbered(capsys.readouterr().out)
    assert cli == magic and len(cli) == 2
    assert read_journal(folder / cli[1]).header["question"] == "Which code?"
    assert main(["replay", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "2222"
    assert main(["replay", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "1111"
    assert RLM.replay(1).answer == "2222" and RLM.replay("last").answer == "2222"
    assert shell.run_cell_magic("rlm", "--replay 2 --quiet", "(the record's question)") == "1111"
    before = set(journal_paths(folder))
    assert len(before) == 5  # the two runs and the three other files: no replay wrote a journal
    # --resume 1 continues the run `%rlm runs` numbers 1: served from its journal, its model never asked
    never = ScriptedLM(lambda messages: "never asked", name="root")
    shell.user_ns["fresh"] = never
    assert shell.run_cell_magic("rlm", "-m fresh --quiet --resume 1", "(resumed)") == "2222"
    assert never.requests == []
    (resumed,) = set(journal_paths(folder)) - before
    assert read_journal(resumed).header["resumed_from"] == str(folder / cli[1])


@pytest.mark.parametrize("ref", ["3", "last-but-one"])
def test_a_number_past_the_journals_is_refused_alike(ref: str, shell: InteractiveShell,  # noqa: F811
                                                     folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.error import UsageError

    assert main(["replay", ref]) == 2 and main(["resume", ref]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "Traceback" not in "".join(err)
    shell.user_ns["root"] = _root("0000")
    with pytest.raises(UsageError):
        shell.run_cell_magic("rlm", f"-m root --resume {ref}", "q")
    with pytest.raises(UsageError):
        shell.run_cell_magic("rlm", f"--replay {ref}", "q")
