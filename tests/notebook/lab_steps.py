"""Steps the notebook browser tests share (not a test module): open a notebook in JupyterLab, run its set-up
cell, start its %%rlm cell."""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import expect

from rlmnb.testing.lab import JupyterLab, run_cell, wait_cell

__all__ = ["open_and_set_up", "start_run_cell"]


def open_and_set_up(page: Any, lab: JupyterLab, notebook: str, cells: int = 2) -> None:
    """Open `notebook` (of at least `cells` cells), wait for its kernel and run its cell 0 (the set-up) to the end."""
    page.goto(lab.url(f"lab/tree/{notebook}?reset"))
    page.locator(".jp-Notebook .jp-Cell").nth(cells - 1).wait_for(timeout=90_000)
    expect(page.locator(".jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus").first).to_be_attached(
        timeout=90_000)
    time.sleep(2)  # the kernel connects
    run_cell(page, 0)
    wait_cell(page, 0)


def start_run_cell(page: Any, lab: JupyterLab, notebook: str) -> Any:
    """Open `notebook`, run its cell 0 (the set-up) to the end and start cell 1; return cell 1's output area."""
    open_and_set_up(page, lab, notebook)
    run_cell(page, 1)
    return page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
