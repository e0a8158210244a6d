"""Issue 26 in a real JupyterLab and Chromium: an ended run's view says "cancelled" and "not sent"; "copy code
to a new cell" and "open as DataFrame" insert code that binds the run (rlmnb.saved_run) so it runs in a fresh
kernel; the trajectory viewer's insert buttons say what they did; a tutorial opens clean (nothing to save)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from playwright.sync_api import expect
from test_views_ended import _stopped

from rlmnb import RLM
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import JupyterLab, chromium_page, write_run_notebook
from rlmnb.views import mime_bundle

pytestmark = pytest.mark.integration

TURN = "n = sql('SELECT sum(v) AS s FROM sales')\nr = llm_query('hello')\nprint(n['s'][0], r)\n"
TUTORIAL = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[JupyterLab]:
    root = tmp_path_factory.mktemp("lab26")
    pd.DataFrame({"v": [1, 2, 3]}).to_parquet(root / "sales.parquet")
    sub = ScriptedLM(lambda m: f"reply to {m[-1]['content']}", name="sub")
    run = RLM(ScriptedLM([f"```python\n{TURN}```", "```python\nsubmit('done')\n```"], name="root"), sub,
              sandbox="local", evidence_check=False).run("q", sales=root / "sales.parquet")
    write_run_notebook(root / "run.ipynb", mime_bundle(run.trajectory), cell="%%rlm -m root -o first\nq")
    run.save(root / "run.rlmnb.json")
    write_run_notebook(root / "stopped.ipynb", mime_bundle(_stopped()))
    shutil.copy(TUTORIAL, root / TUTORIAL.name)
    with JupyterLab(root) as server:
        yield server


def _view(page: Any, lab: JupyterLab, name: str) -> Any:
    page.goto(lab.url(f"lab/tree/{name}?reset"))
    view = page.locator(".rlmnb-Trajectory").first
    view.locator(".rlmnb-view").first.wait_for(timeout=60_000)
    return view


def test_an_ended_run_says_cancelled_and_not_sent(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, "stopped.ipynb")
        meters = " ".join(view.locator(".rlmnb-meters").inner_text().split())
        assert "0 / 50 · 2 cancelled, 6 not sent" in meters and "in flight" not in meters, meters
        expect(view.locator(".rlmnb-group-title").first).to_contain_text("2 cancelled · 6 not sent")


def test_inserted_code_binds_the_run_so_it_runs_in_a_fresh_kernel(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, "run.ipynb")
        cells = page.locator(".jp-Notebook .jp-Cell")
        view.locator("button", has_text="copy code to a new cell").first.click()
        expect(cells).to_have_count(2)
        source = cells.nth(1).locator(".cm-content").inner_text()
        lines = source.splitlines()
        assert lines[0] == "from rlmnb import saved_run", source
        assert lines[1].startswith('first = saved_run("') and 'notebook="run.ipynb")' in lines[1], source
        assert 'sql, llm_query = first.workspace().take("sql", "llm_query")' in source and source.endswith(
            TURN.rstrip("\n")), source
        # run it where a fresh kernel would (the notebook's folder, no run in memory): it loads the run from
        # the notebook's saved output and answers the sub-call from the record
        done = subprocess.run([sys.executable, "-c", source.replace("\u00a0", " ")], cwd=lab.root_dir,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout == "6 reply to hello\n", done.stderr[-2000:]

        view.locator("button", has_text="open as DataFrame").first.click()
        expect(cells).to_have_count(3)
        frame = cells.nth(1).locator(".cm-content").inner_text()
        assert "first = saved_run(" in frame and "first.to_frame()" in frame, frame


def test_the_viewers_insert_buttons_say_what_they_did(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, "run.rlmnb.json")
        button = view.locator("button.rlmnb-insert").first
        said = button.evaluate("b => { b.click(); return b.textContent; }")  # what it says at once
        assert said.startswith("no notebook here"), said
        expect(view.locator("button.rlmnb-insert").first).to_have_text(re.compile("no notebook here: (code copied|copy failed)"))


def test_a_tutorial_opens_clean(lab: JupyterLab) -> None:
    with chromium_page() as page:
        page.goto(lab.url(f"lab/tree/{TUTORIAL.name}?reset"))
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        status = page.locator(".jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus").first
        expect(status).to_have_attribute("data-status", "idle", timeout=60_000)  # the kernel answered
        tab = page.locator(".lm-TabBar-tab.jp-mod-current").first
        expect(tab).not_to_have_class("jp-mod-dirty")
        assert "jp-mod-dirty" not in (tab.get_attribute("class") or "")
