"""Take docs/widget.png: a finished rlmnb run in JupyterLab 4, in a real (headless) Chromium.

    .venv/bin/pip install playwright            # the Python package ships its driver
    .venv/bin/python docs/screenshot.py         # ~20 s; writes docs/widget.png

What it does: starts `jupyter lab` headless on 127.0.0.1 (free port, random token, no browser, throwaway
settings/workspace/runtime directories), copies notebooks/01_quickstart.ipynb to a temporary notebook in
the same folder (the committed notebook is never opened), opens it in Chromium through Playwright, clears
the saved outputs, runs all cells from the Run menu, waits until the %%rlm cell's live widget has given
way to the extension's tree (the run is over), opens the batch of sub-calls (one call opened to its
prompt and reply; docs/screenshots.py takes the timeline), and screenshots the output area of that cell. The server (and
its kernel) and the browser are always stopped and the temporary notebook deleted. Browser console
messages and page errors are printed at the end.

Playwright's own browser download does not work offline: this uses Debian's /usr/bin/chromium
(`apt-get install chromium`); set CHROMIUM=/path/to/chrome to use another one.
Other settings: RLMNB_SHOT_OUT (where the PNG goes), RLMNB_SHOT_THEME ("JupyterLab Dark" for a dark
picture), RLMNB_SHOT_TIMEOUT (seconds for the notebook to run, default 180), RLMNB_SHOT_DEBUG (a folder
that receives a full-window screenshot and the page's HTML when something fails).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path

from rlmnb.testing.lab import JupyterLab, browser_missing, chromium_page

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SOURCE = NOTEBOOKS / "01_quickstart.ipynb"
OUT = Path(os.environ.get("RLMNB_SHOT_OUT", REPO / "docs" / "widget.png"))
THEME = os.environ.get("RLMNB_SHOT_THEME", "JupyterLab Light")  # or "JupyterLab Dark"
WIDTH = 1440  # browser window; the left sidebar is closed, so the cell output is ~1,330 px wide
RUN_TIMEOUT = int(os.environ.get("RLMNB_SHOT_TIMEOUT", 180))  # seconds for the whole notebook to run

T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {message}", flush=True)


def take_screenshot(lab: JupyterLab, notebook: str, console: list[str]) -> None:
    with chromium_page(width=WIDTH, height=1600, console=console) as page:
        try:
            page.on("requestfailed", lambda r: console.append(f"requestfailed: {r.url} {r.failure}"))
            page.goto(lab.url(f"lab/tree/{notebook}"))
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
            log("notebook open, kernel idle")
            if page.locator("#jp-left-stack").is_visible():
                page.locator(".jp-NotebookPanel .jp-Notebook").click(position={"x": 5, "y": 5})
                page.keyboard.press("Control+b")  # close the file browser: the notebook gets the width
            page.wait_for_timeout(300)

            def menu(top: str, item: str) -> None:
                page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
                page.locator(".lm-Menu-itemLabel").get_by_text(item, exact=True).click()

            menu("Edit", "Clear Outputs of All Cells")  # the committed outputs are not this run's
            menu("Run", "Run All Cells")
            log("Run All Cells")
            # the %%rlm cell (cell 1 mentions "%%rlm" in a comment)
            magic = page.locator(".jp-InputArea .cm-line", has_text=re.compile(r"^%%rlm\b"))
            cell = page.locator(".jp-CodeCell").filter(has=magic).first
            output = cell.locator(".jp-Cell-outputArea")
            # the live widget shows while the run goes; at its end the extension's tree takes its place
            view = output.locator(".rlmnb-Trajectory").first
            view.wait_for(timeout=RUN_TIMEOUT * 1000)
            page.wait_for_function(
                """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                           return p.length && p.every(x => /\\[\\d+\\]/.test(x.innerText)); }""",
                timeout=RUN_TIMEOUT * 1000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
            log("run finished: " + " ".join(view.locator(".rlmnb-header").first.inner_text().split())[:100])

            # the batch the run fanned out to: its sub-calls, one line each, the first one opened
            group = view.locator("div.rlmnb-turn details.rlmnb-group").first
            group.locator("summary").first.click()
            calls = group.locator("details.rlmnb-call")
            calls.nth(4).wait_for(timeout=20_000)
            calls.nth(12).locator("summary").click()  # the chunk that holds the number: prompt, reply, copy
            # make the next cell the active one: no blue active-cell bar or button focus ring in the picture
            cell.locator("xpath=following-sibling::div[contains(@class,'jp-CodeCell')][1]//div[contains("
                         "@class,'jp-InputPrompt')]").first.click()
            page.wait_for_timeout(500)

            # make the window tall enough that the whole output area is on screen, then shoot it
            box = output.bounding_box()
            assert box is not None
            page.set_viewport_size({"width": WIDTH, "height": min(6000, int(box["height"]) + 400)})
            page.wait_for_timeout(300)
            output.scroll_into_view_if_needed()
            page.evaluate("""el => el.scrollIntoView({block: 'center'})""", output.element_handle())
            page.wait_for_timeout(500)
            page.mouse.move(0, 0)  # no hover highlight
            box = output.bounding_box()
            assert box is not None
            pad = 10  # a little page around the output area (not above: that is the cell's input)
            x = max(0, box["x"] - pad)
            OUT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUT), animations="disabled",
                            clip={"x": x, "y": box["y"], "width": min(WIDTH - x, box["width"] + 2 * pad),
                                  "height": box["height"] + pad})
            log(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KB)")
        except BaseException:
            debug = os.environ.get("RLMNB_SHOT_DEBUG")  # a folder for a full-page picture and the DOM
            if debug:
                Path(debug).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(debug) / "failure.png"))
                (Path(debug) / "failure.html").write_text(page.content())
                print(f"debug: {debug}/failure.png, failure.html", file=sys.stderr)
            raise


def main() -> int:
    missing = browser_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    copy = NOTEBOOKS / f"_screenshot_{secrets.token_hex(4)}.ipynb"
    checkpoints = NOTEBOOKS / ".ipynb_checkpoints"
    had_checkpoints = checkpoints.exists()
    shutil.copyfile(SOURCE, copy)
    console: list[str] = []
    lab = JupyterLab(NOTEBOOKS, theme=THEME)
    try:
        lab.start()
        log(f"jupyter lab on 127.0.0.1:{lab.port}")
        take_screenshot(lab, copy.name, console)
    finally:
        killed = lab.stop()
        log(f"server stopped ({killed} processes outlived it and were killed)")
        copy.unlink(missing_ok=True)
        if checkpoints.exists():
            for leftover in checkpoints.glob(f"{copy.stem}-checkpoint*"):
                leftover.unlink()
            if not had_checkpoints and not any(checkpoints.iterdir()):
                checkpoints.rmdir()
        print(f"browser console ({len(console)} messages):")
        for line in console:
            print("  " + line)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
