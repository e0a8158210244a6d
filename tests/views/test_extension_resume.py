"""The JupyterLab extension shows a resumed run as one tree with its mark where it went live, and the tokens
the provider's prompt cache served with the money saved, in a real JupyterLab and a real headless Chromium.

The run is real: over HTTP to the fake OpenAI-compatible server (which reports cached prefix tokens as
OpenAI does), journaled to a folder made by the test, cut after 12 of its 20 sub-call answers as a kill
would leave it, and resumed; the saved notebook holds the resumed run's output.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect
from sandbox_support import code

from rlmnb import RLM
from rlmnb.testing.fake_server import FakeServer
from rlmnb.testing.lab import JupyterLab, chromium_page, write_run_notebook
from rlmnb.views import mime_bundle

pytestmark = pytest.mark.integration

PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "cache_read_input_token_cost": 1e-7,
          "litellm_provider": "openai", "mode": "chat"}
SCRIPT = [code("print(inputs['words'][:3])"),
          code("answers = llm_query_batched([f'item {i}: ' + inputs['words'][i] for i in range(20)])\n"
               "print(len(answers))"),
          code("submit(len(answers))")]
WORDS = [f"w{i}" for i in range(20)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[tuple[JupyterLab, str]]:
    from rlmnb._models.litellm import load_litellm

    load_litellm().register_model({"openai/lab-resume-root": PRICES, "openai/lab-resume-sub": PRICES})
    folder = tmp_path_factory.mktemp("lab-resume")
    with FakeServer(script={"lab-resume-root": SCRIPT}, prompt_cache=True) as server:
        def rlm() -> RLM:
            return RLM(server.lm("lab-resume-root"), server.lm("lab-resume-sub"), sandbox="local",
                       journal=str(folder / "journals"), cache=False)

        first = rlm().run("Count the words", words=WORDS)
        assert first.status == "submitted" and first.journal is not None, first.error
        lines = first.journal.read_text(encoding="utf-8").splitlines(keepends=True)
        answered = [i for i, line in enumerate(lines) if '"kind": "sub_call_finished"' in line]
        first.journal.write_text("".join(lines[:answered[11] + 1]), encoding="utf-8")  # killed after 12 answers
        resumed = rlm().resume(first.journal, words=WORDS)
    assert resumed.status == "submitted" and resumed.usage.cached_input_tokens > 0, resumed.error
    write_run_notebook(folder / "resumed.ipynb", mime_bundle(resumed.trajectory),
                       cell="%%rlm --resume -i words\nCount the words")
    with JupyterLab(folder) as server_lab:
        yield server_lab, f"{first.journal.name}|{resumed.usage.cached_input_tokens:,}|{resumed.usage.saved_usd:.4f}"


def test_a_resumed_run_shows_its_mark_and_its_prompt_cache(lab: tuple[JupyterLab, str]) -> None:
    server, expected = lab
    journal, cached, saved = expected.split("|")
    console: list[str] = []
    with chromium_page(console=console) as page:
        page.goto(server.url("lab/tree/resumed.ipynb?reset"))
        view = page.locator(".rlmnb-Trajectory").first
        view.locator(".rlmnb-view").first.wait_for(timeout=60_000)
        marks = view.locator(".rlmnb-resumed")
        expect(marks).to_have_count(1)
        expect(marks.first).to_have_text(f"⟳ Resumed from {journal}: 2 root turns and 12 sub-calls served from "
                                         f"the journal at no cost; live from here")
        turn2 = view.locator("div.rlmnb-turn[data-turn='2']").first
        assert turn2.locator(".rlmnb-resumed").count() == 1  # inside the turn whose sub-calls went live
        for number, replayed in ((1, 1), (2, 1), (3, 0)):
            title = view.locator(f"div.rlmnb-turn[data-turn='{number}'] .rlmnb-turn-title").first
            assert title.locator(".rlmnb-flag-journal").count() == replayed, number
        expect(turn2.locator("details.rlmnb-group summary").first).to_contain_text("12 from the journal")
        meters = " ".join(view.locator(".rlmnb-meters").first.inner_text().split())
        assert f"({cached} cached)" in meters and f"saved ${saved}" in meters, meters
        turn3 = " ".join(view.locator("div.rlmnb-turn[data-turn='3'] .rlmnb-turn-title").first.inner_text().split())
        assert " cached, saved $" in turn3, turn3  # the live turn read its prefix from the provider's cache
    assert not [line for line in console if "pageerror" in line], console
