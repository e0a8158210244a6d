"""Fixtures of the sandbox tests only (the sandbox helpers several folders share are in sandbox_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rlmnb._sandbox.kernel.warm import pool


@pytest.fixture(scope="module")
def stop_the_spare() -> Iterator[None]:
    """Stop the warm spare kernel when the module ends (the next module starts from a fresh pool)."""
    yield
    pool.shutdown(reopen=True)
