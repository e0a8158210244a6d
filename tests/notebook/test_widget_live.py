"""The live widget's buttons and theme in a real JupyterLab and headless Chromium, while a run is going.

A scripted run whose last two sub-calls are held open (until the test writes files) keeps the cell running:
with rlmnb's extension (the normal install, dark theme) "copy code to a new cell" and "open as DataFrame"
insert their cells below the running cell, the copy buttons fill the clipboard, and the widget is dark;
without the extension the copy buttons still copy (the browser's clipboard API) and no insert button shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import COLOUR_HELPERS
from lab_steps import start_run_cell
from playwright.sync_api import expect

from rlmnb.testing.lab import JupyterLab, chromium_page, wait_cell

pytestmark = pytest.mark.integration


SETUP = '''import asyncio, os
%load_ext rlmnb
from rlmnb.testing import ScriptedLM

class Held(ScriptedLM):
    """Answers at once, except prompts "hold…", which wait until a file named "release-<prompt>" exists."""
    async def acomplete(self, messages, **params):
        prompt = messages[-1]["content"]
        while prompt.startswith("hold") and not os.path.exists("release-" + prompt):
            await asyncio.sleep(0.05)
        return self.complete(messages, **params)

sub = Held(lambda m: "reply to " + m[-1]["content"], name="sub")
root = ScriptedLM(["```python\\nr = llm_query_batched(['q0', 'q1', 'hold1', 'hold2'])\\nprint(len(r))\\n```",
                   "```python\\nsubmit(len(r))\\n```"], name="root")'''
RUN = "%%rlm -m root -s sub -o live_run --sandbox local\nq"

# the effective background of an element (the first ancestor that paints one) and its relative luminance
LUMINANCE = """root => {
  """ + COLOUR_HELPERS + """
  const light = [];
  for (const e of [root, ...root.querySelectorAll('button, input, select, pre, details, .widget-html')]) {
    if (e.offsetParent !== null && lum(bg(e)) > 0.5) light.push(`${e.tagName}.${e.className}: ${bg(e)}`);
  }
  return { background: lum(bg(root)), text: lum(getComputedStyle(root).color), light };
}"""


def _notebook(root: Path) -> Path:
    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(SETUP), nbf.v4.new_code_cell(RUN)]
    path = root / "live.ipynb"
    nbf.write(nb, path)
    return path


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[dict[str, JupyterLab]]:
    """One server with the extension in the dark theme, one without it (disabled: no plugin, no styles)."""
    with_ext, without = tmp_path_factory.mktemp("with"), tmp_path_factory.mktemp("without")
    for root in (with_ext, without):
        _notebook(root)
    with JupyterLab(with_ext, theme="JupyterLab Dark") as dark, \
            JupyterLab(without, disabled_extensions=("rlmnb-jupyterlab",)) as plain:
        yield {"extension": dark, "plain": plain}


def _start_live_run(page: Any, lab: JupyterLab) -> Any:
    """Open the notebook, run the set-up and the %%rlm cell; return the run's output once its batch waits."""
    for released in lab.root_dir.glob("release-*"):  # an earlier test's: the calls must be held again
        released.unlink()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.url("").split("/?")[0])
    output = start_run_cell(page, lab, "live.ipynb")
    expect(output.locator(".rlmnb-widget")).to_contain_text("2 of 4 replied", timeout=60_000)
    return output


def _running(page: Any) -> bool:
    return "*" in page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputPrompt").inner_text()


def _clipboard(page: Any) -> str:
    return str(page.evaluate("navigator.clipboard.readText()"))


def _open_call(widget: Any, index: int) -> Any:
    """Open the batch's list of calls and call number `index` in it (the browser alone: no kernel)."""
    calls = widget.locator("details", has_text="4 calls").first
    if calls.get_attribute("open") is None:
        calls.locator("summary").first.click()
    call = calls.locator("details").nth(index)
    call.locator("summary").click()
    return call


def _release(lab: JupyterLab, page: Any, *prompts: str) -> None:
    for prompt in prompts or ("hold1", "hold2"):
        (lab.root_dir / f"release-{prompt}").write_text("")
    if not prompts:
        wait_cell(page, 1, timeout=60)


