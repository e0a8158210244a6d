"""A kernel lost mid-run leaves the run in the notebook: the tree so far and the way on (issue 45).

nbclient runs a notebook in a real kernel: a %%rlm cell whose first turn prints a table, then waits in a
sub-call that never answers. Once the cell's saved output holds a snapshot with the printed table, the test
SIGKILLs the kernel. The cell's outputs (what a saved notebook keeps) then hold the tree so far in
`text/html` and the trajectory JSON, and a note naming the run's journal and the line that continues it;
that line, run in a fresh kernel, finishes the run, serving the first turn from the journal.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rlmnb.events import MIME_TYPE, Trajectory
from rlmnb.views import RunTree

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.integration

SCRIPT = ["```python\nprint('region  sales\\nnorth   120')\nr = llm_query('hold')\nprint(r)\n```",
          "```python\nsubmit(r)\n```"]
SETUP = f'''import asyncio, os
%load_ext rlmnb
%config RLMMagics.sandbox = 'local'
from rlmnb.testing import ScriptedLM
SCRIPT = {SCRIPT!r}

class Held(ScriptedLM):
    """Answers "hold" only once a file named "release" exists."""
    async def acomplete(self, messages, **params):
        while messages[-1]["content"] == "hold" and not os.path.exists("release"):
            await asyncio.sleep(0.05)
        return self.complete(messages, **params)

root = ScriptedLM(lambda m: SCRIPT[sum(1 for x in m if x.get("role") == "assistant")], name="root")
sub = Held(lambda m: "reply to " + m[-1]["content"], name="sub")'''
LINE = "%%rlm -m root -s sub -o sales_run"
QUESTION = "Which region sold most?"


def _notebook(cells: list[str]) -> Any:
    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(source) for source in cells]
    return nb


def _snapshot(cell: Any) -> dict[str, Any] | None:
    for output in list(cell.get("outputs", [])):
        data = output.get("data", {}).get(MIME_TYPE)
        if isinstance(data, dict) and "snapshot" in data:
            return data
    return None


def _printed(data: dict[str, Any] | None) -> bool:
    return data is not None and any(e.get("kind") == "code_output" and "north" in e.get("text", "")
                                    for e in data["events"])


def test_a_lost_kernel_leaves_the_tree_so_far_and_the_resume_line(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(tmp_path / "runs"))
    nb = _notebook([SETUP, f"{LINE}\n{QUESTION}"])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    failure: list[BaseException] = []

    def execute() -> None:
        try:
            client.execute()
        except BaseException as exc:  # the kernel dies under it: DeadKernelError (or a cell error)
            failure.append(exc)

    runner = threading.Thread(target=execute, daemon=True)
    runner.start()
    deadline = time.monotonic() + 180
    while not _printed(_snapshot(nb.cells[1])):
        assert runner.is_alive() and time.monotonic() < deadline, f"no snapshot with the printed table: {failure}"
        time.sleep(0.1)  # nbclient fills the notebook from its own thread: there is nothing to wait on
    os.kill(client.km.provisioner.pid, signal.SIGKILL)  # nbclient's manager is async: the process itself
    runner.join(120)
    assert not runner.is_alive() and type(failure[0]).__name__ == "DeadKernelError", failure
    saved = tmp_path / "saved.ipynb"
    nbformat.write(nb, saved)

    # what the saved notebook holds: the tree so far, and where the journal is and the line that continues it
    cell = nbformat.read(saved, as_version=4).cells[1]
    data = _snapshot(cell)
    assert data is not None
    tree = RunTree(Trajectory.from_dict(data).events)
    turn = tree.turn_view(tree.root_id or "", 1)
    assert not turn["executed"] and "north   120" in turn["streamed_stdout"]
    journal = Path(data["snapshot"]["journal"])
    assert journal.parent == tmp_path / "runs" and journal.is_file()
    resume = data["snapshot"]["resume"]
    assert resume == f"{LINE} --resume 1"
    output = next(o for o in cell.outputs if MIME_TYPE in o.get("data", {}))
    assert resume in output["data"]["text/html"] and "north   120" in output["data"]["text/html"]
    assert journal.name in output["data"]["text/plain"]

    # the line in a fresh kernel finishes the run: turn 1's reply comes from the journal
    (tmp_path / "release").write_text("")
    again = _notebook([SETUP, f"{resume}\n{QUESTION}",
                       "assert sales_run.status == 'submitted', sales_run\nprint(sales_run.answer)\n"
                       "print(len(root.requests))"])
    nbclient.NotebookClient(again, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for o in again.cells[2].outputs)
    assert printed.split() == ["reply", "to", "hold", "1"]  # one live root call: turn 2's
    final = json.dumps(next(o for o in again.cells[1].outputs if MIME_TYPE in o.get("data", {}))["data"][MIME_TYPE])
    assert '"snapshot"' not in final and '"run_resumed"' in final
