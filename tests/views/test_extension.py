"""The JupyterLab extension (extension/) in a real JupyterLab and a real headless Chromium.

A saved notebook whose %%rlm output holds a dead widget view, the static HTML and the trajectory must show
the extension's tree (not "Error displaying widget", not the sanitised HTML), trusted or not, and an
exported `*.rlmnb.json` file must open in the extension's viewer with no kernel started at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from sandbox_support import code

from rlmnb import RLM
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import JupyterLab, chromium_page, write_run_notebook
from rlmnb.views import mime_bundle

pytestmark = pytest.mark.integration

HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1"><script>document.body.dataset.pwned=1</script>'


def sub_reply(messages: list[dict[str, Any]]) -> str:
    prompt = messages[-1]["content"]
    if prompt == "q13":
        raise ValueError("the sub-model refused q13")
    if prompt == "q7":
        return HOSTILE
    return f"reply to {prompt}"


@pytest.fixture(scope="module")
def recorded() -> Any:
    root = ScriptedLM([
        code("print(len(inputs['text']))"),
        code("r = llm_query_batched([f'q{i}' for i in range(60)])\nc = rlm_query('count the words')\n"
             "print(sum(x.startswith('[error]') for x in r), c)"),
        code("submit({'errors': 1, 'child': c})"),
    ], name="root-model")
    child = ScriptedLM([code("n = llm_query('how many words?')\nprint(n)"), code("submit('two words')")],
                       name="child-model")
    result = RLM(root, ScriptedLM(sub_reply, name="sub-model"), sandbox="local", max_depth=2, child_model=child,
                 max_llm_calls=100, evidence_check=False).run("How many errors?", text="hello world")
    assert result.status == "submitted" and result.answer == {"errors": 1, "child": "two words"}
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, recorded: Any, browser_ready: None) -> Iterator[JupyterLab]:
    root = tmp_path_factory.mktemp("lab")
    for name in ("untrusted", "trusted"):
        write_run_notebook(root / f"{name}.ipynb", mime_bundle(recorded.trajectory),
                           cell="%%rlm -m root -s sub -i text\nHow many errors?", widget_view=True)
    recorded.save(root / "run.rlmnb.json")
    server = JupyterLab(root)
    server.trust(root / "trusted.ipynb")
    with server:
        yield server


def open_output(page: Any, lab: JupyterLab, name: str) -> Any:
    page.goto(lab.url(f"lab/tree/{name}?reset"))  # ?reset: no tabs restored from an earlier page
    view = page.locator(".rlmnb-Trajectory").first
    view.locator(".rlmnb-view, .rlmnb-unreadable").first.wait_for(timeout=60_000)  # rendered, not just created
    return view


@pytest.mark.parametrize("name", ["untrusted.ipynb", "trusted.ipynb"])
def test_a_saved_run_output_shows_the_extensions_tree(lab: JupyterLab, name: str) -> None:
    console: list[str] = []
    with chromium_page(console=console) as page:
        view = open_output(page, lab, name)
        outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
        assert outputs.count() == 1 and page.locator(".jp-Notebook .rlmnb-Trajectory").count() == 1
        # chosen over the widget view and the HTML
        assert page.locator(".jp-Notebook .jp-RenderedHTMLCommon, .jp-Notebook .jupyter-widgets").count() == 0
        assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()
        text = " ".join(view.inner_text().split())
        assert "answered" in text and "root-model → sub sub-model" in text and "How many errors?" in text
        assert "sub-calls 61 / 100 · 1 failed" in text and "turns 3 / 20" in text
        assert '"child": "two words"' in text  # the answer

        # turn 2: its batch and its child run; the batch lists 50 calls, then the rest on demand
        turn2 = view.locator("div.rlmnb-turn[data-turn='2']").first
        group = turn2.locator("details.rlmnb-group", has_text="llm_query_batched × 60").first
        expect(group.locator("summary").first).to_contain_text("1 failed")
        group.locator("summary").first.click()
        calls = group.locator("details.rlmnb-call")
        expect(calls).to_have_count(50)
        group.locator("button.rlmnb-more", has_text="show the last 10").click()
        expect(calls).to_have_count(60)

        failed = calls.nth(13)  # q13, whose sub-call raised
        failed.locator("summary").click()
        expect(failed).to_contain_text("[error] ValueError: the sub-model refused q13")
        hostile = calls.nth(7)  # q7's reply is markup: shown as text, never run
        hostile.locator("summary").click()
        expect(hostile.locator("pre.rlmnb-reply")).to_have_text(HOSTILE)
        assert hostile.locator("img").count() == 0 and page.evaluate("document.body.dataset.pwned") is None

        child = turn2.locator(".rlmnb-child").first
        expect(child.locator(".rlmnb-header")).to_contain_text("answered child-model → sub sub-model")
        expect(child.locator("details.rlmnb-group")).to_contain_text("llm_query × 1")
    assert not [line for line in console if "pageerror" in line], console


def test_the_search_finds_sub_calls_anywhere_in_the_tree(lab: JupyterLab) -> None:
    with chromium_page() as page:
        view = open_output(page, lab, "untrusted.ipynb")
        search = view.locator("input.rlmnb-search-input")
        assert search.get_attribute("placeholder") == "search the 61 sub-calls"
        expect(view.locator(".rlmnb-scope")).to_have_text(
            "searches the whole prompt, reply and error of each of the 61 sub-calls")
        search.fill("REFUSED q13")  # case-insensitive, errors included
        expect(view.locator(".rlmnb-search-status")).to_have_text("1 matching sub-call")
        hit = view.locator(".rlmnb-search-results details.rlmnb-call")
        expect(hit).to_have_count(1)
        expect(hit.locator(".rlmnb-where")).to_have_text("root run · turn 2 · llm_query_batched")
        search.fill("how many words")  # a child run's sub-call
        expect(hit.locator(".rlmnb-where")).to_have_text("child run · turn 1 · llm_query")
        search.fill("reply to q")  # 58 replies (q7 and q13 answered otherwise): 50, then the rest
        expect(view.locator(".rlmnb-search-status")).to_have_text("58 matching sub-calls")
        expect(hit).to_have_count(50)
        view.locator(".rlmnb-search-results button.rlmnb-more").click()
        expect(hit).to_have_count(58)
        # typing in the box is not a notebook shortcut: "d d" would delete the cell, "a" insert one
        search.fill("")
        search.press_sequentially("dda")
        assert page.locator(".jp-Notebook .jp-Cell").count() == 1 and search.input_value() == "dda"


def test_an_exported_trajectory_file_opens_in_the_viewer_without_a_kernel(lab: JupyterLab) -> None:
    before = {k["id"] for k in lab.kernels()}
    with chromium_page() as page:
        view = open_output(page, lab, "run.rlmnb.json")
        text = " ".join(view.inner_text().split())
        assert "answered" in text and "sub-calls 61 / 100" in text and "3 runs" not in text and "2 runs" in text
        chain = view.evaluate("e => { const c = []; for (; e; e = e.parentElement) c.push(e.className); return c; }")
        assert any("jp-MimeDocument" in str(c) for c in chain), chain  # a document, not a notebook output
    assert {k["id"] for k in lab.kernels()} == before  # nothing was started to show it


def test_a_file_that_is_not_a_trajectory_says_so(lab: JupyterLab) -> None:
    (lab.root_dir / "other.rlmnb.json").write_text(json.dumps({"hello": "world"}))
    with chromium_page() as page:
        view = open_output(page, lab, "other.rlmnb.json")
        assert "this trajectory cannot be shown (no event list found" in view.inner_text()
