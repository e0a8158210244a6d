"""Caps that hold: max_cost needs prices, and calls reserve their estimated price and tokens first (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._engine.budget import REPLY_ESTIMATE, Budget
from rlmnb._engine.estimate import Price
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted, ConfigError
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion, Message
from rlmnb._models.litellm import LiteLLM
from rlmnb.testing import ScriptedLM

UNPRICED = "openai/rlmnb-unpriced-model"


def unpriced() -> LiteLLM:
    return LiteLLM(UNPRICED, api_base="http://127.0.0.1:9/v1", api_key="x")


class PricedLM:
    """A scripted model with a price: each call costs its tokens (prompt and reply) at `per_token` dollars."""

    def __init__(self, inner: ScriptedLM, per_token: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.input_cost_per_token = per_token
        self.output_cost_per_token = per_token
        self.calls = 0

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        self.calls += 1
        done = await self.inner.acomplete(messages, **params)
        usage = done.usage
        cost = (usage.input_tokens + usage.output_tokens) * self.input_cost_per_token
        return Completion(done.text, CallUsage(usage.input_tokens, usage.output_tokens, cost), done.model,
                          done.meta, done.finish_reason, done.reasoning)


def test_max_cost_with_an_unpriced_model_is_refused_before_any_call() -> None:
    with pytest.raises(ConfigError, match=rf"max_cost needs a price for {UNPRICED}.*input_cost_per_token="):
        RLM(unpriced(), sandbox="local", max_cost=0.000001)
    with pytest.raises(ConfigError, match="needs a price for"):
        RLM(ScriptedLM(["x"]), unpriced(), sandbox="local", max_cost=1.0)
    priced = LiteLLM(UNPRICED, api_base="http://127.0.0.1:9/v1", api_key="x", input_cost_per_token=1e-6,
                     output_cost_per_token=2e-6)
    RLM(priced, sandbox="local", max_cost=1.0)  # a price given on the model is enough
    RLM(unpriced(), sandbox="local")  # no cap, no price needed


def test_reservations_hold_cost_and_tokens_for_calls_in_flight() -> None:
    budget = Budget(RLMConfig(max_cost=0.01, max_tokens=12_000), price_of=lambda lm: Price(1e-6, 1e-6, "test"))
    tokens, cost = budget.estimate("m", 500)
    assert tokens == 500 + REPLY_ESTIMATE and cost == pytest.approx(1500e-6)
    held = [budget.reserve("r", 1, est_tokens=tokens, est_cost=cost) for _ in range(6)]  # $0.009 in flight
    with pytest.raises(BudgetExhausted, match="Cost budget would be passed"):
        budget.reserve("r", 1, est_tokens=tokens, est_cost=cost)
    budget.settle(held[0], CallUsage(500, 10, cost_usd=510e-6))  # settled below its estimate: room again
    budget.reserve("r", 1, est_tokens=tokens, est_cost=cost)
    budget.release(held[1])
    with pytest.raises(BudgetExhausted, match="Token budget"):
        budget.reserve("r", 3, est_tokens=3 * tokens)  # 8,010 used or held + 4,500


def test_a_run_never_passes_max_cost_by_more_than_its_calls_in_flight() -> None:
    loop = ("```python\nout = []\nfor i in range(200):\n    try:\n        out.append(llm_query(f'q{i} ' + 'x' * 400))\n"
            "    except Exception as e:\n        print(type(e).__name__, str(e)[:60]); break\nprint(len(out))\n```")
    root = PricedLM(ScriptedLM([loop, "```python\nsubmit(len(out))\n```"], name="root"), 1e-6)
    sub = PricedLM(ScriptedLM(lambda m: "ok", name="sub"), 1e-6)
    result = RLM(root, sub, sandbox="local", max_cost=0.005, max_llm_calls=500).run("q", x=1)
    assert 0 < sub.calls < 200  # the cap stopped the loop
    assert result.usage.cost_usd <= 0.005  # each call reserved more than it cost: never passed
    batch = ("```python\nr = llm_query_batched(['y' * 400] * 100)\nprint(r[0][:40])\n```")
    sub2 = PricedLM(ScriptedLM(lambda m: "ok", name="sub"), 1e-6)
    root2 = PricedLM(ScriptedLM([batch, "```python\nsubmit(1)\n```"], name="root"), 1e-6)
    RLM(root2, sub2, sandbox="local", max_cost=0.005, max_llm_calls=500).run("q", x=1)
    assert sub2.calls == 0  # the batch's estimate did not fit: refused whole, nothing sent
