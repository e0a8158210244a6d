"""A notebook with a %%rlm cell executed by nbclient in a real kernel: what the saved file holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.integration

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TRAJECTORY = "application/vnd.rlmnb.trajectory+json"

SETUP = """\
from rlmnb.testing.scenarios import needle_scenario
sc = needle_scenario(100_000, chunks=8)
root, sub, text, expected = sc.root, sc.sub, sc.inputs["text"], sc.expected
"""


def _run(tmp_path: Path, cells: list[str]) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # starts and always shuts down its kernel
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4)  # what a saved notebook holds


def test_saved_notebook_holds_widget_final_html_trajectory_and_answer(tmp_path: Path) -> None:
    nb = _run(tmp_path, [
        "%load_ext rlmnb",
        SETUP,
        "%%rlm -m root -s sub -i text --max-llm-calls 20 -o run\nWhat is the magic number hidden in the text?",
        "run.status, run.answer == expected, Out[3] == expected",
    ])
    rlm_cell = nb.cells[2]
    displays = [o for o in rlm_cell.outputs if o.output_type == "display_data"]
    results = [o for o in rlm_cell.outputs if o.output_type == "execute_result"]
    assert len(displays) == 1 and len(results) == 1, [o.output_type for o in rlm_cell.outputs]
    data = displays[0].data

    # the widget view, and its model in the saved widget state
    model_id = data[WIDGET_VIEW]["model_id"]
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    assert model_id in state and state[model_id]["model_name"] == "VBoxModel"
    html_models = [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert any("answered" in v for v in html_models)  # the widget's own final state was saved too

    # the HTML fallback shows the final state (refreshed through the display id), script-free
    html = data["text/html"]
    assert "answered" in html and "Turn 4/20" in html and "llm_query_batched</b> × 8" in html
    assert "running…" not in html and "<script" not in html.lower()
    assert results[0].data["text/plain"].strip("'") in html

    # the stable text/plain and the trajectory JSON for the JupyterLab extension
    assert data["text/plain"].startswith("RLM run · answered · 4 turn(s) · 8 sub-call(s)")
    trajectory = data[TRAJECTORY]
    assert trajectory["schema_version"] == 1
    kinds = [e["kind"] for e in trajectory["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert trajectory["events"][-1]["status"] == "submitted"
    json.dumps(trajectory)

    # Out holds the answer
    assert nb.cells[3].outputs[0].data["text/plain"] == "('submitted', True, True)"


def test_prints_after_a_run_land_in_their_own_cell(tmp_path: Path) -> None:
    """A run keeps its local sandbox for --continue; the sandbox's stdout router must not capture
    the parent message of later cells (ipykernel routes output by `sys.stdout.set_parent`)."""
    nb = _run(tmp_path, [
        "%load_ext rlmnb",
        SETUP,
        "%%rlm -m root -s sub -i text --max-llm-calls 20 --quiet\nWhat is the magic number hidden in the text?",
        "print('later output stays in its own cell')",
    ])
    streams = [o.text for o in nb.cells[3].outputs if o.output_type == "stream"]
    assert streams == ["later output stays in its own cell\n"], (
        "print() after a %%rlm run went missing: rlmnb._sandbox.local._CaptureRouter replaces sys.stdout while "
        "a session is kept and does not forward ipykernel's set_parent to the original stream")
