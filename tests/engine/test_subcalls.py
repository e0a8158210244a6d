"""Sub-call fan-out on the host: one slow or failing prompt never holds back or fails the others."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmnb import RLM
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion
from rlmnb.events import SubCallFinished
from rlmnb.testing import ScriptedLM


class UnevenLM:
    """'slow' waits until every other prompt has been answered; 'fail' raises; others answer at once."""

    name = "uneven"

    def __init__(self, others: int) -> None:
        self.others = others
        self.answered = 0
        self.all_answered = asyncio.Event()

    async def acomplete(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        prompt = messages[-1]["content"]
        if prompt == "slow":
            await asyncio.wait_for(self.all_answered.wait(), 10)  # would time out if the others waited for it
            return Completion("slow done", CallUsage(1, 1))
        if prompt == "fail":
            self._count()
            raise ConnectionError("provider hung up")
        self._count()
        return Completion(prompt.upper(), CallUsage(1, 1))

    def _count(self) -> None:
        self.answered += 1
        if self.answered == self.others:
            self.all_answered.set()


def test_one_slow_or_failing_prompt_never_holds_back_the_others() -> None:
    prompts = ["slow", "a", "b", "fail", "c", "d", "e"]
    sub = UnevenLM(others=len(prompts) - 1)
    root = ScriptedLM([f"```python\nr = llm_query_batched({prompts!r})\nprint(r)\n```", "```python\nsubmit(r)\n```"])
    result = RLM(root, sub, sandbox="local", max_concurrency=2, min_concurrency=1).run("q", text="t")
    assert result.answer == ["slow done", "A", "B", "[error] ConnectionError: provider hung up", "C", "D", "E"]
    finished = [e for e in result.trajectory.of(SubCallFinished)]
    assert finished[-1].reply == "slow done"  # everything else finished while the slow one was in flight
    assert result.usage.sub_calls == len(prompts)
