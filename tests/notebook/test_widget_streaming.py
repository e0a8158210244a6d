"""In a real JupyterLab and headless Chromium (issue 45): a turn's printed output shows in the live widget while
the turn still runs, the live widget stays over the saved snapshots, and a notebook saved mid-run reopens on the
tree so far and the line that continues it, not on "Error displaying widget: model not found".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_steps import start_run_cell
from playwright.sync_api import expect

from rlmnb.events import MIME_TYPE, Trajectory, event_from_dict
from rlmnb.testing.lab import JupyterLab, chromium_page, wait_cell, write_run_notebook
from rlmnb.views import mime_bundle
from rlmnb.views._snapshot import Snapshot, snapshot_html

pytestmark = pytest.mark.integration

SETUP = '''import asyncio, os
%load_ext rlmnb
from rlmnb.testing import ScriptedLM

class Held(ScriptedLM):
    """Answers at once, except the prompt "hold", which waits until a file named "release" exists."""
    async def acomplete(self, messages, **params):
        while messages[-1]["content"] == "hold" and not os.path.exists("release"):
            await asyncio.sleep(0.05)
        return self.complete(messages, **params)

sub = Held(lambda m: "reply to " + m[-1]["content"], name="sub")
root = ScriptedLM(["```python\\nprint('region  sales\\\\nnorth   120')\\nr = llm_query_batched(['q0', 'hold'])\\n'''\
'''print(len(r))\\n```", "```python\\nsubmit(len(r))\\n```"], name="root")'''
RUN = "%%rlm -m root -s sub --sandbox local\nWhich region sold most?"
RESUME = "%%rlm -m root -s sub --resume 1"


def _live_notebook(root: Path) -> None:
    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(SETUP), nbf.v4.new_code_cell(RUN)]
    nbf.write(nb, root / "live.ipynb")


def _saved_mid_run(root: Path) -> None:
    """A notebook as a kernel lost mid-run leaves it: a snapshot beside a widget view whose model is gone."""
    base = {"run_id": "r1", "root_run_id": "r1"}
    specs: list[tuple[str, dict[str, Any]]] = [
        ("run_started", {"question": "Which region sold most?", "model": "root", "sub_model": "sub",
                         "sandbox": "local"}),
        ("turn_started", {"turn": 1, "max_turns": 20}),
        ("model_reply", {"turn": 1, "text": "```python\nprint('table')\n```"}),
        ("code_output", {"turn": 1, "text": "region  sales\nnorth   120\n"})]
    events = [event_from_dict({"kind": kind, "seq": i, "ts": 1000.0 + i, **base, **fields})
              for i, (kind, fields) in enumerate(specs)]
    note = Snapshot(journal=".rlmnb/runs/20260101-000000-r1.jsonl", resume=RESUME, saved=1004.0)
    bundle = mime_bundle(Trajectory(events))
    bundle[MIME_TYPE]["snapshot"] = note.to_dict()
    bundle["text/html"] = snapshot_html(note) + bundle["text/html"]
    write_run_notebook(root / "saved.ipynb", bundle, cell=RUN, widget_view=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[JupyterLab]:
    root = tmp_path_factory.mktemp("streaming")
    _live_notebook(root)
    _saved_mid_run(root)
    with JupyterLab(root) as server:
        yield server


def test_printed_output_shows_in_the_widget_before_the_turn_ends(lab: JupyterLab) -> None:
    console: list[str] = []
    with chromium_page(console=console) as page:
        output = start_run_cell(page, lab, "live.ipynb")
        widget = output.locator(".rlmnb-widget")
        expect(widget).to_contain_text("north   120", timeout=60_000)  # while "hold" keeps the turn running
        expect(widget).to_contain_text("output so far")
        assert "*" in page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputPrompt").inner_text()
        # a saved snapshot comes within seconds: the live widget stays, the saved tree does not show
        expect(output.locator(".rlmnb-live-host .rlmnb-widget")).to_be_visible(timeout=30_000)
        expect(output.locator(".rlmnb-snapshot")).to_have_count(0)
        (lab.root_dir / "release").write_text("")
        wait_cell(page, 1, timeout=60)
        expect(output.locator(".rlmnb-view")).to_contain_text("north   120", timeout=30_000)  # the final tree
    assert not [line for line in console if "pageerror" in line], console


def test_a_notebook_saved_mid_run_reopens_on_the_tree_and_the_way_on(lab: JupyterLab) -> None:
    with chromium_page() as page:
        page.goto(lab.url("lab/tree/saved.ipynb?reset"))
        output = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea")
        note = output.locator(".rlmnb-snapshot")
        expect(note).to_contain_text(RESUME, timeout=90_000)
        expect(note).to_contain_text("20260101-000000-r1.jsonl")
        expect(output.locator(".rlmnb-view")).to_contain_text("north   120")
        expect(output).not_to_contain_text("model not found")
