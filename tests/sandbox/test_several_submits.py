"""submit() called more than once at the top of one step: refused in one line, nothing run, the run goes on.

Recorded on RULER's four-key needle (issue 44): the first reading found all four numbers, the root wrote
`submit(a)` `submit(b)` `submit(c)` `submit(d)` in one block, and only the first counted.
"""

from __future__ import annotations

import pytest
from sandbox_support import KINDS, code

from rlmnb import RLM
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM


@pytest.mark.parametrize("kind", KINDS)
def test_several_submits_in_one_step_are_refused_and_the_next_step_submits_them_all(kind: str) -> None:
    root = ScriptedLM([code("a, b = inputs['text'].split()\nprint(a, b)"), code("submit(a)\nsubmit(b)"),
                       code("submit([a, b])")])
    result = RLM(root, ScriptedLM(["x"]), sandbox=kind, max_iterations=3).run("q", text="alpha beta")
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert executed[1].error_type == "SeveralSubmits" and len(executed) == 3
    assert (result.status, result.answer) == ("submitted", ["alpha", "beta"])


@pytest.mark.parametrize("body", ["if a:\n    submit(a)\nelse:\n    submit(b)",
                                  "for v in [a]:\n    submit(v)\nsubmit(b)",
                                  "def done(x):\n    submit(x)\ndone(a)"])
def test_submits_in_branches_loops_or_functions_are_the_models_control_flow(body: str) -> None:
    root = ScriptedLM([code("a, b = inputs['text'].split()\nprint(a, b)"), code(body)])
    result = RLM(root, ScriptedLM(["x"]), sandbox="local", max_iterations=2).run("q", text="alpha beta")
    assert (result.status, result.answer) == ("submitted", "alpha")
