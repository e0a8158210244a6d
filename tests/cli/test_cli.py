"""The rlmnb command: demo, run (through real HTTP to the fake server), view, replay, and its errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlmnb._cli import _parser, main
from rlmnb.testing.fake_server import FakeServer
from rlmnb.views._format import fmt_cost


def test_demo_prints_the_trajectory_and_writes_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "demo.html"
    assert main(["demo", "--size", "300000", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "Turn 1" in out or "turn 1" in out
    assert "The answer is correct" in out and "llm_query_batched" in out
    page = html.read_text()
    assert page.lower().startswith("<!doctype html>") and "<details" in page


def test_demo_says_one_time_in_its_header_and_closing_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--size", "300000", "--html", str(tmp_path / "demo.html")]) == 0
    out = capsys.readouterr().out
    header = re.search(r"^RLM run · .* · ([\d.,]+ m?s)$", out, re.M)
    closing = re.search(r"the run took ([\d.,]+ m?s) \(", out)
    assert header and closing and header.group(1) == closing.group(1), out[-400:]


def test_the_first_run_of_a_process_says_where_its_journal_goes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._engine import journal

    monkeypatch.setattr(journal, "_noted", set())  # a fresh process
    monkeypatch.delenv("RLMNB_JOURNAL_DIR", raising=False)  # the default: .rlmnb/runs in the working folder
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".rlmnb" / "runs"
    said = []
    for _ in range(2):
        assert main(["demo", "--size", "2000", "--html", str(tmp_path / "demo.html")]) == 0
        said.append([line for line in capsys.readouterr().out.splitlines() if str(folder) in line])
    assert len(said[0]) == 1 and said[1] == []  # one line, once
    assert len(list(folder.glob("*.jsonl"))) == 2
    assert (tmp_path / ".rlmnb" / ".gitignore").read_text().splitlines()[-1] == "*"  # never committed by accident


def test_an_unknown_option_suggests_no_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["run", "-m", "openai/x", "--bogus", "q"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "--bogus" in err and "--rounds" not in err and "did you mean" not in err


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
    (["view", "/no/such.json"], "/no/such.json"),
    (["replay", "/no/such.json"], "/no/such.json"),
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
    assert str(bogus) in capsys.readouterr().err
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


def _actions(parser: argparse.ArgumentParser, path: str = "rlmnb") -> list[tuple[str, argparse.Action]]:
    """Every action of the parser and of its subcommands' parsers, with the command it belongs to."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _actions(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_option_of_every_command_has_help() -> None:
    actions = _actions(_parser())
    assert len(actions) > 40
    missing = [f"{where} {'/'.join(a.option_strings) or a.dest}" for where, a in actions
               if not (a.help or "").strip()]
    assert missing == []


def test_eval_help_says_each_option_in_one_line_and_lists_the_names_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._eval.tasks import TASK_NAMES

    monkeypatch.setenv("COLUMNS", "100")
    evaluate = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["eval"]
    text = evaluate.format_help()
    options, _, epilog = text.partition("\n\ntasks")
    helps: dict[str, list[str]] = {}  # option -> the lines of its help text
    current = ""
    for line in options.split("options:", 1)[1].splitlines()[1:]:
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            helps[current] = [line[24:].strip()] if len(line) > 24 and line[22:24] == "  " else []
        elif line.strip():
            helps[current].append(line.strip())
    assert len(helps) == len(evaluate._actions)  # every option, -h included
    assert {option: lines for option, lines in helps.items() if len(lines) != 1} == {}
    assert all(name in epilog for name in (*TASK_NAMES, "ruler:", "jsonl:", "oolong_synth", "rlm_no_sub", "fast_rlm"))
    listed_once = ("niah", "multihop", "ruler:", "jsonl:", "oolong_synth", "longbench_v2", "rlm_no_sub", "dspy_rlm")
    assert [name for name in listed_once if name in options.split("options:", 1)[1]] == []


def test_a_missing_key_is_said_before_litellm_is_imported(tmp_path: Path) -> None:
    notes = tmp_path / "n.txt"
    notes.write_text("x")
    code = ("import sys\nfrom rlmnb._cli import main\n"
            f"code = main(['run', '-m', 'openai/gpt-5-mini', '-f', 'n={notes}', 'q'])\n"
            "print(code, 'litellm' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr and "--api-key" in proc.stderr


@pytest.mark.parametrize("key", [None, "sk-given"])
def test_run_takes_api_key_and_a_local_server_needs_none(key: str | None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    notes = tmp_path / "notes.txt"
    notes.write_text("The code is 77.")
    script = {"root": ["```python\nprint(inputs['notes'])\n```", "```python\nsubmit('77')\n```"]}
    with FakeServer(script=script, api_key=key) as server:
        argv = ["run", "-m", "openai/root", "--api-base", server.url, "--sandbox", "local", "-f", f"notes={notes}",
                "--json", "What is the code?"]
        code = main(argv + (["--api-key", key] if key else []))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["answer"] == "77"
    assert key is None or key not in captured.err + captured.out


def test_api_key_reaches_a_hosted_provider_without_api_base(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    notes = tmp_path / "n.txt"
    notes.write_text("The code is 77.")
    script = {"gpt-x": ["```python\nprint(inputs['n'])\n```", "```python\nsubmit('77')\n```"]}
    with FakeServer(script=script, api_key="sk-right") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # the "hosted" provider is the fake server
        code = main(["run", "-m", "openai/gpt-x", "--api-key", "sk-right", "--sandbox", "local", "-f", f"n={notes}",
                     "--json", "q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["answer"] == "77"


def test_verbose_prints_each_turns_code_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("The code is 77.")
    script = {"root": ["```python\nprint('seen:', inputs['notes'][-3:-1])\n```",
                       "```python\nx = 1 / 0\n```", "```python\nsubmit('77')\n```"]}
    with FakeServer(script=script) as server:
        assert main(["run", "-m", "openai/root", "--api-base", server.url, "--sandbox", "local", "-v",
                     "-f", f"notes={notes}", "What is the code?"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "77"
    cost = fmt_cost(0.0, 3, ("openai/root",))  # the fake server's model has no price: the cost says so, naming it
    assert "$0.0000" not in err and cost in err
    assert "print('seen:', inputs['notes'][-3:-1])" in err and "seen: 77" in err
    assert "x = 1 / 0" in err and "ZeroDivisionError" in err
    assert err.index("seen: 77") < err.index("x = 1 / 0") < err.index("finished: submitted")
