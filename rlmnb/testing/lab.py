"""A real JupyterLab server and a real (headless) Chromium for front-end tests and screenshots.

    with JupyterLab(root_dir) as lab, chromium_page() as page:
        page.goto(lab.url("lab/tree/run.ipynb"))

The server listens on 127.0.0.1 on a free port with a random token, and keeps its settings, workspaces,
configuration, runtime files and notebook-trust database in a throwaway directory, so nothing of the
user's JupyterLab set-up is read or changed. Stopping it also stops every process it started (kernels, and the sandbox
kernels those start).

The browser is Debian's Chromium (`apt-get install chromium`; `CHROMIUM=/path` for another one), driven by
the `playwright` Python package: Playwright's own browser download does not work on a closed network.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "JupyterLab", "browser_missing", "chromium_page", "free_port", "run_cell",
           "wait_cell", "write_run_notebook"]

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# without the background-networking flags Chromium keeps trying hosts a closed network refuses
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser_missing() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM=/path/to/chrome)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    return None


def write_run_notebook(path: Path, bundle: dict[str, Any], *, cell: str = "%%rlm -m root -s sub\nq",
                       widget_view: bool = False) -> Path:
    """A notebook whose one %%rlm cell holds a run's output as a saved file does (`views.mime_bundle`);
    with `widget_view`, also the view of a widget whose state was not saved (as after a kernel restart)."""
    import nbformat

    nbf: Any = nbformat  # untyped library
    data = dict(bundle)
    if widget_view:
        data["application/vnd.jupyter.widget-view+json"] = {"model_id": "0" * 32, "version_major": 2,
                                                            "version_minor": 0}
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                           "language": "python"}})
    nb.cells = [nbf.v4.new_code_cell(cell, outputs=[nbf.v4.new_output("display_data", data=data)])]
    nbf.write(nb, path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JupyterLab:
    """`jupyter lab` serving `root_dir`, headless, isolated settings; a context manager."""

    def __init__(self, root_dir: Path, *, theme: str = "JupyterLab Light", timeout: float = 60.0,
                 disabled_extensions: tuple[str, ...] = (), labextension: Path | None = None) -> None:
        """`labextension`: the built rlmnb extension to serve (default: the build beside the imported
        rlmnb package, `rlmnb/labextension`, when there is one), ahead of any installed copy."""
        self.root_dir = Path(root_dir)
        self.disabled_extensions = disabled_extensions
        self.theme = theme
        self.timeout = timeout
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.scratch = Path(tempfile.mkdtemp(prefix="rlmnb-lab-"))
        self.proc: subprocess.Popen[bytes] | None = None
        # the notebook-trust database and its secret live here, so `trust()` and the server agree
        self.data_dir = self.scratch / "data"
        # JUPYTER_PATH comes first in JupyterLab's search for extensions (the user data dir does not: in a
        # venv the environment's share/jupyter wins), so the build under test is the one served
        build = labextension or Path(__file__).resolve().parent.parent / "labextension"
        self.jupyter_path = self.scratch / "path"
        if (build / "package.json").exists():
            (self.jupyter_path / "labextensions").mkdir(parents=True)
            (self.jupyter_path / "labextensions" / "rlmnb-jupyterlab").symlink_to(build.resolve())

    @property
    def env(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(self.jupyter_path), os.environ.get("JUPYTER_PATH", "")) if p)
        return dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.scratch / "runtime"), PYTHONUNBUFFERED="1",
                    JUPYTER_DATA_DIR=str(self.data_dir), JUPYTER_CONFIG_DIR=str(self.scratch / "config"),
                    JUPYTER_PATH=path)

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{sep}token={self.token}"

    def trust(self, notebook: Path) -> None:
        """Sign a notebook as this server's user would (`jupyter trust`): its outputs render as trusted."""
        subprocess.run([self._jupyter(), "trust", str(notebook)], env=self.env, check=True, capture_output=True)

    def _jupyter(self) -> str:
        jupyter = Path(sys.executable).with_name("jupyter")
        return str(jupyter) if jupyter.exists() else "jupyter"

    def start(self) -> JupyterLab:
        settings = self.scratch / "settings"
        # no "get Jupyter news?" / update toasts over the page
        notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        (notification.parent / "themes.jupyterlab-settings").write_text(json.dumps({"theme": self.theme}))
        labconfig = self.scratch / "config" / "labconfig"
        labconfig.mkdir(parents=True)
        disabled = {name: True for name in self.disabled_extensions}
        (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
        cmd = [self._jupyter(), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root_dir}", f"--LabApp.user_settings_dir={settings}",
               f"--LabApp.workspaces_dir={self.scratch / 'workspaces'}", "--LabApp.extension_manager=readonly"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(self.scratch / "server.log", "wb") as logfile:
            self.proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=self.root_dir, start_new_session=True)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {self.timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return (self.scratch / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kernels(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url("api/kernels"), timeout=10) as r:
            return list(json.load(r))

    def stop(self) -> int:
        """Shut the server down (it stops its kernels); kill whatever outlives it. Returns how many were killed."""
        proc, self.proc = self.proc, None
        killed = 0
        if proc is not None:
            try:  # its kernels (and the rlmnb sandbox kernels they start) run in sessions of their own
                import psutil

                children = psutil.Process(proc.pid).children(recursive=True)
            except Exception:
                children = []
            if proc.poll() is None:
                try:
                    req = urllib.request.Request(self.url("api/shutdown"), method="POST")
                    urllib.request.urlopen(req, timeout=10).close()
                except OSError:
                    proc.send_signal(signal.SIGTERM)
                try:  # a clean stop takes a second or two; one still starting a kernel can hang for long
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            for child in children:  # psutil checks the process is still the same one (no pid reuse)
                with contextlib.suppress(Exception):
                    if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                        child.kill()
                        killed += 1
        shutil.rmtree(self.scratch, ignore_errors=True)
        return killed

    def __enter__(self) -> JupyterLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def chromium_page(*, width: int = 1280, height: int = 1400, console: list[str] | None = None) -> Iterator[Any]:
    """A Playwright page in headless Chromium; browser console messages and page errors go to `console`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
            if console is not None:
                page.on("console", lambda m: console.append(f"console.{m.type}: {m.text}"))
                page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def _prompt(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputPrompt")


def run_cell(page: Any, index: int) -> float:
    """Run notebook cell `index` (Ctrl+Enter in command mode); returns the perf_counter() of the key press,
    once the cell's prompt has changed (queued or running)."""
    before = _prompt(page, index).inner_text()
    _prompt(page, index).click()
    page.keyboard.press("Escape")
    pressed = time.perf_counter()
    page.keyboard.press("Control+Enter")
    page.wait_for_function("([el, before]) => el.textContent !== before",
                           arg=[_prompt(page, index).element_handle(), before], timeout=30_000)
    return pressed


def wait_cell(page: Any, index: int, timeout: float = 180) -> None:
    """Wait until notebook cell `index` has finished running (its prompt shows a number, not [*])."""
    prompt = _prompt(page, index)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = prompt.inner_text()
        if "[" in text and "*" not in text and text.strip() != "[ ]:":
            return
        time.sleep(0.2)
    raise AssertionError(f"cell {index} did not finish within {timeout} s")
