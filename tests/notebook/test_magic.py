"""The %%rlm / %rlm magics in an in-process InteractiveShell, with scripted models (no kernel)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from rlmnb import RunResult, Trajectory
from rlmnb._engine.estimate import DryRunReport
from rlmnb._ground.errors import MissingAPIKey
from rlmnb._notebook.magic import SETTING_FLAGS, RLMMagics, RunFailed, RunInterrupted
from rlmnb.events import MIME_TYPE, ModelReply, RunStarted
from rlmnb.testing import ScriptedLM

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def code(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The in-process shell with the extension loaded, a clean namespace and captured display output."""
    for name in ("RLMNB_MODEL", "RLMNB_SUB_MODEL"):
        monkeypatch.delenv(name, raising=False)
    sh = InteractiveShell.instance()
    sh.reset(new_session=False)
    sh.config.pop("RLMMagics", None)  # %config settings of an earlier test live in the shell's config
    sh.run_line_magic("load_ext", "rlmnb")
    # these tests are about the magic, not the sandbox: the in-process one keeps them fast and timing-free
    # (the kernel sandbox has its own contract and fault suites; test_magic_interrupt uses both)
    sh.magics_manager.registry["RLMMagics"].sandbox = "local"
    # nor about the evidence check: their scripted models submit words they never printed ('done')
    sh.magics_manager.registry["RLMMagics"].evidence_check = False
    published: list[dict[str, Any]] = []
    monkeypatch.setattr(sh.display_pub, "publish",
                        lambda data, metadata=None, *a, **k: published.append({"data": data, **k}))
    sh.published = published  # type: ignore[attr-defined]
    yield sh
    sh.run_line_magic("unload_ext", "rlmnb")
    sh.config.pop("RLMMagics", None)
    sh.reset(new_session=False)


def magics(sh: InteractiveShell) -> RLMMagics:
    return sh.magics_manager.registry["RLMMagics"]  # type: ignore[return-value]


def cell(sh: InteractiveShell, line: str, body: str = "What is it?") -> Any:
    return sh.run_cell_magic("rlm", line, body)


def models(sh: InteractiveShell, replies: list[str] | None = None, sub: Any = None) -> ScriptedLM:
    root = ScriptedLM(replies or [code("print(inputs['text'][:5])"), code("submit('done')")], name="root")
    sh.user_ns.update(root=root, sub=sub or ScriptedLM(lambda m: "sub:" + m[-1]["content"], name="sub"),
                      text="alpha beta gamma")
    return root


def started(result: RunResult) -> RunStarted:
    return result.trajectory.of(RunStarted)[0]


# ---- loading ----------------------------------------------------------------------------------------------
def test_load_ext_registers_both_magics_and_documents_options(shell: InteractiveShell) -> None:
    manager = shell.magics_manager
    assert "rlm" in manager.magics["cell"] and "rlm" in manager.magics["line"]
    doc = magics(shell).rlm.__doc__
    for option in ("-m MODEL", "-s MODEL", "-i NAME=EXPR", "-f NAME=PATH", "--max-iterations N",
                   "--max-llm-calls N", "--timeout SECONDS", "--max-cost USD", "--max-time SECONDS",
                   "--sandbox {local,kernel}", "--schema NAME", "-o NAME", "--continue", "--dry-run", "--quiet",
                   "--no-interpolate", "--no-cache", "%rlm export PATH"):
        assert option in doc, option
    shell.run_line_magic("unload_ext", "rlmnb")
    assert "rlm" not in manager.magics["cell"] and magics not in shell.configurables
    shell.run_line_magic("load_ext", "rlmnb")
    assert sum(isinstance(c, RLMMagics) for c in shell.configurables) == 1


