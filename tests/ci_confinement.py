"""In CI, a confinement test that skips on a machine with Landlock is a failure (a pytest plugin).

A skipped attack test proves nothing, and a skip is easy to miss in a green run. Where `CI` is set and
the kernel has Landlock, a skip in one of CONFINEMENT_TESTS becomes a failure with a loud message,
unless its reason carries CI_SKIP_OK (a kernel feature that is absent, e.g. SCTP, not confinement).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

CONFINEMENT_TESTS = ("test_confinement.py", "test_cli_confinement.py", "test_warm.py", "test_policy.py",
                     "test_seccomp.py", "test_namespaces.py")
CI_SKIP_OK = "(allowed in CI)"  # a skip reason that names a missing kernel feature, not missing confinement


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and os.environ.get("CI") and item.path.name in CONFINEMENT_TESTS):
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    from rlmnb._sandbox.confinement import landlock

    if CI_SKIP_OK in reason or landlock.abi_version() < 1:
        return
    report.outcome = "failed"
    report.longrepr = (f"CONFINEMENT TEST SKIPPED IN CI ON A MACHINE WITH LANDLOCK (ABI {landlock.abi_version()}): "
                       f"{reason}. A skipped confinement test proves nothing; make it run here.")
