"""`%%rlm --dry-run` loads no litellm and needs no model (rlmnb/_notebook/dry_run.py), in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlmnb._ground.errors import ConfigError
from rlmnb._notebook.dry_run import NO_MODEL, UnsentModel, unsent

# a fresh interpreter: this test process may have imported litellm for another test
SCRIPT = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
sh = InteractiveShell.instance()
sh.run_line_magic("load_ext", "rlmnb")
sh.user_ns["text"] = "The code is 77. " * 200
report = sh.run_cell_magic("rlm", sys.argv[1], "Which code?")
print(json.dumps({"litellm": "litellm" in sys.modules, "models": list(report.models), "tokens": report.tokens,
                  "priced": report.estimate.low_usd is not None, "roles": [m["role"] for m in report.messages]}))
"""


def _dry_run(line: str) -> dict[str, object]:
    env_free = {"RLMNB_MODEL": "", "RLMNB_SUB_MODEL": ""}  # no model from the environment
    out = subprocess.run([sys.executable, "-c", SCRIPT, line], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env_free})
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.integration
def test_a_dry_run_with_a_litellm_model_does_not_import_litellm() -> None:
    seen = _dry_run("-m openai/gpt-4o-mini -i text --dry-run")
    assert seen["litellm"] is False and seen["models"] == ["openai/gpt-4o-mini", "openai/gpt-4o-mini"]
    assert seen["priced"] is True and seen["roles"] == ["system", "user"]  # priced from the bundled table


@pytest.mark.integration
def test_a_dry_run_without_a_model_says_what_would_run() -> None:
    seen = _dry_run("-i text --dry-run")
    assert seen["litellm"] is False and seen["models"] == [NO_MODEL, NO_MODEL]
    assert int(str(seen["tokens"])) > 0 and seen["priced"] is False  # the request is built; its cost is unknown


def test_a_name_is_checked_as_a_run_checks_it() -> None:
    with pytest.raises(ConfigError, match="openai/gpt-4o"):
        unsent("gpt-4o")
    stand_in = unsent("openai/gpt-4o-mini")
    assert isinstance(stand_in, UnsentModel) and stand_in.context_window and stand_in.context_window > 100_000
    model = object()
    assert unsent(model) is model and unsent(None).name == NO_MODEL
