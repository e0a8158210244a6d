"""The notebook experience in a real JupyterLab and headless Chromium (issue 13), one server for the module.

Saved outputs (no kernel): dollar signs render literally (the rendered text is checked, not the HTML),
an interrupted run reads the same in the extension and in the static HTML, the search states its scope,
and a 2,000-call run can be sorted, filtered and seen on a timeline; a dict answer keeps its key order
after the notebook is saved (nbformat sorts keys). A live kernel: re-running the quickstart cell, a typo'd
model variable, something visible while a run's model library (litellm) loads for seconds, and the
progress meters of a live batch.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from lab_steps import open_and_set_up
from playwright.sync_api import expect
from sandbox_support import code

from rlmnb import RLM, Trajectory
from rlmnb.events import SubCallFinished
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import (
    JupyterLab,
    chromium_page,
    run_cell,
    wait_cell,
    write_run_notebook,
)
from rlmnb.views import mime_bundle, render_html

pytestmark = pytest.mark.integration

MONEY = "What costs $0.25/$2 per million? Between $0.6400–$0.7441."


def _dry_run_html() -> tuple[str, str]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "rlmnb")
    shell.user_ns.update(root=ScriptedLM(["x"], name="root"), text="hello")
    report = shell.run_cell_magic("rlm", "-m root -i text --dry-run", MONEY)
    shell.run_line_magic("unload_ext", "rlmnb")
    return report._repr_html_(), repr(report)


def _interrupted() -> Trajectory:
    import _thread
    import threading

    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    try:
        result = RLM(ScriptedLM([code("print(1)"), code("x = llm_query_batched(['a'] * 4)")], name="root"),
                     ScriptedLM(lambda m: "r", latency=30, name="sub"), sandbox="local").run(MONEY, text="t")
    finally:
        timer.cancel()
    assert result.status == "interrupted"
    return result.trajectory


def _big(calls: int = 2_000) -> Trajectory:
    """A run of `calls` sub-calls with long prompts (the record keeps excerpts), one slow outlier, an error,
    and two calls marked retried / rate-limited as the litellm adapter records them."""
    def sub(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if prompt.startswith("item 13:"):
            raise ValueError("refused item 13")
        return "ok " + prompt[:12]

    root = ScriptedLM([code(f"r = llm_query_batched([f'item {{i}}: ' + 'x' * 3000 for i in range({calls})])"),
                       code("submit({'zeta': len(r), 'alpha': 'last', 'mid': [1, 2]})")], name="root")
    result = RLM(root, ScriptedLM(sub, name="sub", latency=0.01), sandbox="local",
                 max_llm_calls=calls).run("big", text="t")
    events, finished = [], 0
    for e in result.trajectory.events:
        if isinstance(e, SubCallFinished):
            finished += 1
            if finished in (41, 42):
                e = dataclasses.replace(e, meta={"retries": 2, "rate_limited": 1 if finished == 41 else 0})
            elif finished == 61:
                e = dataclasses.replace(e, latency_s=9.0)
        events.append(e)
    return Trajectory(events)


def _queued() -> tuple[Trajectory, Trajectory]:
    """Six calls through two slots; and the same run as rlmnb saved it before slots were recorded."""
    root = ScriptedLM([code("r = llm_query_batched([f'q{i}' for i in range(6)])"), code("submit(len(r))")])
    run = RLM(root, ScriptedLM(lambda m: "x", name="sub", latency=0.1, count_usage=False), sandbox="local",
              max_concurrency=2, min_concurrency=1, cache=False).run("queued", text="t")
    data = run.trajectory.to_dict()
    data["events"] = [{k: v for k, v in e.items() if k != "queued_s"} for e in data["events"]
                      if e["kind"] != "sub_call_sent"]
    return run.trajectory, Trajectory.from_dict(data)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[JupyterLab]:
    root = tmp_path_factory.mktemp("nbx")
    html, text = _dry_run_html()
    interrupted = _interrupted()
    queued, old = _queued()
    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [
        nbf.v4.new_code_cell("%%rlm --dry-run", outputs=[nbf.v4.new_output(
            "display_data", data={"text/html": html, "text/plain": text})]),
        nbf.v4.new_code_cell("interrupted", outputs=[nbf.v4.new_output(
            "display_data", data=mime_bundle(interrupted))]),
        nbf.v4.new_code_cell("interrupted, static", outputs=[nbf.v4.new_output(
            "display_data", data={"text/html": render_html(interrupted), "text/plain": "static"})]),
        nbf.v4.new_code_cell("queued", outputs=[nbf.v4.new_output("display_data", data=mime_bundle(queued))]),
        nbf.v4.new_code_cell("old", outputs=[nbf.v4.new_output("display_data", data=mime_bundle(old))]),
    ]
    nbf.write(nb, root / "saved.ipynb")
    write_run_notebook(root / "big.ipynb", mime_bundle(_big()), cell="%%rlm -m root -s sub -o big\nbig")
    server = JupyterLab(root)
    server.trust(root / "saved.ipynb")
    with server:
        yield server


def _rendered(page: Any, lab: JupyterLab, name: str) -> None:
    page.goto(lab.url(f"lab/tree/{name}?reset"))
    page.locator(".jp-Notebook .jp-OutputArea-output").first.wait_for(timeout=90_000)
    page.locator(".jp-Notebook .rlmnb-view").first.wait_for(timeout=90_000)
    time.sleep(1.0)  # MathJax typesets after the output is attached: give it the chance to do harm


def test_dollars_render_literally_and_interrupted_runs_read_the_same(lab: JupyterLab) -> None:
    with chromium_page() as page:
        _rendered(page, lab, "saved.ipynb")
        outputs = page.locator(".jp-Notebook .jp-Cell .jp-OutputArea")
        dry = " ".join(outputs.nth(0).inner_text().split())
        assert "Estimated cost: $0.0000 – $0.0000" in dry and "$0 / $0 per million" in dry, dry
        assert page.locator(".jp-Notebook mjx-container, .jp-Notebook .MathJax").count() == 0
        extension = " ".join(outputs.nth(1).inner_text().split())
        static = " ".join(outputs.nth(2).inner_text().split())
        for text in (extension, static):
            assert MONEY in text  # the question, dollars and all
            assert "interrupted: this code did not finish" in text, text
            assert "Interrupted" in text and "The partial trajectory above is kept." in text
            assert "(no code)" not in text and "running…" not in text
        assert outputs.nth(1).locator(".rlmnb-view").count() == 1  # the extension's view
        assert outputs.nth(2).locator(".rlmnb-view").count() == 0  # the static HTML
        # queued time apart from running time: two calls in flight at most, four queued; a run saved before
        # slots were recorded shows as it did (every started call in flight, no queue)
        for n, lanes, queued in ((3, "2", "4"), (4, "6", "0")):
            view = outputs.nth(n).locator(".rlmnb-view")
            view.locator("button.rlmnb-timeline-toggle").click()
            timeline = view.locator(".rlmnb-timeline-wrap")
            expect(timeline).to_have_attribute("data-lanes", lanes)
            expect(timeline).to_have_attribute("data-queued", queued)
            assert ("queued p50" in view.inner_text()) == (n == 3)


def test_a_2000_call_run_sorts_filters_and_shows_its_timeline(lab: JupyterLab) -> None:
    with chromium_page() as page:
        _rendered(page, lab, "big.ipynb")
        view = page.locator(".rlmnb-view").first
        scope = view.locator(".rlmnb-scope")
        expect(scope).to_contain_text("prompts as recorded: 2,000 of the 2,000 prompts are longer than the record")
        status, rows = view.locator(".rlmnb-search-status"), view.locator(".rlmnb-search-results details.rlmnb-call")
        view.locator("select.rlmnb-sort").select_option("latency")
        expect(status).to_have_text("2,000 sub-calls")
        expect(rows).to_have_count(50)
        expect(rows.first).to_contain_text("9.0 s")  # the slow outlier comes first
        expect(rows.first.locator(".rlmnb-tag-slow")).to_have_count(1)
        view.locator("select.rlmnb-filter").select_option("error")
        expect(status).to_have_text("1 sub-call · errors")
        expect(rows.first).to_contain_text("refused item 13")
        view.locator("select.rlmnb-filter").select_option("retried")
        expect(status).to_have_text("2 sub-calls · retried")
        expect(rows.first.locator(".rlmnb-tag-retried")).to_have_count(1)
        view.locator("select.rlmnb-filter").select_option("rate")
        expect(status).to_have_text("1 sub-call · rate-limited")
        view.locator("select.rlmnb-filter").select_option("all")
        view.locator("input.rlmnb-search-input").fill("item 1999:")
        expect(status).to_have_text("1 matching sub-call")
        view.locator("button.rlmnb-timeline-toggle").click()
        timeline = view.locator(".rlmnb-timeline-wrap")
        expect(timeline).to_have_count(1)
        assert view.locator("svg.rlmnb-timeline rect[data-call-id]").count() == 2_000
        assert 1 < int(timeline.get_attribute("data-lanes") or 0) <= 64  # concurrency, at most the limit
        assert int(timeline.get_attribute("data-queued") or 0) > 0  # the calls waiting for a slot, apart
        assert view.locator("svg.rlmnb-timeline rect.rlmnb-bar-error").count() == 1
        assert view.locator("svg.rlmnb-timeline rect.rlmnb-bar-slow").count() >= 1
        view.locator("svg.rlmnb-timeline rect.rlmnb-bar-error").click(force=True)
        expect(status).to_contain_text("picked on the timeline")
        expect(rows.first).to_contain_text("refused item 13")
        # the dict answer in the run's own key order, though the saved notebook sorted its keys
        answer = view.locator(".rlmnb-answer pre.rlmnb-json").inner_text()
        assert answer.index("zeta") < answer.index("alpha") < answer.index("mid"), answer
        # "open as DataFrame" inserts a cell with the run's to_frame() below the output
        view.locator("button.rlmnb-insert", has_text="open as DataFrame").click()
        cells = page.locator(".jp-Notebook .jp-Cell")
        expect(cells).to_have_count(2)
        expect(cells.nth(1).locator(".jp-InputArea")).to_contain_text("big.to_frame()")
        # and a turn's code goes to a new cell the same way
        view.locator(".rlmnb-turn[data-turn='1'] button.rlmnb-insert").click()
        expect(cells).to_have_count(3)
        expect(cells.nth(1).locator(".jp-InputArea")).to_contain_text("llm_query_batched")


# ---- a live kernel -------------------------------------------------------------------------------------

SETUP = """import os
os.environ["OPENAI_API_KEY"] = "sk-test-not-used"  # the key check passes; no request is ever sent
%load_ext rlmnb
%config RLMMagics.max_concurrency = 4
from rlmnb.testing import ScriptedLM
from rlmnb.testing.generators import haystack
from rlmnb.testing.scenarios import needle_models
text = haystack(2_000_000, seed=1).text
root, sub = needle_models(chunks=20, text_chars=len(text))
quick = ScriptedLM(["```python\\nprint('quick')\\n```", "```python\\nsubmit('quick')\\n```"], name="quick")
batcher = ScriptedLM(["```python\\nr = llm_query_batched([f'q{i}' for i in range(60)])\\n```",
                      "```python\\nsubmit(len(r))\\n```"], name="batcher")
