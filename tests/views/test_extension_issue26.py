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
FRAMES = "t = sql('SELECT v, v * 10 AS w FROM sales')\nprint('the table:')\nprint(t)\nprint('done')\n"
TUTORIAL = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"
DOCUMENTS = TUTORIAL.with_name("09_documents.ipynb")  # its run reads invoice scans through a vision sub-call


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
    framed = RLM(ScriptedLM([f"```python\n{FRAMES}```", "```python\nsubmit('done')\n```"], name="root"), sub,
                 sandbox="local").run("q", sales=root / "sales.parquet")
    write_run_notebook(root / "frames.ipynb", mime_bundle(framed.trajectory))
    shutil.copy(TUTORIAL, root / TUTORIAL.name)
    shutil.copy(DOCUMENTS, root / DOCUMENTS.name)
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


def test_printed_frames_show_as_tables_with_the_text_the_model_read(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, "frames.ipynb")
        frame = view.locator(".rlmnb-frame")
        expect(frame).to_have_count(1)
        assert frame.get_attribute("data-shape") == "3x2"
        assert frame.locator("thead th").all_inner_texts() == ["", "v", "w"]
        rows = [[c.strip() for c in r.locator("th, td").all_inner_texts()] for r in frame.locator("tbody tr").all()]
        assert rows == [["0", "1", "10"], ["1", "2", "20"], ["2", "3", "30"]], rows
        outputs = [t.strip() for t in view.locator(".rlmnb-turn").first.locator("pre.rlmnb-stdout").all_inner_texts()]
        assert outputs == ["the table:", "done"], outputs  # the rest of the output stays text, around the table
        frame.locator("summary").click()  # the text the model read, one click away
        expect(frame.locator("pre")).to_contain_text("v   w")
        assert frame.locator("summary").inner_text().startswith("3 rows × 2 columns")


def test_the_viewers_insert_buttons_say_what_they_did(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, "run.rlmnb.json")
        button = view.locator("button.rlmnb-insert").first
        said = button.evaluate("b => { b.click(); return b.textContent; }")  # what it says at once
        assert said.startswith("no notebook here"), said
        expect(view.locator("button.rlmnb-insert").first).to_have_text(re.compile("no notebook here: (code copied|copy failed)"))


# Samples, every 5 ms from the page's start, whether the notebook's tab is dirty and the kernel's status: JupyterLab
# marks any notebook dirty for a moment while it loads, so what counts is what happens once the kernel has answered.
WATCH = """window.__rlmnbLog = []; window.addEventListener('DOMContentLoaded', () => { let last = '';
  setInterval(() => { const tab = document.querySelector('.lm-TabBar-tab.jp-mod-current');
    const status = document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus');
    if (!tab || !status) { return; }
    const now = (tab.className.includes('jp-mod-dirty') ? 'dirty ' : 'clean ') + status.getAttribute('data-status');
    if (now !== last) { window.__rlmnbLog.push(now); last = now; } }, 5); });"""


def test_a_tutorial_opens_clean(lab: JupyterLab) -> None:
    with chromium_page() as page:
        page.add_init_script(WATCH)
        page.goto(lab.url(f"lab/tree/{TUTORIAL.name}?reset"))
        # the kernel has started and answered: its status left "starting"/"unknown" (or a brief "busy", which a
        # loaded machine's timer may miss) for "idle", the moment its kernel_info reply reaches the notebook
        page.wait_for_function("""() => { const log = window.__rlmnbLog; const down = log.findIndex(s => !s.endsWith(' idle'));
            return down >= 0 && log.slice(down).some(s => s.endsWith(' idle')); }""", timeout=60_000)
        page.wait_for_timeout(1_000)  # a rewrite prompted by that reply would come within it
        log = page.evaluate("window.__rlmnbLog")
        down = next(i for i, s in enumerate(log) if not s.endswith(" idle"))
        answered = next(i for i, s in enumerate(log) if i > down and s.endswith(" idle"))
        assert all(s.startswith("clean") for s in log[answered:]), log  # nothing rewritten once the kernel answered
        tab = page.locator(".lm-TabBar-tab.jp-mod-current").first
        assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), log


def test_a_vision_sub_call_shows_its_images_as_thumbnails(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = _view(page, lab, DOCUMENTS.name)
        view.locator("input.rlmnb-search-input").fill("total due on this invoice")
        rows = view.locator(".rlmnb-search-results details.rlmnb-call")
        expect(rows).to_have_count(3)
        for i in range(3):  # each call: its one invoice as a thumbnail, and the words the static view says
            expect(rows.nth(i).locator("img.rlmnb-thumb")).to_have_count(1)
            expect(rows.nth(i)).to_contain_text("1 image (800x1000 PNG)")
        assert rows.first.locator("img.rlmnb-thumb").get_attribute("src").startswith("data:image/png;base64,")
