"""Code that repeats an earlier step runs again when a step since bound a name (issue 44).

Reported: a correct filter followed by `print(len(t))` was not run again ("prints the same"), though the frame
had changed from 13 rows to 8, and the run ended with the stale 13.
"""

from __future__ import annotations

import pandas as pd
import pytest
from sandbox_support import KINDS, code

from rlmnb import RLM
from rlmnb._engine.replies import Repeats, names_bound, names_read
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_print_runs_again_after_the_frame_it_reads_changed(kind: str) -> None:
    frame = pd.DataFrame({"x": range(13)})
    root = ScriptedLM([code("t = inputs['df']\nprint(len(t))"), code("print(len(t))"),
                       code("t = t[t.x > 4]"), code("print(len(t))"), code("submit(len(t))")])
    result = RLM(root, ScriptedLM(["x"]), sandbox=kind, max_iterations=5).run("How many rows have x > 4?", df=frame)
    printed = [e.stdout.strip() for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert "8" in printed and (result.status, result.answer) == ("submitted", 8)


def test_a_step_repeated_with_nothing_bound_since_is_still_a_repeat() -> None:
    repeats = Repeats()
    repeats.check(1, "print(len(t))", "13")
    assert repeats.ran("print(len(t))") == 1
    repeats.check(2, "print(t.head())", "...")  # reads only
    repeats.check(3, "found = [c for c in chunks if 'key' in c]", "")  # binds a name the step does not read
    assert repeats.ran("print(len(t))") == 1
    repeats.check(4, "t = t[t.x > 4]", "")
    assert repeats.ran("print(len(t))") is None
    assert names_bound("import os.path as p, sys") == {"p", "sys"}
    assert names_bound("with open('f') as f:\n    rows.append(1)") == {"f", "rows"}
    assert names_bound("t['y'] = 1\nfor i, r in x:\n    pass\ndef g(): pass") == {"t", "i", "r", "g"}
    assert names_bound("def f(") == {"*"} and names_bound("print(len(t))") == set()
    assert names_read("chunks = [text[i:i + 9] for i in range(n)]\nf = lambda k: k + m") == {"text", "range", "n", "m"}
