import os
import tempfile

# every run writes a journal (rlmnb/_engine/journal.py): in tests, into one throwaway folder, never the checkout
os.environ.setdefault("RLMNB_JOURNAL_DIR", tempfile.mkdtemp(prefix="rlmnb-test-journals-"))

pytest_plugins = ["rlmnb.testing.fixtures", "sandbox_support", "browser_support", "ci_confinement"]
