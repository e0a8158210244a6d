"""The browser tests' shared fixture (not a test module; conftest.py loads it as a plugin).

`browser_ready` skips a browser test where Chromium or the built extension is missing, and fails it
under CI, where the browser tests must run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlmnb.testing.lab import browser_missing

LABEXTENSION = Path(__file__).resolve().parent.parent / "rlmnb" / "labextension" / "package.json"


@pytest.fixture(scope="module")
def browser_ready() -> None:
    missing = browser_missing() or (None if LABEXTENSION.exists() else
                                    "the extension is not built (pip install -e . builds it with npm)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {missing}")
        pytest.skip(missing)
