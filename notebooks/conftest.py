"""nbval settings for the tutorials.

nbval compares each cell's outputs with the saved ones, but it does not follow `update_display_data`:
it sees the run view as first displayed (running, empty) while the saved notebook holds the final state
the view was refreshed to. So the run view's own outputs (its trajectory JSON, its HTML tree and its
one-line summary) cannot be compared here; tests/test_notebook_exec.py checks them in a real kernel.
Everything else, the answer in Out[] included, is compared strictly (see sanitize.cfg).
"""

from __future__ import annotations

import pytest

TRAJECTORY_MIME = "application/vnd.rlmnb.trajectory+json"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parent = item.parent
        skip = getattr(parent, "skip_compare", None)
        if isinstance(skip, tuple) and TRAJECTORY_MIME not in skip:
            parent.skip_compare = skip + (TRAJECTORY_MIME,)  # type: ignore[union-attr]
