"""The rlmnb command: demo, run (through real HTTP to the fake server), view, replay, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlmnb._cli import main
from rlmnb.testing.fake_server import FakeServer


def test_demo_prints_the_trajectory_and_writes_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "demo.html"
    assert main(["demo", "--size", "300000", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "Turn 1" in out or "turn 1" in out
    assert "The answer is correct" in out and "llm_query_batched" in out
    page = html.read_text()
    assert page.lower().startswith("<!doctype html>") and "<details" in page


def test_demo_rejects_a_tiny_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--size", "10"]) == 2
    assert capsys.readouterr().err.strip() == "rlmnb: --size must be at least 1000 characters."


def test_run_through_litellm_against_the_fake_server(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("filler " * 500 + "The magic number is 4242424. " + "filler " * 500)
    script = {"root": ["```python\nprint(len(inputs['notes']))\n```",
                       "```python\nr = llm_query_batched([inputs['notes'][:2000], inputs['notes'][2000:]])\n"
                       "print(r)\n```",
                       "```python\nsubmit([x for x in r if x != 'NONE'][0])\n```"]}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    saved = tmp_path / "traj.json"
    with FakeServer(script=script).start() as server:
        code = main(["run", "-m", "openai/root", "-s", "openai/sub", "--api-base", server.url,
                     "-f", f"notes={notes}", "--json", "--save", str(saved), "What is the magic number?"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert data["answer"] == "4242424" and data["status"] == "submitted"
    assert data["usage"]["sub_calls"] == 2 and data["usage"]["root_calls"] == 3
    assert "turn 1/" in captured.err and "finished: submitted" in captured.err
    assert "sk-test" not in saved.read_text()
    # the saved run replays offline, the file input re-read from its path
    assert main(["replay", str(saved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "4242424"


@pytest.mark.parametrize("argv, message", [
    (["run", "-m", "openai/x", "-f", "notes", "q"], "-f expects NAME=PATH"),
    (["run", "-m", "openai/x", "-f", "n=/no/such/file.txt", "q"], "no file or directory at /no/such/file.txt"),
    (["run", "-m", "openai/x", "--max-iterations", "0", "q"], "max_iterations must be a positive"),
    (["view", "/no/such.json"], "no trajectory file at /no/such.json"),
    (["replay", "/no/such.json"], "no trajectory file at /no/such.json"),
])
def test_usage_errors_are_one_line_with_exit_code_2(argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_missing_api_key_is_one_line_naming_the_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    notes = tmp_path / "n.txt"
    notes.write_text("x")
    assert main(["run", "-m", "openai/gpt-5-mini", "-f", f"n={notes}", "q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "OPENAI_API_KEY" in err and len(err.splitlines()) == 1


def test_view_writes_html_and_rejects_non_trajectories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text(json.dumps({"schema_version": 99, "events": []}))
    assert main(["view", str(bogus)]) == 2
    assert "is not an rlmnb trajectory" in capsys.readouterr().err
    from rlmnb import RLM
    from rlmnb.testing import ScriptedLM

    result = RLM(ScriptedLM(["```python\nprint(1)\n```", "```python\nsubmit('v')\n```"])).run("q", text="t")
    path = result.save(tmp_path / "ok.json")
    assert main(["view", str(path), "-o", str(tmp_path / "ok.html")]) == 0
    assert "submit(&#x27;v&#x27;)" in (tmp_path / "ok.html").read_text() or "submit('v')" in (tmp_path / "ok.html").read_text()


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("rlmnb")
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "demo" in proc.stdout and "replay" in proc.stdout
