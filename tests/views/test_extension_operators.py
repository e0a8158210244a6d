"""The JupyterLab extension shows an llm_map as one group with its packing figures, and each checked quote
as found (with where) or not found, in a real JupyterLab and a real headless Chromium.

The server is given this checkout's built extension (rlmnb/labextension) through its own data folder, searched
before the environment's, so the test reads the extension built from this source tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sandbox_support import code

from rlmnb import RLM, QuotesFound
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import JupyterLab, browser_missing, chromium_page, write_run_notebook
from rlmnb.testing.packed import PackedResponder
from rlmnb.views import mime_bundle

pytestmark = pytest.mark.integration

BUILT = Path(__file__).resolve().parents[2] / "rlmnb" / "labextension"
REPORT = "Week 12. The storage cluster ran out of disk twice in March. Two nodes were added."


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    missing = browser_missing() or (None if (BUILT / "package.json").exists() else "the extension is not built")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {missing}")
        pytest.skip(missing)
    items = [f"t{i}" for i in range(90)]
    root = ScriptedLM([code("print(len(inputs['items']))"),
                       code("r = llm_classify(list(inputs['items']), ['even', 'odd'], pack_items=30)\nprint(r[:3])"),
                       code('submit({"first": r[0], "evidence": "ran out of disk twice in March", '
                            '"quote": "the moon fell on the storage cluster"})')], name="root-model")
    sub = PackedResponder(lambda t: "even" if int(t[1:]) % 2 == 0 else "odd", garble=0.1, seed=4)
    result = RLM(root, ScriptedLM(sub, name="sub-model"), sandbox="local", verify=QuotesFound(), max_revisions=0,
                 max_llm_calls=200).run("Label them.", items=items, report=REPORT)
    folder = tmp_path_factory.mktemp("lab-operators")
    write_run_notebook(folder / "ops.ipynb", mime_bundle(result.trajectory),
                       cell="%%rlm -m root -s sub -i items\nLabel them.")
    server = JupyterLab(folder)
    (server.data_dir / "labextensions").mkdir(parents=True, exist_ok=True)
    (server.data_dir / "labextensions" / "rlmnb-jupyterlab").symlink_to(BUILT)  # this checkout's build
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # the server's own data folder before the venv's
        with server:
            yield server


def test_map_group_and_quote_marks(lab: JupyterLab) -> None:
    console: list[str] = []
    with chromium_page(console=console) as page:
        page.goto(lab.url("lab/tree/ops.ipynb?reset"))
        view = page.locator(".rlmnb-Trajectory").first
        view.locator(".rlmnb-view").first.wait_for(timeout=60_000)
        turn2 = view.locator("div.rlmnb-turn[data-turn='2']").first
        group = turn2.locator("details.rlmnb-group").first
        expect(group.locator("summary").first).to_contain_text("llm_classify · 90 items · 3 packs")
        expect(group.locator("summary").first).to_contain_text("0 failed")
        assert turn2.locator("details.rlmnb-group").count() == 1  # every round in the one group
        text = " ".join(view.inner_text().split())
        assert "quote found: \"ran out of disk twice in March\" (input 'report', offset 29)" in text
        assert 'quote NOT found: "the moon fell on the storage cluster"' in text
    assert not [line for line in console if "pageerror" in line], console
