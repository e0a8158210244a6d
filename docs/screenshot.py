"""Take docs/widget.png: rlmnb's live run widget in JupyterLab 4, in a real (headless) Chromium.

    .venv/bin/pip install playwright            # the Python package ships its driver
    .venv/bin/python docs/screenshot.py         # ~20 s; writes docs/widget.png

What it does: starts `jupyter lab` headless on 127.0.0.1 (free port, random token, no browser, throwaway
settings/workspace/runtime directories), copies notebooks/01_quickstart.ipynb to a temporary notebook in
the same folder (the committed notebook is never opened), opens it in Chromium through Playwright, clears
the saved outputs, runs all cells from the Run menu, waits until the %%rlm cell's widget says the run is
finished, expands the batch of sub-calls, and screenshots the output area of that cell. The server (and
its kernel) and the browser are always stopped and the temporary notebook deleted. Browser console
messages and page errors are printed at the end.

Playwright's own browser download does not work offline: this uses Debian's /usr/bin/chromium
(`apt-get install chromium`); set CHROMIUM=/path/to/chrome to use another one.
Other settings: RLMNB_SHOT_OUT (where the PNG goes), RLMNB_SHOT_THEME ("JupyterLab Dark" for a dark
picture), RLMNB_SHOT_TIMEOUT (seconds for the notebook to run, default 180), RLMNB_SHOT_DEBUG (a folder
that receives a full-window screenshot and the page's HTML when something fails).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SOURCE = NOTEBOOKS / "01_quickstart.ipynb"
OUT = Path(os.environ.get("RLMNB_SHOT_OUT", REPO / "docs" / "widget.png"))
THEME = os.environ.get("RLMNB_SHOT_THEME", "JupyterLab Light")  # or "JupyterLab Dark"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH = 1440  # browser window; the left sidebar is closed, so the cell output is ~1,330 px wide
RUN_TIMEOUT = int(os.environ.get("RLMNB_SHOT_TIMEOUT", 180))  # seconds for the whole notebook to run

T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, token: str, scratch: Path) -> subprocess.Popen[bytes]:
    settings = scratch / "settings"
    # no "get Jupyter news?" / update toasts over the notebook
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    (notification.parent / "themes.jupyterlab-settings").write_text(json.dumps({"theme": THEME}))
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(scratch / "runtime"), PYTHONUNBUFFERED="1")
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter) if jupyter.exists() else "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={NOTEBOOKS}", f"--LabApp.user_settings_dir={settings}",
           f"--LabApp.workspaces_dir={scratch / 'workspaces'}", "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    logfile = open(scratch / "server.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT, env=env, cwd=NOTEBOOKS,
                            start_new_session=True)
    logfile.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{server_log(scratch)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer within 60 s:\n{server_log(scratch)}")


def server_log(scratch: Path) -> str:
    try:
        return (scratch / "server.log").read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def stop_server(proc: subprocess.Popen[bytes], port: int, token: str) -> None:
    """Ask the server to shut down (it stops its kernels), then make sure every process of it is gone."""
    try:  # its kernels (and the rlmnb sandbox kernels they start) run in sessions of their own
        import psutil

        children = psutil.Process(proc.pid).children(recursive=True)
    except Exception:
        children = []
    if proc.poll() is None:
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/shutdown", method="POST",
                                         headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(req, timeout=10).close()
        except OSError:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    killed = 0
    for child in children:  # psutil checks the process is still the same one (no pid reuse)
        with contextlib.suppress(Exception):
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                child.kill()
                killed += 1
    log(f"server stopped ({len(children)} child processes; {killed} outlived it and were killed)")


def take_screenshot(port: int, token: str, notebook: str, console: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1600}, device_scale_factor=1)
            page.on("console", lambda m: console.append(f"console.{m.type}: {m.text}"))
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.on("requestfailed", lambda r: console.append(f"requestfailed: {r.url} {r.failure}"))
            page.set_default_timeout(60_000)
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{notebook}?token={token}")
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
            header = output.locator(".widget-html", has_text="What is the magic number").first
            header.wait_for(timeout=RUN_TIMEOUT * 1000)
            page.wait_for_function(
                """el => /answered|fallback|budget|failed|interrupted/.test(el.innerText)""",
                arg=header.element_handle(), timeout=RUN_TIMEOUT * 1000)
            # the rest of the notebook finishes too, so the kernel is free to handle the toggle click
            page.wait_for_function(
                """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                           return p.length && p.every(x => /\\[\\d+\\]/.test(x.innerText)); }""",
                timeout=RUN_TIMEOUT * 1000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
            log("run finished: " + " ".join(header.inner_text().split())[:100])

            toggle = output.locator("button.widget-toggle-button", has_text="calls").first
            if toggle.count():
                toggle.click()  # the batch of sub-calls, one line each
                output.locator("details summary", has_text="#19").first.wait_for(timeout=20_000)
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
        finally:
            browser.close()


def main() -> int:
    if not Path(CHROMIUM).exists():
        print(f"no browser at {CHROMIUM} (apt-get install chromium, or set CHROMIUM=...)", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="rlmnb-shot-"))
    copy = NOTEBOOKS / f"_screenshot_{secrets.token_hex(4)}.ipynb"
    checkpoints = NOTEBOOKS / ".ipynb_checkpoints"
    had_checkpoints = checkpoints.exists()
    shutil.copyfile(SOURCE, copy)
    port, token = free_port(), secrets.token_hex(24)
    console: list[str] = []
    proc = None
    try:
        proc = start_server(port, token, scratch)
        log(f"jupyter lab on 127.0.0.1:{port}")
        take_screenshot(port, token, copy.name, console)
    finally:
        if proc is not None:
            stop_server(proc, port, token)
        copy.unlink(missing_ok=True)
        if checkpoints.exists():
            for leftover in checkpoints.glob(f"{copy.stem}-checkpoint*"):
                leftover.unlink()
            if not had_checkpoints and not any(checkpoints.iterdir()):
                checkpoints.rmdir()
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"browser console ({len(console)} messages):")
        for line in console:
            print("  " + line)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