slow = ScriptedLM(lambda m: "x", name="slow", latency=0.25)"""
QUICKSTART = "%%rlm -m root -s sub -i text -o run\nWhat is the magic number hidden in the text?"
TYPO = "%%rlm -m roots -s sub -i text\nWhat is the magic number?"
SLOW_IMPORT = "%%rlm -m quick -s openai/gpt-4o-mini -i text --sandbox local\nq"
LIVE_BATCH = "%%rlm -m batcher -s slow -i text --sandbox local --max-llm-calls 100\nq"


@pytest.fixture(scope="module")
def live(lab: JupyterLab) -> str:
    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(src) for src in (SETUP, QUICKSTART, TYPO, SLOW_IMPORT, LIVE_BATCH)]
    nbf.write(nb, lab.root_dir / "live.ipynb")
    return "live.ipynb"


def test_a_live_kernel(lab: JupyterLab, live: str) -> None:
    with chromium_page() as page:
        open_and_set_up(page, lab, live, cells=5)
        outputs = [page.locator(".jp-Notebook .jp-Cell").nth(i).locator(".jp-OutputArea") for i in range(5)]

        # 1. the quickstart cell, run twice: the same answer both times (no ScriptExhausted)
        for _ in range(2):
            run_cell(page, 1)
            wait_cell(page, 1)
            expect(outputs[1].locator(".rlmnb-view")).to_have_count(1, timeout=60_000)
            text = outputs[1].inner_text()
            assert "ScriptExhausted" not in text and "answered" in text, text

        # 5. a typo'd model variable: one line, no litellm
        run_cell(page, 2)
        wait_cell(page, 2)
        lines = [line for line in outputs[2].inner_text().splitlines() if line.strip()]
        assert len(lines) == 1 and "no variable 'roots'; did you mean 'root'?" in lines[0], lines

        # 3. a first run whose model library loads for seconds shows something within 500 ms
        pressed = run_cell(page, 3)
        outputs[3].locator(".rlmnb-trajectory, .rlmnb-widget").first.wait_for(timeout=30_000)
        shown = time.perf_counter() - pressed
        assert "starting…" in outputs[3].inner_text() or "running" in outputs[3].inner_text()
        outputs[3].locator(".rlmnb-widget").wait_for(timeout=30_000)  # the live widget takes its place
        wait_cell(page, 3)
        expect(outputs[3].locator(".rlmnb-view")).to_have_count(1, timeout=60_000)
        header = outputs[3].locator(".rlmnb-header").inner_text()
        assert "set-up" in header, header  # the wait before the run's first step is counted and said
        # litellm's first import takes 2-4 s here (../shared/facts.md): a view within 2 s showed while it loaded. Not a
        # tighter figure: a timed assertion fails on a loaded machine (0.52 s against 0.5 once in CI), speed is benched
        assert shown < 2.0, f"the first thing showed after {shown:.2f} s, not while the model library loaded"

        # 4. a live batch: replies in, calls in flight, budget; the batch's rate and ETA
        run_cell(page, 4)
        meter = outputs[4].locator(".rlmnb-meter[data-meter='sub-calls'] .rlmnb-meter-text")
        # only calls holding one of the 4 slots are in flight; the rest are queued
        expect(meter).to_contain_text(re.compile(r"\(\+[1-4] in flight, \+\d+ queued\) / 100"), timeout=60_000)
        expect(outputs[4]).to_contain_text("/s · ETA", timeout=30_000)
        expect(outputs[4]).to_contain_text("of 60 replied")
        wait_cell(page, 4)
        expect(outputs[4].locator(".rlmnb-view .rlmnb-meter-text").nth(1)).to_have_text("60 / 100", timeout=60_000)
