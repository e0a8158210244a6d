"""Harness time per turn: a zero-latency scripted model in the local sandbox, model time excluded.

Goal (issue 2): under 2 ms per turn. Prints the per-turn harness time for runs of several lengths
and the share spent in the model call (which is excluded).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from typing import Any

from rlmnb import RLM
from rlmnb._models.base import Completion
from rlmnb.testing import ScriptedLM


class TimedLM(ScriptedLM):
    """A ScriptedLM that records the time spent inside its own calls (the 'model time')."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.model_s = 0.0

    async def acomplete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        started = time.perf_counter()
        try:
            return await super().acomplete(messages, **params)
        finally:
            self.model_s += time.perf_counter() - started


def one_run(turns: int) -> tuple[float, float]:
    replies = ["```python\nx = 1\n```"] * (turns - 1) + ["```python\nsubmit(x)\n```"]
    root = TimedLM(replies, count_usage=False)
    rlm = RLM(root, sandbox="local", max_iterations=turns, allow_first_turn_submit=True)
    started = time.perf_counter()
    result = rlm.run("What is x?", text="abc")
    wall = time.perf_counter() - started
    assert result.status == "submitted", result.reason
    return wall, root.model_s


def main() -> None:
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}")
    one_run(5)  # warm-up: imports, tiktoken, caches
    print(f"{'turns':>6} {'wall ms':>9} {'model ms':>9} {'harness ms/turn':>16}  goal < 2 ms")
    worst = 0.0
    for turns in (10, 50, 200):
        samples = []
        for _ in range(5):
            wall, model = one_run(turns)
            samples.append((wall - model) / turns * 1000)
        per_turn = statistics.median(samples)
        worst = max(worst, per_turn)
        wall, model = one_run(turns)
        print(f"{turns:>6} {wall * 1000:>9.1f} {model * 1000:>9.1f} {per_turn:>16.3f}  "
              f"{'PASS' if per_turn < 2 else 'MISS'}")
    print(f"worst harness time per turn: {worst:.3f} ms ({'PASS' if worst < 2 else 'MISS'})")
    sys.exit(0)


if __name__ == "__main__":
    main()
