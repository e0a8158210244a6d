"""`%rlm export run.html` is the JupyterLab extension's viewer in one file: opened from disk in Chromium with no
server and no kernel, it sorts, filters, searches, shows the timeline and copies; it follows the reader's dark
colour scheme (no light colours on dark grey); without the viewer's build the page is the static tree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from browser_support import COLOUR_HELPERS
from playwright.sync_api import expect
from sandbox_support import code

from rlmnb import RLM
from rlmnb.events import Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import chromium_page
from rlmnb.views import _page, render_html
from rlmnb.views._html import html_page
from rlmnb.views._page import page_title, viewer_assets, viewer_page

HOSTILE = "</script><script>window.hacked = 1</script>"

# the effective background of each visible element and its text colour, as relative luminance (0 dark, 1 light)
COLOURS = """root => {
  """ + COLOUR_HELPERS + """
  const bad = [];
  for (const e of root.querySelectorAll('button, input, select, pre, summary, span, td, th')) {
    if (e.offsetParent === null || !e.textContent.trim()) continue;
    const back = lum(bg(e)), text = lum(getComputedStyle(e).color);
    if (Math.abs(back - text) < 0.3) bad.push(`${e.tagName}.${e.className} "${e.textContent.slice(0, 20)}": ${text.toFixed(2)} on ${back.toFixed(2)}`);
  }
  return { background: lum(bg(root)), bad };
}"""


def _trajectory() -> Trajectory:
    turn = "r = llm_query_batched([f'q{i}' for i in range(30)])\nprint(len(r))"
    sub = ScriptedLM(lambda m: HOSTILE if m[-1]["content"] == "q7" else f"reply to {m[-1]['content']}", name="sub")
    return RLM(ScriptedLM([code(turn), code("submit('**done**')")], name="root"), sub,
               sandbox="local", evidence_check=False).run("q", text="t").trajectory


def test_the_page_carries_the_viewer_and_its_data_safely(tmp_path: Path) -> None:
    assert viewer_assets() is not None, "the extension's viewer is not built (make extension)"
    trajectory = _trajectory()
    page = viewer_page([(trajectory, "RLM")], page_title(trajectory))
    assert page.count("rlmnbViewer.render(") == 1 and "<details" in page  # the viewer, over the static tree
    assert HOSTILE not in page and "\\u003c/script>" in page  # recorded text cannot close a script
    assert "prefers-color-scheme: dark" in page and "--jp-mirror-editor-keyword-color:#81c784" in page


def test_without_the_viewer_build_the_page_is_the_static_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_page, "viewer_assets", lambda: None)
    trajectory = _trajectory()
    page = viewer_page([(trajectory, "RLM")], "t")
    assert "<script" not in page and render_html(trajectory) in page


@pytest.mark.integration
def test_the_exported_page_works_offline_as_the_extension_does(tmp_path: Path, browser_ready: None) -> None:
    trajectory = _trajectory()
    path = tmp_path / "run.html"
    path.write_text(viewer_page([(trajectory, "RLM")], page_title(trajectory)), encoding="utf-8")
    console: list[str] = []
    with chromium_page(console=console) as page:
        page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())  # offline: nothing but the file
        page.goto(path.as_uri())
        view = page.locator(".rlmnb-view")
        expect(view).to_have_count(1)
        trace = view.locator(".rlmnb-trace")
        trace.locator("select.rlmnb-sort").select_option("tokens")
        expect(trace.locator(".rlmnb-search-status")).to_have_text("30 sub-calls")
        trace.locator("input.rlmnb-search-input").fill("reply to q2")
        expect(trace.locator(".rlmnb-search-status")).to_have_text("11 matching sub-calls")  # q2, q20 to q29
        trace.locator("select.rlmnb-filter").select_option("error")
        expect(trace.locator(".rlmnb-search-status")).to_have_text("0 matching sub-calls · errors")
        trace.locator("button.rlmnb-timeline-toggle").click()
        expect(trace.locator(".rlmnb-timeline-wrap svg")).to_have_count(1)
        copy = view.locator(".rlmnb-answer button.rlmnb-copy")
        copy.click()
        expect(copy).to_have_text(re.compile("^(copied|copy failed)$"))
        expect(view.locator(".rlmnb-answer [data-rendered='markdown'] strong")).to_have_text("done")
        assert page.evaluate("window.hacked") is None  # the hostile reply stayed text
        view.locator(".rlmnb-group > summary").first.click()  # a batch's calls, the hostile one among them
        expect(view.locator(".rlmnb-calls")).to_contain_text(HOSTILE[:20])

        page.emulate_media(color_scheme="dark")
        colours: dict[str, Any] = view.evaluate(COLOURS)
        assert colours["background"] < 0.2 and colours["bad"] == [], colours
    assert not [line for line in console if "pageerror" in line or "error" in line.split(":")[0]], console


@pytest.mark.integration
def test_the_static_page_follows_a_dark_scheme_code_colours_included(tmp_path: Path, browser_ready: None) -> None:
    path = tmp_path / "static.html"
    path.write_text(html_page(render_html(_trajectory()), "static"), encoding="utf-8")
    with chromium_page() as page:
        page.emulate_media(color_scheme="dark")
        page.goto(path.as_uri())
        colours: dict[str, Any] = page.locator("body").evaluate(COLOURS)
        assert colours["background"] < 0.2 and colours["bad"] == [], colours


def _even_trajectory() -> Trajectory:
    """30 sub-calls that all took 2.0 s ±3 ms: none is slow."""
    from rlmnb.events import EventBus, RunFinished, RunScope, RunStarted, SubCallFinished, SubCallStarted

    bus = EventBus()
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="s", sandbox="local", config={})
    for i in range(30):
        bus.emit(SubCallStarted, scope, call_id=f"c{i}", turn=1, batch_id="b1", prompt=f"prompt {i}")
    for i in range(30):
        bus.emit(SubCallFinished, scope, call_id=f"c{i}", turn=1, batch_id="b1", reply=f"reply {i}",
                 latency_s=1.997 + i * 0.0002, queued_s=0.0, usage={"input_tokens": 1, "output_tokens": 1})
    bus.emit(RunFinished, scope, status="submitted", answer="done")
    return bus.trajectory


@pytest.mark.integration
def test_the_exported_page_has_no_insert_buttons_and_its_timeline_follows_the_search(
        tmp_path: Path, browser_ready: None) -> None:
    path = tmp_path / "run.html"
    path.write_text(viewer_page([(_trajectory(), "RLM")], "run"), encoding="utf-8")
    even = tmp_path / "even.html"
    even.write_text(viewer_page([(_even_trajectory(), "RLM")], "even"), encoding="utf-8")
    with chromium_page() as page:
        page.goto(path.as_uri())
        view = page.locator(".rlmnb-view")
        expect(view).to_have_count(1)
        view.locator(".rlmnb-turn summary").first.click()
        assert view.locator("button.rlmnb-insert").count() > 0  # made, as in the notebook's view...
        expect(view.locator("button.rlmnb-insert:visible")).to_have_count(0)  # ...and hidden: no notebook here
        expect(view.locator("button.rlmnb-copy:visible").first).to_be_visible()  # copying still works here
        trace = view.locator(".rlmnb-trace")
        trace.locator("button.rlmnb-timeline-toggle").click()
        wrap = trace.locator(".rlmnb-timeline-wrap")
        expect(wrap).to_have_attribute("data-shown", "30")
        trace.locator("input.rlmnb-search-input").fill("reply to q2")
        expect(wrap).to_have_attribute("data-shown", "11")  # q2, q20 to q29
        expect(wrap.locator(".rlmnb-bar-faded")).to_have_count(19)  # the rest stay in their lanes, faded
        trace.locator("select.rlmnb-filter").select_option("all")
        trace.locator("input.rlmnb-search-input").fill("")
        expect(trace.locator(".rlmnb-timeline-wrap")).to_have_attribute("data-shown", "30")

        page.goto(even.as_uri())
        trace = page.locator(".rlmnb-trace")
        trace.locator("select.rlmnb-filter").select_option("slow")
        expect(trace.locator(".rlmnb-search-status")).to_contain_text("0 sub-calls")
        trace.locator("button.rlmnb-timeline-toggle").click()
        expect(trace.locator(".rlmnb-timeline-wrap")).to_have_count(1)
        expect(trace.locator("svg .rlmnb-bar-slow")).to_have_count(0)  # the legend keeps its swatch
