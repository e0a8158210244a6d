"""What each run of an evaluation would cost, before anything runs (`--dry-run`, `--max-cost`).

RLM methods use the same bracketing estimate as `%%rlm --dry-run` (`rlmnb._engine.estimate.estimate_run`): a
lean run (a few turns, one read of the input by sub-calls) and a whole-budget run. `direct` is one call
whose prompt is the input cut to the window. Peers are estimated like `rlm`. A cost is None when a
model has no known price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmnb._eval.methods import REPLY_TOKENS, DirectMethod, RLMMethod, Setup
from rlmnb._eval.tasks import Instance


@dataclass(frozen=True)
class JobCost:
    """The low (lean) and high (whole budget) cost of one run in US dollars; None when unpriced."""

    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None


def estimate_job(method: Any, instance: Instance, setup: Setup) -> JobCost:
    """The cost bracket of `method` on `instance` (no model is called)."""
    from rlmnb._engine.estimate import price_of
    from rlmnb._eval.wallet import priced

    if isinstance(method, DirectMethod):
        price = price_of(priced(setup.model))
        if price is None:
            return JobCost(None, None)
        prompt = min(instance.tokens, method.window(setup)) + 200
        cost = price.cost(prompt, REPLY_TOKENS // 10)
        return JobCost(cost, price.cost(prompt, REPLY_TOKENS))
    rlm_method = method if isinstance(method, RLMMethod) else RLMMethod("rlm")
    rlm = rlm_method.rlm(setup, None)
    from rlmnb._engine.estimate import estimate_run

    first = _first_prompt_tokens(rlm, instance)
    estimate = estimate_run(first_prompt_tokens=first, data_tokens=instance.tokens if rlm_method.sub_calls else 0,
                            config=rlm.config, model=priced(rlm.model), sub_model=priced(rlm.sub_model))
    return JobCost(estimate.low_usd, estimate.high_usd)


def _first_prompt_tokens(rlm: Any, instance: Instance) -> int:
    """Tokens of the first root request: the system prompt, the question and the inputs summary."""
    report = rlm.dry_run(instance.question, **instance.inputs)
    return int(report["tokens"])