def test_load_ext_imports_nothing_heavy() -> None:
    script = ("import sys, time\nfrom IPython.core.interactiveshell import InteractiveShell\n"
              "sh = InteractiveShell.instance()\nsh.run_line_magic('load_ext', 'rlmnb')\n"
              "heavy = ['litellm', 'pandas', 'numpy', 'ipywidgets', 'pyarrow', 'pydantic', 'tiktoken', 'rlmnb._api']\n"
              "print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# ---- a run ------------------------------------------------------------------------------------------------
def test_cell_value_is_the_answer_and_results_are_stored(shell: InteractiveShell) -> None:
    models(shell)
    outcome = shell.run_cell("%%rlm -m root -s sub -i text -o run\nWhat is the first word?", store_history=True)
    assert outcome.error_in_exec is None and outcome.result == "done"
    run = shell.user_ns["run"]
    assert isinstance(run, RunResult) and run is shell.user_ns["_rlm"] and run.status == "submitted"
    assert started(run).model == "root" and started(run).sub_model == "sub"
    assert [f["name"] for f in started(run).inputs] == ["text"]
    assert shell.user_ns["Out"][outcome.execution_count] == "done"


def test_every_setting_flag_reaches_the_run(shell: InteractiveShell) -> None:
    models(shell)
    cell(shell, "-m root -i text --max-iterations 7 --max-llm-calls 9 --timeout 5 --max-cost 0.5 --max-time 30 "
                "--no-cache --sandbox local --quiet")
    config = started(shell.user_ns["_rlm"]).config
    assert (config["max_iterations"], config["max_llm_calls"], config["timeout"]) == (7, 9, 5.0)
    assert (config["max_cost"], config["max_time"], config["cache"], config["sandbox"]) == (0.5, 30.0, False, "local")
    assert {f.setting for f in SETTING_FLAGS} >= {"max_iterations", "max_llm_calls", "timeout", "max_cost",
                                                  "max_time", "cache"}


def test_inputs_from_expressions_files_directories_and_globs(shell: InteractiveShell, tmp_path: Path) -> None:
    (tmp_path / "policy.md").write_text("Refunds within 30 days.")
    (tmp_path / "notes.md").write_text("second")
    logs = tmp_path / "logs"
    (logs / "app").mkdir(parents=True)
    (logs / "app" / "1.log").write_text("error one")
    (logs / "app" / "2.log").write_text("error two")
    (logs / "notes.txt").write_text("not a log")
    root = models(shell, [code("print(sorted(inputs))"), code(
        "submit({'sample': list(inputs['sample']), 'policy': inputs['policy'], 'dir': sorted(inputs['logs']),"
        " 'glob': sorted(inputs['errs']), 'first': inputs['errs']['app/1.log'], 'n': inputs['n'],"
        " 'inferred': inputs['notes']})")])
    shell.user_ns["words"] = ["a", "b", "c", "d"]
    cell(shell, f"-m root -i sample=words[:2] -i n=len(words) -f policy={tmp_path}/policy.md -f logs={logs} "
                f"-f 'errs={logs}/**/*.log' -f {tmp_path}/notes.md --quiet", "Check.")
    result = shell.user_ns["_rlm"]
    assert result.answer == {"sample": ["a", "b"], "policy": "Refunds within 30 days.",
                             "dir": ["app/1.log", "app/2.log", "notes.txt"], "glob": ["app/1.log", "app/2.log"],
                             "first": "error one", "n": 4, "inferred": "second"}, result.reason
    kinds = {f["name"]: f["kind"] for f in started(result).inputs}
    assert kinds == {"sample": "list", "n": "scalar", "policy": "text_file", "logs": "directory", "errs": "dict",
                     "notes": "text_file"}
    first_prompt = root.requests[0][1]["content"]
    assert 'inputs["errs"]' in first_prompt and "Refunds" in first_prompt  # a preview, as for any input


def test_schema_validates_the_answer(shell: InteractiveShell) -> None:
    @dataclasses.dataclass
    class Finding:
        area: str
        count: int

    models(shell, [code("print(1)"), code("submit({'area': 'billing', 'count': 3})")])
    shell.user_ns["Finding"] = Finding
    assert cell(shell, "-m root -i text --schema Finding --quiet") == Finding("billing", 3)


def test_question_interpolation_and_literal_braces(shell: InteractiveShell) -> None:
    root = models(shell)
    shell.user_ns.update(area="billing", limits={"n": 3})
    cell(shell, "-m root -i text --quiet", "Top {area} issues, at most {limits[n]}? Answer as {{\"area\": ...}}")
    question = started(shell.user_ns["_rlm"]).question
    assert question == 'Top billing issues, at most 3? Answer as {"area": ...}'
    assert question in root.requests[0][1]["content"]
    models(shell)
    cell(shell, "-m root -i text --quiet --no-interpolate", "Keep {area} and {{ as typed")
    assert started(shell.user_ns["_rlm"]).question == "Keep {area} and {{ as typed"
    magics(shell).interpolate = False
    models(shell)
    cell(shell, "-m root -i text --quiet", "Also {literal}")
    assert started(shell.user_ns["_rlm"]).question == "Also {literal}"


# ---- defaults: option > %config > environment ---------------------------------------------------------------
def test_model_and_setting_precedence(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    models(shell)
    shell.user_ns.update(env_root=ScriptedLM([code("print(1)"), code("submit('env')")], name="env-root"),
                         cfg_root=ScriptedLM([code("print(1)"), code("submit('cfg')")], name="cfg-root"),
                         env_sub=ScriptedLM(lambda m: "x", name="env-sub"))
    monkeypatch.setenv("RLMNB_MODEL", "env_root")
    monkeypatch.setenv("RLMNB_SUB_MODEL", "env_sub")
    assert cell(shell, "-i text --quiet") == "env"
    assert (started(shell.user_ns["_rlm"]).model, started(shell.user_ns["_rlm"]).sub_model) == ("env-root", "env-sub")
    shell.run_line_magic("config", "RLMMagics.model = 'cfg_root'")
    shell.run_line_magic("config", "RLMMagics.max_iterations = 6")
    assert cell(shell, "-i text --quiet") == "cfg"
    assert started(shell.user_ns["_rlm"]).config["max_iterations"] == 6
    assert cell(shell, "-m root -i text --max-iterations 4 --quiet") == "done"  # the option wins
    assert started(shell.user_ns["_rlm"]).config["max_iterations"] == 4
    report = magics(shell).config_report()
    assert re.search(r"^  model +'cfg_root'  \(%config\)$", report, re.M)
    assert re.search(r"^  max_iterations +6  \(%config\)$", report, re.M)
    assert re.search(r"^  max_llm_calls +50$", report, re.M)  # a default says nothing more


def test_config_lists_every_setting_with_help(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_line_magic("config", "RLMMagics")
    listing = capsys.readouterr().out
    from rlmnb._ground.config import field_names

    for name in [*field_names(), "model", "sub_model", "quiet", "interpolate", "keep_session"]:
        if name != "extra":
            assert f"RLMMagics.{name}=" in listing, name
    assert "Root turns before the run falls back" in listing  # the setting's own documentation
    shell.run_line_magic("rlm", "config")
    assert re.search(r"^  sub_model +the root model$", capsys.readouterr().out, re.M)


# ---- --continue and --dry-run ------------------------------------------------------------------------------
def test_continue_keeps_sandbox_state_and_conversation(shell: InteractiveShell) -> None:
    models(shell, [code("x = 41\nprint(x)"), code("submit(x)")])
    assert cell(shell, "-m root -i text --quiet", "First question") == 41
    follow = ScriptedLM([code("submit(x + 1)")], name="root2")
    shell.user_ns["root2"] = follow
    assert cell(shell, "-m root2 --continue --quiet", "Now add one") == 42
    sent = json.dumps(follow.requests[0])
    assert "First question" in sent and "Now add one" in sent
    # a new (not continued) run closes the kept sandbox: the old state is gone
    shell.user_ns["root3"] = ScriptedLM([code("print('x' in dir())"), code("submit('x' in dir())")], name="root3")
    assert cell(shell, "-m root3 -i text --quiet", "Fresh") is False


def test_continue_without_a_kept_session_is_a_usage_error(shell: InteractiveShell) -> None:
    models(shell)
    with pytest.raises(UsageError, match="Nothing to continue"):
        cell(shell, "-m root --continue")
    models(shell, [code("print(1)")])  # the script runs out: status error, no session kept
    with pytest.raises(RunFailed):
        cell(shell, "-m root -i text --quiet")
    with pytest.raises(UsageError, match="kept no sandbox"):
        cell(shell, "-m root --continue")


def test_dry_run_calls_no_model(shell: InteractiveShell) -> None:
    root = models(shell)
    report = cell(shell, "-m root -s sub -i text --max-llm-calls 12 --dry-run", "Which words?")
    assert isinstance(report, DryRunReport) and root.requests == [] and shell.user_ns["sub"].requests == []
    assert report.tokens > 0 and [m["role"] for m in report.messages] == ["system", "user"]
    assert "Which words?" in report.messages[1]["content"] and 'inputs["text"]' in report.summary
    assert report.estimate.low_usd == 0.0 and report.estimate.high.sub_calls == 12
    text = repr(report)
    assert "First root request" in text and "Estimated cost: $0.0000 – $0.0000" in text
    assert "Inputs summary" in report._repr_html_() and "<script" not in report._repr_html_()
    # no widget, no run: only the line shown at once while the report is built, then cleared
    assert [p["data"]["text/plain"][:9] for p in shell.published] == ["Dry run: ", ""] and "_rlm" not in shell.user_ns
    with pytest.raises(UsageError, match="cannot be combined"):
        cell(shell, "-m root --dry-run --continue")


# ---- every user mistake is a UsageError before any model call ------------------------------------------------
@pytest.mark.parametrize("line, body, match", [
    ("-m root --bogus", "q", "unrecognized arguments: --bogus"),
    ("-m root --max-iterations many", "q", "invalid int value"),
    ("-m root -i nosuch", "q", "unknown variable 'nosuch'"),
    ("-m root -i x=text[", "q", "not a valid Python expression"),
    ("-m root -i x=1/0", "q", "ZeroDivisionError"),
    ("-m root -i 'text[0:2]'", "q", "give the input a name"),
    ("-m root -i text -i text", "q", "bound twice"),
    ("-m root -i keep_session=text", "q", "reserved"),
    ("-m root -f missing=./no/such/file.md", "q", "no file or directory"),
    ("-m root -f 'logs=./no/such/*.log'", "q", "no file matches"),
    ("-m root -i text --schema Nope", "q", "unknown variable 'Nope'"),
    ("-m root -i text --schema text", "q", "schema must be a pydantic model class or a dataclass"),
    ("-i text", "q", "No model configured"),
    ("-m words -i text", "q", "holds a list, not a model"),
    ("-m root -i text -o 'not valid'", "q", "not a valid variable name"),
    ("-m root -i text", "   \n ", "The cell is empty"),
    ("-m root -i text", "About {missing_name}?", "no variable 'missing_name' exists"),
    ("-m root -i text", "Unbalanced } brace", "write {{ and }}"),
    ("-m root -i text", "Summarise {big}", "Bind large values as inputs"),
    ("-m root -i text --max-llm-calls -1", "q", "max_llm_calls must be"),
    ("-m root -i lock", "q", "not a supported kind of input"),
])
def test_user_mistakes_are_usage_errors_before_any_call(shell: InteractiveShell, line: str, body: str,
                                                        match: str) -> None:
    root = models(shell)
    shell.user_ns.update(words=["a"], lock=threading.Lock(), big="x" * 100_000)
    with pytest.raises(UsageError, match=re.escape(match)):
        cell(shell, line, body)
    assert root.requests == [] and "_rlm" not in shell.user_ns
    # nothing shown, or a widget shown for a run that could not start and then blanked
    last = shell.published[-1] if shell.published else None
    assert last is None or (last["update"] and WIDGET_MIME not in last["data"])


def test_usage_error_is_one_line_in_the_cell_output(shell: InteractiveShell,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    models(shell)
    outcome = shell.run_cell("%%rlm -m root -i nosuch\nq")
    assert isinstance(outcome.error_in_exec, UsageError)
    err = capsys.readouterr()
    shown = (err.out + err.err).strip().splitlines()
    assert shown == ["UsageError: -i nosuch: unknown variable 'nosuch'; define it first or check the spelling."]


def test_missing_api_key_is_a_usage_error_before_the_run(shell: InteractiveShell) -> None:
    class KeyedLM:
        name = "keyed"

        def __init__(self) -> None:
            self.calls = 0

        def check_key(self) -> None:
            raise MissingAPIKey("No API key for openai: set OPENAI_API_KEY (or pass api_key=...).")

        async def acomplete(self, messages: Any, **params: Any) -> Any:
            self.calls += 1
            raise AssertionError("never called")

    keyed = KeyedLM()
    models(shell)
    shell.user_ns["keyed"] = keyed
    with pytest.raises(UsageError, match="set OPENAI_API_KEY"):
        cell(shell, "-m keyed -i text")
    assert keyed.calls == 0 and "_rlm" not in shell.user_ns
    assert shell.published == []  # a key found missing at once: nothing was shown before the error


def test_a_slow_key_check_goes_on_behind_the_view_then_blanks_it(shell: InteractiveShell) -> None:
    shown = threading.Event()

    class SlowKeyLM:  # its key check takes as long as litellm's first import: until the view is on screen
        name = "slow-key"

        def check_key(self) -> None:
            assert shown.wait(30), "the view never showed while the key check ran"
            raise MissingAPIKey("No API key for openai: set OPENAI_API_KEY (or pass api_key=...).")

        async def acomplete(self, messages: Any, **params: Any) -> Any:
            raise AssertionError("never called")

    models(shell)
    shell.user_ns["slow"] = SlowKeyLM()
    publish = shell.display_pub.publish

    def seen(*args: Any, **kwargs: Any) -> None:
        publish(*args, **kwargs)
        shown.set()

    shell.display_pub.publish = seen  # type: ignore[method-assign]
    with pytest.raises(UsageError, match="set OPENAI_API_KEY"):
        cell(shell, "-m slow -i text")
    assert shell.published[0]["data"]["text/plain"] == "RLM run (no events yet)"
    assert "starting…" in shell.published[0]["data"]["text/html"]
    assert shell.published[-1]["data"].get("text/html", "") == ""  # blanked by the error


@pytest.mark.parametrize("line", ["-m gpt-4o -i text", "-m root -i text --max-iterations 0",
                                  "-m root -i text --resume 9", "-m root -i text --confinement nonsense"])
def test_a_bad_option_fails_before_anything_is_shown(line: str, shell: InteractiveShell, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(tmp_path / "runs"))
    models(shell)
    with pytest.raises(UsageError):
        cell(shell, line)
    assert shell.published == [] and "_rlm" not in shell.user_ns


@pytest.mark.slow  # imports litellm (seconds)
def test_missing_api_key_with_litellm_model_string(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    models(shell)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        cell(shell, "-m openai/gpt-5-mini -i text")


# ---- outcomes ---------------------------------------------------------------------------------------------
def test_failed_run_is_one_line_and_keeps_the_result(shell: InteractiveShell,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    models(shell, [code("print(1)")])
    outcome = shell.run_cell("%%rlm -m root -i text -o run --quiet\nq")
    assert isinstance(outcome.error_in_exec, RunFailed)
    err = capsys.readouterr()
    lines = (err.out + err.err).strip().splitlines()
    assert len(lines) == 1 and "ran out of replies" in lines[0] and "_rlm" in lines[0]
    assert shell.user_ns["_rlm"].status == "error" and shell.user_ns["run"] is shell.user_ns["_rlm"]  # -o: any status


def test_keyboard_interrupt_ends_the_run_cleanly(shell: InteractiveShell) -> None:
    import _thread

    models(shell, [code("print(1)"), code("r = llm_query_batched(['a'] * 8)")],
           sub=ScriptedLM(lambda m: "r", latency=30, name="slow"))
    shell.user_ns["keep_me"] = {"a": 1}
    before = {t.ident for t in threading.enumerate()}
    timer = threading.Timer(0.6, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(RunInterrupted, match=r"interrupted after 2 turn.* RunResult is in _rlm and out\."):
            cell(shell, "-m root -s sub -i text -o out")
    finally:
        timer.cancel()
    result = shell.user_ns["_rlm"]
    assert result.status == "interrupted" and len(result.trajectory.of(ModelReply)) == 2
    assert shell.user_ns["out"] is result and shell.user_ns["keep_me"] == {"a": 1}  # -o NAME: any status
    assert {t.ident for t in threading.enumerate() if t.is_alive()} <= before | {timer.ident}
    final = shell.published[-1]
    assert final["update"] and "interrupted" in final["data"]["text/html"]
    assert RunInterrupted("x")._render_traceback_() == ["x"]


def test_widget_is_displayed_and_refreshed_with_the_final_state(shell: InteractiveShell) -> None:
    models(shell, [code("r = llm_query_batched(['a', 'b'])\nprint(r)"), code("submit(r)")])
    magics(shell).allow_first_turn_submit = True
    assert cell(shell, "-m root -s sub -i text") == ["sub:a", "sub:b"]
    placeholder, first, *rest = shell.published
    # at once a static header (no widget models yet), which the widget then replaces in the same output
    assert "starting…" in placeholder["data"]["text/html"] and "application/vnd.jupyter.widget-view+json" not in \
        placeholder["data"]
    assert first["update"] and first["transient"] == placeholder["transient"]
    assert "application/vnd.jupyter.widget-view+json" in first["data"] and rest[-1]["update"]
    final = rest[-1]["data"]
    assert final["text/plain"].startswith("RLM run · answered · 2 turn(s) · 2 sub-call(s)")
    assert "llm_query_batched</b> × 2" in final["text/html"] and "sub:b" in final["text/html"]
    assert Trajectory.from_dict(final[MIME_TYPE]).final().answer == ["sub:a", "sub:b"]  # type: ignore[union-attr]
    shell.published.clear()
    magics(shell).embed_trajectory = False
    models(shell, [code("print(1)"), code("submit(1)")])
    cell(shell, "-m root -i text")
    assert MIME_TYPE not in shell.published[-1]["data"] and "Turn 2" in shell.published[-1]["data"]["text/html"]


def test_quiet_shows_nothing(shell: InteractiveShell) -> None:
    models(shell)
    assert cell(shell, "-m root -i text --quiet") == "done" and shell.published == []
    magics(shell).quiet = True
    models(shell)
    assert cell(shell, "-m root -i text") == "done" and shell.published == []


# ---- %rlm subcommands ---------------------------------------------------------------------------------------
def test_line_subcommands(shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="No %%rlm run yet"):
        shell.run_line_magic("rlm", "last")
    models(shell)
    cell(shell, "-m root -i text --quiet")
    shell.run_line_magic("rlm", "last")
    assert shell.published[-1]["data"]["text/plain"].startswith("RLM run · answered")
    shell.run_line_magic("rlm", f"export {tmp_path}/run.json")
    shell.run_line_magic("rlm", f"export '{tmp_path}/run.html'")
    assert "Saved the last run" in capsys.readouterr().out
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["answer"] == "done" and saved["trajectory"]["schema_version"] == 1
    page = (tmp_path / "run.html").read_text()
    # the extension's viewer inlined (tests/views/test_export_page.py opens it in a browser) over the static tree
    assert page.startswith("<!doctype html>") and "Turn 2" in page and 'id="rlmnb-data-0"' in page
    shell.published.clear()
    shell.run_line_magic("rlm", f"view {tmp_path}/run.json")
    assert "answer: done" in shell.published[-1]["data"]["text/plain"]
    (tmp_path / "junk.json").write_text('{"schema_version": 99, "events": []}')
    for line, match in [(f"export {tmp_path}/run.txt", "ending in .json"), ("export", "needs a path"),
                        (f"export {tmp_path}/nope/run.json", "does not exist"), ("view /no/such.json", "no file"),
                        (f"view {tmp_path}/junk.json", "not a saved rlmnb trajectory"), ("view", "needs the path"),
                        ("frobnicate", "unknown subcommand"), ("", "no subcommand")]:
        with pytest.raises(UsageError, match=match):
            shell.run_line_magic("rlm", line)


def test_reprs_are_stable(shell: InteractiveShell) -> None:
    assert repr(magics(shell)) == "RLMMagics(model='', sandbox='local')"
    assert RLMMagics.class_traits()["sandbox"].default_value == "kernel"  # the default for users
    from rlmnb._notebook.magic import GlobFiles

    assert repr(GlobFiles("logs/*.log", [])) == "GlobFiles('logs/*.log', 0 files)"


# ---- recursion, verification and replay flags (issues 6 and 7) -------------------------------------------
def _rec_code(body: str) -> str:
    return f"```python\n{body}\n```"


def test_recursion_and_verify_flags_reach_the_run(shell: InteractiveShell) -> None:
    from rlmnb.events import AttemptVerified, RunStarted

    def child(messages: list[dict[str, Any]]) -> str:
        done = sum(1 for m in messages if m["role"] == "assistant")
        return _rec_code("print(1)") if done == 0 else _rec_code("submit('the child says hi there')")

    shell.user_ns["root"] = ScriptedLM([_rec_code("r = rlm_query('Greet', who='you')\nprint(r)"),
                                     _rec_code("submit('short')"),
                                     _rec_code("submit(r + ' and a long enough answer')")])
    shell.user_ns["kid"] = ScriptedLM(child)
    shell.user_ns["sub"] = ScriptedLM(lambda m: "x")
    answer = shell.run_cell_magic("rlm", "-m root -s sub --child-model kid --depth 2 --verify min_chars=20 "
                               "--verify pattern=hi --max-revisions 2 --min-confidence 0.5 -i text='t' --quiet",
                               "Say hi")
    result = shell.user_ns["_rlm"]
    assert answer == "the child says hi there and a long enough answer"
    assert [s.depth for s in result.trajectory.of(RunStarted)] == [0, 1]
    attempts = [(a.depth, a.accepted) for a in result.trajectory.of(AttemptVerified)]
    assert attempts == [(1, True), (0, False), (0, True)]


def test_verify_quotes_checks_quotes_against_the_inputs(shell: InteractiveShell) -> None:
    from rlmnb.events import AttemptVerified

    shell.user_ns["root"] = ScriptedLM([_rec_code("print(len(inputs['text']))"),
                                        _rec_code("submit('It says \"the moon is made of cheese\".')"),
                                        _rec_code("submit('It says \"the moon is bright tonight\".')")])
    shell.user_ns["doc"] = "Report: the moon\nis bright   tonight, said the log."
    answer = shell.run_cell_magic("rlm", "-m root -s root --verify quotes -i text=doc --quiet", "What does it say?")
    assert answer == 'It says "the moon is bright tonight".'
    attempts = shell.user_ns["_rlm"].trajectory.of(AttemptVerified)
    assert [a.accepted for a in attempts] == [False, True]
    assert attempts[1].details["quotes"][0]["where"] == "input 'text', offset 8"


def test_refine_and_rounds_flags(shell: InteractiveShell) -> None:
    def brain(messages: list[dict[str, Any]]) -> str:
        if sum(1 for m in messages if m["role"] == "assistant") == 0:
            return _rec_code("print(1)")
        return _rec_code("d = inputs['draft'] + '!' if 'draft' in inputs else 'a'\nsubmit(d)")

    shell.user_ns["brain"] = ScriptedLM(brain)
    assert shell.run_cell_magic("rlm", "-m brain --refine 2 --rounds 2 -i text='t' --quiet", "q") == "a!!"


@pytest.mark.parametrize("line, message", [
    ("--verify min_chars=x", "positive whole number"),
    ("--verify pattern=(", "not a valid regular expression"),
    ("--verify colour=red", "unknown rule"),
    ("--verify judge", "use min_chars=N"),
    ("--verify quotes=x", "shortest quote"),
    ("--rounds 0", "rounds"),
    ("--refine 0", "refine"),
    ("--depth -1", "max_depth"),
])
def test_recursion_flag_mistakes_are_usage_errors(shell: InteractiveShell, line: str, message: str) -> None:
    shell.user_ns["root"] = ScriptedLM([])
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("rlm", f"-m root -i text='t' --quiet {line}", "q")
    assert shell.user_ns["root"].requests == []


def test_replay_flag_reproduces_a_saved_run(shell: InteractiveShell, tmp_path: Path) -> None:
    shell.user_ns["root"] = ScriptedLM([_rec_code("print(llm_query(inputs['text']))"),
                                     _rec_code("submit(llm_query(inputs['text']))")])
    shell.user_ns["sub"] = ScriptedLM(lambda m: m[0]["content"].upper())
    first = shell.run_cell_magic("rlm", "-m root -s sub -i text='abc' --quiet", "Shout")
    path = tmp_path / "run.json"
    shell.user_ns["_rlm"].save(path)
    again = shell.run_cell_magic("rlm", f"--replay {path} -i text='abc' --quiet", "ignored: the record's question")
    assert again == first == "ABC"
    assert shell.user_ns["_rlm"].usage.cost_usd == 0.0
    with pytest.raises(UsageError, match="replay diverged"):
        shell.run_cell_magic("rlm", f"--replay {path} -i text='xyz' --quiet", "q")
    with pytest.raises(UsageError, match="nope.json"):
        shell.run_cell_magic("rlm", f"--replay {tmp_path / 'nope.json'} --quiet", "q")
