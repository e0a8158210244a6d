import os
import shutil
import signal
import tempfile
from typing import Any

# the Ctrl-C tests interrupt the main thread as a terminal would: a suite started in the background by a shell
# without job control (`make test &` in a script, some CI runners) inherits SIGINT ignored, and Python then
# leaves it ignored, so no Ctrl-C would arrive; give the session Python's own handler (recorded: ten Ctrl-C tests
# failed in a CI run launched with `(bash .ci/run &)`, all passing in the foreground)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# every run writes a journal (rlmnb/_engine/journal.py): in tests, into one throwaway folder, never the checkout,
# removed when the session ends (unless the environment named a folder of its own)
_JOURNALS = None if "RLMNB_JOURNAL_DIR" in os.environ else tempfile.mkdtemp(prefix="rlmnb-test-journals-")
if _JOURNALS is not None:
    os.environ["RLMNB_JOURNAL_DIR"] = _JOURNALS

pytest_plugins = ["rlmnb.testing.fixtures", "sandbox_support", "browser_support", "ci_confinement"]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _JOURNALS is not None:
        shutil.rmtree(_JOURNALS, ignore_errors=True)
