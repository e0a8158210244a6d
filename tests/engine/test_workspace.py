"""A turn's code runs where "copy code to a new cell" pastes it: the extension's header binds the run's inputs
and primitives with `RunResult.workspace().take(...)`, sub-calls answered from the run's record (a prompt the
run never sent says how to go live); "open as DataFrame" in a reopened notebook loads the saved run with
`rlmnb.saved_run` from the notebook's own output."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rlmnb import RLM, RunResult, saved_run
from rlmnb._engine.workspace import PRIMITIVES
from rlmnb._ground.errors import ConfigError
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import write_run_notebook
from rlmnb.views import mime_bundle

ROOT = Path(__file__).resolve().parents[2]
FORMAT_JS = ROOT / "extension" / "lib" / "format.js"
TURN = ("n = sql('SELECT count(*) AS n, sum(v) AS s FROM sales')\n"
        "r = llm_query_batched([f'size {x}' for x in n['n']])\n"
        "print(n['s'][0], r, llm_query('hello'), len(inputs['notes']))\n")


def _node(expr: str) -> str:
    if shutil.which("node") is None or not FORMAT_JS.is_file():
        pytest.skip("needs node and the built extension (make extension)")
    script = f"import('{FORMAT_JS.as_uri()}').then(m => process.stdout.write({expr}))"
    return subprocess.run(["node", "--no-warnings", "-e", script], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def runnable(code: str) -> str:
    """What the extension inserts for a turn's code (extension/src/format.ts runnableCode)."""
    return _node(f"m.runnableCode({json.dumps(code)})")


@pytest.fixture
def run(tmp_path: Path) -> RunResult:
    path = tmp_path / "sales.parquet"
    pd.DataFrame({"v": [1, 2, 3]}).to_parquet(path)
    sub = ScriptedLM(lambda messages: f"reply to {messages[-1]['content']}", name="sub")
    root = ScriptedLM([f"```python\n{TURN}```", "```python\nsubmit('done')\n```"], name="root")
    result = RLM(root, sub, sandbox="local", evidence_check=False).run("q", sales=path, notes="some notes")
    assert result.status == "submitted"
    return result


def test_the_inserted_cell_runs_in_the_notebook_with_sub_calls_from_the_record(
        run: RunResult, capsys: pytest.CaptureFixture[str]) -> None:
    seen = run.trajectory.of(CodeExecuted)[0].stdout
    cell = runnable(TURN)
    assert cell.startswith("# this turn's code, with the run's inputs, sql, llm_query, llm_query_batched bound")
    assert 'inputs, sql, llm_query, llm_query_batched = {run}.workspace().take("inputs", "sql", "llm_query", ' \
           '"llm_query_batched")' in cell and cell.endswith(TURN)
    namespace: dict[str, Any] = {"_rlm": run}
    exec(cell.replace("{run}", "_rlm"), namespace)  # a notebook cell: the kernel's namespace, nothing else bound
    assert capsys.readouterr().out == seen  # what the model saw, with no model call
    ws = run.workspace()
    with pytest.raises(LookupError, match=r"never sent this prompt .* use \.workspace\(live=True\)"):
        ws.llm_query("a prompt the run never sent")
    live = run.workspace(live=True, sub_model=ScriptedLM(lambda m: "fresh", name="live"))
    assert live.llm_query("a prompt the run never sent") == "fresh"
    assert ws.submit({"a": 1}) == {"a": 1} and ws.FINAL("x") == "x"


def test_names_only_in_the_sandbox_are_said_in_the_cell_and_plain_code_is_unchanged() -> None:
    cell = runnable("c = rlm_query('x')\nm = llm_map(items, 'y')\n")
    assert "# rlm_query, llm_map exist only in the run's sandbox: this cell fails where it calls them" in cell
    assert "workspace()" not in cell
    assert runnable("print(1 + 1)\n") == "print(1 + 1)\n"
    names = json.loads(_node("JSON.stringify(m.WORKSPACE_NAMES)"))
    assert tuple(names) == PRIMITIVES  # the header and RunResult.workspace() agree


def test_saved_run_loads_the_run_from_the_notebooks_output_in_a_fresh_kernel(run: RunResult, tmp_path: Path) -> None:
    notebook = write_run_notebook(tmp_path / "analysis.ipynb", mime_bundle(run.trajectory))
    loaded = saved_run(run.run_id, notebook=notebook)  # no IPython here: nothing in "this kernel"
    assert loaded.status == "submitted" and loaded.answer == "done" and loaded.run_id == run.run_id
    assert loaded.to_frame().equals(run.to_frame())
    # the file input is re-read from its recorded path; the in-memory one must be passed again
    with pytest.raises(ConfigError, match=r"input\(s\) notes were in-memory values.*workspace\(notes=\.\.\.\)"):
        loaded.workspace()
    inputs, sql, llm_query = loaded.workspace(notes="some notes").take("inputs", "sql", "llm_query")
    assert sql("SELECT sum(v) AS s FROM sales").iloc[0, 0] == 6 and llm_query("hello") == "reply to hello"
    with pytest.raises(ConfigError, match=r"analysis\.ipynb holds no saved output of run 'nope'"):
        saved_run("nope", notebook=notebook)


def test_saved_run_prefers_this_kernels_run(run: RunResult) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["first"] = run
    try:
        assert saved_run(run.run_id, notebook="/no/such.ipynb") is run
    finally:
        del shell.user_ns["first"]


def test_open_as_dataframe_inserts_code_that_loads_the_saved_run(run: RunResult, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_run_notebook(tmp_path / "analysis.ipynb", mime_bundle(run.trajectory), cell="%%rlm -m root -o first\nq")
    frame = "{run}.to_frame()  # one row per sub-call"
    cell = _node(f"m.insertedCode({json.dumps(frame)}, 'first', {json.dumps(run.run_id)}, 'work/analysis.ipynb')")
    assert cell.splitlines()[:2] == [
        "from rlmnb import saved_run",
        f'first = saved_run("{run.run_id}", notebook="analysis.ipynb")  # this kernel\'s run, else the one saved in '
        f"analysis.ipynb"]
    monkeypatch.chdir(tmp_path)  # a reopened notebook's fresh kernel: its folder, no run in memory
    namespace: dict[str, Any] = {}
    exec(cell, namespace)
    assert namespace["first"].to_frame().equals(run.to_frame())
    # the live widget (no run id: the run is this kernel's) keeps the variable, and says what _rlm is
    assert _node(f"m.insertedCode({json.dumps(frame)}, '_rlm', undefined, 'a.ipynb')") == (
        "# _rlm: the last %%rlm run of this kernel (add -o NAME to a cell to keep its run)\n"
        "_rlm.to_frame()  # one row per sub-call")
