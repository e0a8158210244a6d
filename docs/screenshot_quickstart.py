"""Take the README's 60-second quickstart in JupyterLab, light and dark: its two cells run as written.

    PYTHONPATH=$PWD .venv/bin/python docs/screenshot_quickstart.py   # ~1 min; docs/quickstart_{light,dark}.png

A real JupyterLab (headless, throwaway settings, the worktree's extension build) and Chromium run the two
cells of README.md's "60-second quickstart" (read from the README, so the picture is of what it says), then
the notebook's cells are shot once the run has ended. Look at each picture before committing it.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlmnb.testing.lab import JupyterLab, browser_missing, chromium_page, run_cell, wait_cell

DOCS = Path(__file__).resolve().parent
README = DOCS.parent / "README.md"


def quickstart_cells() -> list[str]:
    """The code blocks of README.md's 60-second quickstart, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## 60-second quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```(?:python|text)\n(.*?)```", section, re.S)]


def shoot(theme: str, suffix: str, folder: Path) -> Path:
    import nbformat

    nbf: Any = nbformat
    nb = nbf.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                          "language": "python"}})
    cells = quickstart_cells()
    nb.cells = [nbf.v4.new_code_cell(src) for src in cells]
    nbf.write(nb, folder / f"quickstart_{suffix}.ipynb")
    out = DOCS / f"quickstart_{suffix}.png"
    with JupyterLab(folder, theme=theme) as lab, chromium_page(width=1400, height=1000) as page:
        page.goto(lab.url(f"lab/tree/quickstart_{suffix}.ipynb?reset"))
        page.locator(".jp-Notebook .jp-Cell").nth(len(cells) - 1).wait_for(timeout=90_000)
        time.sleep(3)
        for index in range(len(cells)):
            run_cell(page, index)
            wait_cell(page, index)
        last = page.locator(".jp-Notebook .jp-Cell").nth(len(cells) - 1)
        last.locator(".rlmnb-view").wait_for(timeout=60_000)  # the finished run's view
        first = page.locator(".jp-Notebook .jp-Cell").nth(0)
        top, bottom = first.bounding_box(), last.bounding_box()
        assert top is not None and bottom is not None
        page.set_viewport_size({"width": 1400, "height": int(bottom["y"] + bottom["height"]) + 80})
        time.sleep(1.0)
        top, bottom = first.bounding_box(), last.bounding_box()
        assert top is not None and bottom is not None
        page.screenshot(path=str(out), clip={"x": top["x"], "y": top["y"], "width": top["width"],
                                             "height": bottom["y"] + bottom["height"] - top["y"] + 8})
    return out


def main() -> int:
    missing = browser_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="rlmnb-quickstart-"))
    for theme, suffix in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        print(f"wrote {shoot(theme, suffix, folder).relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
