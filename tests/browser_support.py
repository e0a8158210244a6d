"""The browser tests' shared fixture (not a test module; conftest.py loads it as a plugin).

`browser_ready` skips a browser test where Chromium or the built extension is missing, and fails it
under CI, where the browser tests must run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlmnb.testing.lab import browser_missing

# JavaScript for colour checks in the page: `lum(css colour)` is its relative luminance (0 dark, 1 light) and
# `bg(element)` the background it sits on (the first ancestor that paints one)
COLOUR_HELPERS = """const lum = c => { const m = (c.match(/[\\d.]+/g) || ['255', '255', '255']).map(Number);
                     return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; };
  const bg = e => { for (; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;
                                                    const m = c.match(/[\\d.]+/g);
                                                    if (m && (m.length < 4 || Number(m[3]) > 0.5)) return c; }
                    return 'rgb(255, 255, 255)'; };"""

LABEXTENSION = Path(__file__).resolve().parent.parent / "rlmnb" / "labextension" / "package.json"


@pytest.fixture(scope="module")
def browser_ready() -> None:
    missing = browser_missing() or (None if LABEXTENSION.exists() else
                                    "the extension is not built (pip install -e . builds it with npm)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {missing}")
        pytest.skip(missing)
