"""Take the widget's screenshots, light and dark: a live run, a finished run with its timeline open, a dry run
(issue 13), and a finished run whose turns carry the notes of the policies that acted (issue 44).

    PYTHONPATH=$PWD .venv/bin/python docs/screenshots.py     # ~3 min
    # writes docs/{live,timeline,dry_run,policy_notes}_{light,dark}.png

A real JupyterLab (headless, throwaway settings, the worktree's extension build) and Chromium run a small
notebook: a batch of 60 sub-calls against a scripted sub-model with 0.25 s latency and 4 calls in flight
(so the live meters, the in-flight count, the rate and the ETA are caught mid-batch), then the finished
run's timeline, then a dry run whose estimate has dollar signs, then a scripted root that makes three policies
act (named in `%config RLMMagics.policies`): it types a number no output showed (`unshown_value` sends it
back), sends its first step again (`repeat_breaker` asks for another without running it) and answers in
prose with what that step printed (`prose_answer` takes it). Look at each picture before committing it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlmnb.testing.lab import JupyterLab, browser_missing, chromium_page, run_cell, wait_cell

DOCS = Path(__file__).resolve().parent
SETUP = """%load_ext rlmnb
%config RLMMagics.max_concurrency = 4
from rlmnb.testing import ScriptedLM
from rlmnb.testing.generators import haystack
text = haystack(200_000, seed=1).text
root = ScriptedLM(["Let me look at the text first.\\n```python\\ntext = inputs['text']\\nprint(len(text), text[:80])\\n```",
                   "I will ask about each chunk.\\n```python\\nchunks = [text[i:i + 4000] for i in range(0, 240000, 4000)]\\n"
                   "r = llm_query_batched(['Any date in this? ' + c for c in chunks])\\nprint(sum('yes' in x for x in r))\\n```",
                   "```python\\nsubmit({'chunks': len(r), 'with dates': sum('yes' in x for x in r), 'note': 'cost $0.25/$2'})\\n```"],
                  name="scripted-root")
sub = ScriptedLM(lambda m: "yes" if len(m[-1]["content"]) % 3 else "no", name="scripted-sub", latency=0.25)"""
RUN = "%%rlm -m root -s sub -i text --sandbox local --max-llm-calls 100 --max-cost 0.5\nWhich chunks mention a date?"
DRY = "%%rlm -m root -s sub -i text --dry-run --max-cost 0.5\nWhich chunks mention a date? Budget: $0.25 to $2."
POLICY_SETUP = """words = " ".join(f"{i}. {('hip', 'family')[i % 2] if i <= 60 else f'rare{i}'}" for i in range(1, 80))
count = ("I will count the words.\\n```python\\nfrom collections import Counter\\nprint('The top 2 words are:')\\n"
         "for word, n in Counter(inputs['words'].split()[1::2]).most_common(2):\\n    print(f'{word}: {n}')\\n```")
policy_root = ScriptedLM([count, "```python\\nsubmit(4711)\\n```", count, "The top 2 words are:\\nfamily: 30\\nhip: 30"],
                         name="scripted-root")
%config RLMMagics.policies = 'repeat_breaker,unshown_value,prose_answer,final_answer'"""
POLICY_RUN = "%%rlm -m policy_root -s sub -i words --sandbox local\nWhat are the 2 most common words in the list?"


def shoot(theme: str, suffix: str, folder: Path) -> None:
    import nbformat

    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(src) for src in (SETUP, RUN, DRY, POLICY_SETUP, POLICY_RUN)]
    nbf.write(nb, folder / f"shots_{suffix}.ipynb")
    with JupyterLab(folder, theme=theme) as lab, chromium_page(width=1280, height=1100) as page:
        page.goto(lab.url(f"lab/tree/shots_{suffix}.ipynb?reset"))
        page.locator(".jp-Notebook .jp-Cell").nth(2).wait_for(timeout=90_000)
        time.sleep(3)
        run_cell(page, 0)
        wait_cell(page, 0)
        output = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
        run_cell(page, 1)
        output.locator(".rlmnb-meter-text").first.wait_for(timeout=60_000)
        page.wait_for_function("el => /in flight/.test(el.textContent) && /ETA/.test(el.textContent)",
                               arg=output.element_handle(), timeout=60_000)
        time.sleep(1.0)
        output.screenshot(path=str(DOCS / f"live_{suffix}.png"))
        wait_cell(page, 1)
        output.locator(".rlmnb-view").wait_for(timeout=60_000)
        output.locator("button.rlmnb-timeline-toggle").click()
        output.locator(".rlmnb-timeline-wrap").wait_for()
        fit(page, output)
        output.screenshot(path=str(DOCS / f"timeline_{suffix}.png"))
        run_cell(page, 2)
        wait_cell(page, 2)
        dry = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea")
        time.sleep(1.5)
        dry.screenshot(path=str(DOCS / f"dry_run_{suffix}.png"))
        run_cell(page, 3)
        wait_cell(page, 3)
        run_cell(page, 4)
        wait_cell(page, 4)
        notes = page.locator(".jp-Notebook .jp-Cell").nth(4).locator(".jp-OutputArea")
        notes.locator(".rlmnb-view .rlmnb-note-policy").first.wait_for(timeout=60_000)
        # the prose the policy took is in its turn's (folded) model reply: open that fold beside the note
        answered = notes.locator(".rlmnb-turn", has=page.locator(".rlmnb-note-policy", has_text="prose_answer"))
        answered.locator("details.rlmnb-model-reply > summary").click()
        fit(page, notes)
        notes.screenshot(path=str(DOCS / f"policy_notes_{suffix}.png"))


def fit(page: Any, output: Any) -> None:
    """Scroll `output` into view and make the viewport tall enough to hold all of it: no status bar or empty
    page in the picture."""
    output.scroll_into_view_if_needed()
    box = output.bounding_box()
    assert box is not None
    page.set_viewport_size({"width": 1280, "height": int(box["y"] + box["height"]) + 200})
    time.sleep(0.5)


def main() -> int:
    missing = browser_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="rlmnb-shots-"))
    for theme, suffix in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        shoot(theme, suffix, folder)
        print(f"wrote docs/{{live,timeline,dry_run,policy_notes}}_{suffix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
