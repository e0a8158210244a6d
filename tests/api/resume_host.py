"""The host process of the kill-and-resume tests: `python tests/api/resume_host.py URL FOLDER run|resume [TURNS]`.

It runs (or resumes, from the newest journal in FOLDER) one RLM over 500 items against the fake
server at URL: a 500-call `llm_map`, then a submit. It prints the result as one JSON line.
"""

from __future__ import annotations

import json
import sys

from rlmnb import RLM
from rlmnb._engine.journal import journal_paths
from rlmnb.testing.fake_server import lm_for

ITEMS = [f"item-{i:03d}" for i in range(500)]
SETTINGS = {"sandbox": "local", "cache": False, "max_llm_calls": 2_000, "max_concurrency": 8, "min_concurrency": 8,
            "map_retries": 0}


def main() -> None:
    url, folder, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    turns = {"max_iterations": int(sys.argv[4])} if len(sys.argv) > 4 else {}
    rlm = RLM(lm_for(url, "fake-root"), lm_for(url, "fake-sub"), journal=folder, **SETTINGS, **turns)
    if mode == "run":
        result = rlm.run("Upper-case every item and join them with |", items=ITEMS)
    else:
        result = rlm.resume(journal_paths(folder)[0], items=ITEMS)
    print(json.dumps({"status": result.status, "answer": result.answer, "journal": str(result.journal)}), flush=True)


if __name__ == "__main__":
    main()
