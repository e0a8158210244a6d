"""Compaction by summary: a small-window run that needs a fact from a dropped turn gets it right with
`compaction="summarize"` and wrong with `"drop"`."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._ground.errors import ConfigError
from rlmnb.events import ModelReply, TurnsTrimmed
from rlmnb.testing import ScriptedLM

CODE_WORD = re.compile(r"the code word is (\w+)")


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def root_model() -> ScriptedLM:
    """Turn 1 prints a fact (only its output holds it); turns 2-5 print noise; turn 6 submits the fact
    it can still see, or 'unknown'. Asked to summarise, it keeps the lines that state the fact."""
    turns = iter(range(1, 100))

    def reply(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if "about to be removed" in last:
            seen = [m for m in CODE_WORD.findall(" ".join(str(m["content"]) for m in messages))]
            return f"Turn 1 printed: the code word is {seen[0]}." if seen else "Nothing to keep."
        turn = next(turns)
        if turn == 1:
            return code("print('the code word is ' + 'ze' + 'bra')")
        if turn < 6:
            return code(f"print(' '.join('n{turn}x' + str(i) for i in range(700)))")
        found = CODE_WORD.findall(" ".join(str(m["content"]) for m in messages if m["role"] == "user"))
        return code(f"submit({(found[-1] if found else 'unknown')!r})")

    return ScriptedLM(reply, name="root")


@pytest.mark.parametrize(("compaction", "answer"), [("summarize", "zebra"), ("drop", "unknown")])
def test_a_fact_from_a_dropped_turn_survives_only_a_summary(compaction: str, answer: str) -> None:
    rlm = RLM(root_model(), ScriptedLM(lambda m: "sub", name="sub"), sandbox="local", max_context_tokens=2500,
              max_output_chars=4000, compaction=compaction,
              evidence_check=False)  # 'unknown' is a guess the check would send back once; this test is about trims
    result = rlm.run("What is the code word?", text="alpha")
    assert result.answer == answer, result.error
    dropped = sorted(t for e in result.trajectory.of(TurnsTrimmed) for t in e.dropped)
    assert 1 in dropped  # the fact's turn left the conversation either way
    compactions = [e for e in result.trajectory.of(ModelReply) if e.purpose == "compact"]
    assert len(compactions) == (len(result.trajectory.of(TurnsTrimmed)) if compaction == "summarize" else 0)
    assert result.usage.root_calls == 6 + len(compactions)  # a summary is a root call, counted


def test_compaction_takes_only_known_values() -> None:
    with pytest.raises(ConfigError, match="compaction must be one of drop, summarize"):
        RLM(ScriptedLM(["x"]), compaction="shrink")
