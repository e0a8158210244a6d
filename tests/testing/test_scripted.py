"""ScriptedLM: a script that runs out says how many replies it holds, which was asked for, and what to add."""

from __future__ import annotations

import pytest

from rlmnb import RLM
from rlmnb._ground.errors import ScriptExhausted
from rlmnb.testing import ScriptedLM


def step(body: str) -> str:
    return f"```python\n{body}\n```"


def test_running_out_names_the_count_and_the_request() -> None:
    lm = ScriptedLM(["one"], name="root")
    lm.complete([{"role": "user", "content": "first"}])
    with pytest.raises(ScriptExhausted) as caught:
        lm.complete([{"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
                     {"role": "user", "content": "the closing call"}])
    text = str(caught.value)
    assert "'root'" in text and " 1," in text and "reply 2" in text and "the closing call" in text


def test_a_script_of_n_replies_under_n_turns_needs_one_more_for_the_closing_call() -> None:
    replies = [step("print(1)"), step("print(2)")]
    short = RLM(ScriptedLM(list(replies), name="root"), sandbox="local", max_iterations=2).run("q", text="t")
    assert short.status == "error" and short.error is not None and short.error.startswith("ScriptExhausted")
    assert "reply 3" in short.reason
    enough = RLM(ScriptedLM([*replies, "The answer is 2."], name="root"), sandbox="local",
                 max_iterations=2).run("q", text="t")
    assert enough.status == "fallback"
