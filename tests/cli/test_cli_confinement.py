"""`rlmnb run` / `demo` / `eval` with --confinement, --allow-path and --allow-network: the magic's flags.

The flags are declared once (rlmnb/setting_flags.py) for %%rlm and the command line; a mistake is the
same sentence in both (checked by RLM(...) before any model call), and a run given the flags gets a
kernel confined to exactly what they allow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from rlmnb._cli import main
from rlmnb._sandbox.confinement import policy as confinement
from rlmnb.events import RunStarted, Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.testing.fake_server import FakeServer

BAD_OPTIONS = [
    (["--confinement", "strict"], "confinement must be one of auto, required, off, got 'strict'."),
    (["--allow-path", "/no/such/dir"], "allow_paths: nothing at /no/such/dir; create it or drop the entry."),
    (["--allow-network", "nowhere"], "allow_network entries must be 'host:port' (e.g. '127.0.0.1:8786'), got 'nowhere'."),
    (["--allow-network", "127.0.0.1:99999"], "allow_network entries must be 'host:port'"),
]


@pytest.fixture()
def shell() -> Iterator[object]:
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.reset(new_session=False)
    sh.config.pop("RLMMagics", None)
    sh.run_line_magic("load_ext", "rlmnb")
    try:
        yield sh
    finally:
        sh.run_line_magic("unload_ext", "rlmnb")
        sh.config.pop("RLMMagics", None)
        sh.reset(new_session=False)


@pytest.mark.parametrize("options, message", BAD_OPTIONS)
def test_a_bad_option_is_the_magics_sentence_with_exit_code_2(options: list[str], message: str, shell: object,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-m", "openai/x", "--sandbox", "kernel", *options, "q"]) == 2
    cli_error = capsys.readouterr().err.strip()
    assert cli_error.startswith("rlmnb: " + message) and "\n" not in cli_error, cli_error
    shell.user_ns["root"] = ScriptedLM([])  # type: ignore[attr-defined]
    with pytest.raises(UsageError) as magic_error:
        shell.run_cell_magic("rlm", "-m root --quiet --sandbox kernel " + " ".join(options), "q")  # type: ignore[attr-defined]
    assert cli_error == f"rlmnb: {magic_error.value}"


@pytest.mark.parametrize("command", [["demo", "--size", "2000"],
                                     ["eval", "-m", "openai/x", "--dry-run", "--sizes", "1k"]])
def test_demo_and_eval_take_the_same_flags(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--allow-path", "/no/such/dir"]) == 2
    said = capsys.readouterr()
    assert said.err.strip() == "rlmnb: allow_paths: nothing at /no/such/dir; create it or drop the entry."
    assert "Generating" not in said.out  # said before the demo makes its text


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--confinement auto|required|off" in text and "--allow-path PATH[:rw]" in text
    assert "--allow-network HOST:PORT" in text and "RLMMagics" not in text


def _run(tmp_path: Path, root_replies: list[str], options: list[str], capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, object], Trajectory]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    saved = tmp_path / "traj.json"
    with FakeServer(script={"root": root_replies}).start() as server:
        code = main(["run", "-m", "openai/root", "--api-base", server.url, "--sandbox", "kernel", "--quiet",
                     "--json", "--save", str(saved), *options, "q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), Trajectory.load(saved)


@pytest.mark.integration
@pytest.mark.skipif(confinement.support()[1] != "", reason="no Landlock ABI 4 + seccomp here")
def test_a_run_gets_exactly_what_the_flags_allow(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    (allowed / "data.txt").write_text("allowed body")
    (other / "secret.txt").write_text("not for the sandbox")
    replies = [
        f"```python\nprint(open({str(allowed / 'data.txt')!r}).read())\n"
        f"open({str(allowed / 'out.txt')!r}, 'w').write('written')\n```",
        f"```python\nopen({str(other / 'secret.txt')!r}).read()\n```",
        "```python\nsubmit('done')\n```",
    ]
    data, trajectory = _run(tmp_path, replies, ["--max-iterations", "3",  # submit on the last turn: 'done' unchecked
                                                "--confinement", "required", "--allow-path", f"{allowed}:rw",
                                                "--allow-network", "127.0.0.1:9", "--allow-network", "127.0.0.1:10"],
                            capsys, monkeypatch)
    assert data["answer"] == "done"
    started = next(e for e in trajectory.events if isinstance(e, RunStarted))
    assert started.config["confinement"] == "required"
    assert started.config["allow_paths"] == [f"{allowed}:rw"]
    assert started.config["allow_network"] == ["127.0.0.1:9", "127.0.0.1:10"]
    assert started.confinement is not None and started.confinement["active"].endswith("landlock+seccomp")
    executed = [e for e in trajectory.events if e.kind == "code_executed"]
    assert "allowed body" in executed[0].stdout and not executed[0].error
    assert (allowed / "out.txt").read_text() == "written"
    # refused (Landlock), or not there at all (a mount namespace holding only what was allowed)
    assert executed[1].error_type in ("PermissionError", "FileNotFoundError")
    assert "not for the sandbox" not in json.dumps(trajectory.to_dict())


@pytest.mark.integration
def test_confinement_off_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("readable when off")
    _, trajectory = _run(tmp_path, [f"```python\nprint(open({str(outside)!r}).read())\n```",
                                    "```python\nsubmit('done')\n```"], ["--confinement", "off", "--max-iterations", "2"],
                         capsys, monkeypatch)
    started = next(e for e in trajectory.events if isinstance(e, RunStarted))
    assert started.config["confinement"] == "off"
    assert started.confinement is not None and started.confinement["active"] == "none"
    executed = [e for e in trajectory.events if e.kind == "code_executed"]
    assert "readable when off" in executed[0].stdout
