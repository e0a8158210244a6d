"""Sub-call fan-out on the host: one slow or failing prompt never holds back or fails the others."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmnb import RLM
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion
from rlmnb.events import SubCallFinished, SubCallSent
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


class EmptyOnceLM:
    """Answers with no content the first time each prompt is asked, then with the prompt upper-cased."""

    name = "empty-once"

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}

    async def acomplete(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        prompt = messages[-1]["content"]
        self.asked[prompt] = self.asked.get(prompt, 0) + 1
        return Completion("" if self.asked[prompt] == 1 else prompt.upper(), CallUsage(1, 1))


def test_a_call_is_sent_once_even_when_asked_again() -> None:
    """SubCaller.send emits SubCallSent on a call's first send only; the retry of an empty reply is the same call."""
    sub = EmptyOnceLM()
    root = ScriptedLM(["```python\nr = llm_query_batched(['a', 'b'])\nprint(r)\n```", "```python\nsubmit(r)\n```"])
    result = RLM(root, sub, sandbox="local").run("q", text="t")
    assert result.answer == ["A", "B"]
    assert sub.asked == {"a": 2, "b": 2}
    sent = [e.call_id for e in result.trajectory.of(SubCallSent)]
    finished = result.trajectory.of(SubCallFinished)
    assert sorted(sent) == sorted(e.call_id for e in finished) and len(sent) == 2
    assert all(e.meta.get("asked_again") for e in finished)