def test_buttons_work_while_the_run_goes_on_and_the_widget_is_dark(labs: dict[str, JupyterLab]) -> None:
    lab = labs["extension"]
    console: list[str] = []
    with chromium_page(console=console) as page:
        output = _start_live_run(page, lab)
        widget = output.locator(".rlmnb-widget")
        cells = page.locator(".jp-Notebook .jp-Cell")

        # the dark theme: the widget, its buttons, inputs and code blocks sit on a dark ground, in light text
        colours = widget.evaluate(LUMINANCE)
        assert colours["background"] < 0.3 and colours["text"] > 0.6, colours
        assert colours["light"] == [], colours

        # the turn's code: to a new cell below the running cell, and to the clipboard
        turn = widget.locator("[data-rlmnb-block]", has_text="llm_query_batched").first
        turn.locator("button", has_text="copy code to a new cell").click()
        expect(cells).to_have_count(3)
        expect(cells.nth(2).locator(".jp-InputArea")).to_contain_text("r = llm_query_batched(['q0', 'q1', 'hold1'")
        expect(turn.locator("button[data-rlmnb-action='insert']")).to_have_text("cell inserted below")
        turn.locator("button", has_text="copy").first.click()
        expect(turn.locator("button[data-rlmnb-action='copy']")).to_have_text("copied")
        assert _clipboard(page).startswith("r = llm_query_batched(['q0', 'q1', 'hold1', 'hold2'])")

        # open as DataFrame: the run's variable is the cell's -o NAME
        widget.locator("button", has_text="open as DataFrame").click()
        expect(cells).to_have_count(4)
        expect(cells.nth(2).locator(".jp-InputArea")).to_contain_text("live_run.to_frame()")

        # a finished call's prompt and reply, and the held call's prompt
        call = _open_call(widget, 1)
        prompt, reply = call.locator("button[data-rlmnb-action='copy']").all()
        expect(prompt).to_have_text("copy prompt")
        prompt.click()
        expect(prompt).to_have_text("copied")
        assert _clipboard(page) == "q1"
        expect(reply).to_have_text("copy reply")
        reply.click()
        expect(reply).to_have_text("copied")
        assert _clipboard(page) == "reply to q1"
        expect(prompt).to_have_text("copy prompt")  # the label comes back
        assert _running(page), "the run ended before the buttons were tried"

        # a call comes in: the list is redrawn, and what was open stays open
        _release(lab, page, "hold1")
        expect(widget).to_contain_text("3 of 4 replied")
        calls = widget.locator("details[data-rlmnb-key='calls']")
        expect(calls).to_contain_text("reply to hold1")
        assert calls.get_attribute("open") is not None and calls.locator("details").nth(1).get_attribute("open") is not None

        _release(lab, page)
        expect(output.locator(".rlmnb-view")).to_have_count(1, timeout=60_000)  # the extension's view, at the end
    assert not [line for line in console if "pageerror" in line], console


def test_without_the_extension_copy_still_works_and_no_insert_button_shows(labs: dict[str, JupyterLab]) -> None:
    lab = labs["plain"]
    with chromium_page() as page:
        output = _start_live_run(page, lab)
        widget = output.locator(".rlmnb-widget")
        colours = widget.evaluate(LUMINANCE)  # the light theme: the same check tells the two apart
        assert colours["background"] > 0.7 and colours["text"] < 0.4, colours
        inserts = widget.locator("button[data-rlmnb-action='insert']")
        assert inserts.count() >= 2  # the turn's and "open as DataFrame"
        for i in range(inserts.count()):
            expect(inserts.nth(i)).to_be_hidden()
        assert "_rlm.to_frame()" in widget.inner_text()  # the trace panel says how, in words
        call = _open_call(widget, 0)
        reply = call.locator("button[data-rlmnb-action='copy']").nth(1)
        expect(reply).to_have_text("copy reply")
        reply.click()  # the inline fallback: no extension to handle it
        expect(reply).to_have_text("copied")
        assert _clipboard(page) == "reply to q0"
        expect(reply).to_have_text("copy reply")
        assert _running(page)
        _release(lab, page)
        assert page.locator(".jp-Notebook .jp-Cell").count() == 2


# where the trace toolbar sits and how big it is, relative to the output: the same live and finished
TOOLBAR_BOX = """output => { const bar = [...output.querySelectorAll('.rlmnb-toolbar')].find(e => e.offsetParent !== null);
  const o = output.getBoundingClientRect(), b = bar.getBoundingClientRect();
  const frame = [...bar.querySelectorAll('button')].find(e => e.textContent === 'open as DataFrame').getBoundingClientRect();
  return { height: Math.round(b.height), frameHeight: Math.round(frame.height), frameTop: Math.round(frame.top - b.top) }; }"""


def test_live_choices_are_kept_by_the_finished_view_and_the_toolbar_keeps_its_size(labs: dict[str, JupyterLab]) -> None:
    lab = labs["extension"]
    with chromium_page(width=1400) as page:
        output = _start_live_run(page, lab)
        widget = output.locator(".rlmnb-widget")
        toolbar = widget.locator(".rlmnb-live-toolbar")
        expect(toolbar).to_be_visible()
        expect(widget.locator(".rlmnb-kernel-toolbar")).to_be_hidden()  # the kernel's controls give way
        first = output.evaluate(TOOLBAR_BOX)
        # one line at 1400 px: "open as DataFrame" does not wrap, and is as tall as the other controls
        assert first["height"] <= 2 * first["frameHeight"] and first["frameTop"] < first["frameHeight"], first

        toolbar.locator("input").fill("hold")
        toolbar.locator("select.rlmnb-sort").select_option("latency")
        toolbar.locator("button.rlmnb-timeline-toggle").click()
        expect(toolbar.locator(".rlmnb-search-status")).to_have_text(
            "kept: the list shows when the run ends (the kernel is busy with it)")
        assert _running(page), "the run ended before the choices were made"
        live = output.evaluate(TOOLBAR_BOX)  # with the line saying the choice is kept

        _release(lab, page)
        view = output.locator(".rlmnb-view")
        expect(view).to_have_count(1, timeout=60_000)  # the finished view took the widget's place
        trace = view.locator(".rlmnb-trace")
        assert trace.locator("input.rlmnb-search-input").input_value() == "hold"
        assert trace.locator("select.rlmnb-sort").input_value() == "latency"
        assert trace.locator("select.rlmnb-filter").input_value() == "all"
        expect(trace.locator(".rlmnb-search-status")).to_have_text("2 matching sub-calls")
        expect(trace.locator(".rlmnb-timeline-wrap")).to_have_count(1)  # the timeline is open
        expect(trace.locator("button.rlmnb-timeline-toggle")).to_have_class(re.compile("rlmnb-on"))
        assert output.evaluate(TOOLBAR_BOX) == live  # the same size: nothing jumps at the end
