import os
import shutil
import tempfile
from typing import Any

# every run writes a journal (rlmnb/_engine/journal.py): in tests, into one throwaway folder, never the checkout,
# removed when the session ends (unless the environment named a folder of its own)
_JOURNALS = None if "RLMNB_JOURNAL_DIR" in os.environ else tempfile.mkdtemp(prefix="rlmnb-test-journals-")
if _JOURNALS is not None:
    os.environ["RLMNB_JOURNAL_DIR"] = _JOURNALS

pytest_plugins = ["rlmnb.testing.fixtures", "sandbox_support", "browser_support", "ci_confinement"]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _JOURNALS is not None:
        shutil.rmtree(_JOURNALS, ignore_errors=True)
